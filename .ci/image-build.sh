#!/usr/bin/env bash
# One CPU stack's image, for its gate (.ci/image-gate.sh) and the tests: rocmkit's real BuildKit build, offline (the
# wheelhouse of 50-cpu-stacks.sh, --network none, the local base image of 20-docker.sh), tagged rocmkit-ci/STACK:gate.
# Nothing here is timed or judged, so .ci/run builds both CPU stacks side by side; their certifications, which a
# stall watchdog judges, run one at a time after.
#   bash .ci/image-build.sh verl-cpu
set -euo pipefail
stack=${1:?usage: image-build.sh STACK}
work="${ROCMKIT_CI_WORK:?set by .ci/run}"
# shellcheck disable=SC1091
source "$work/env"
var=$(echo "$stack" | tr 'a-z-' 'A-Z_')
wheelhouse_var="ROCMKIT_${var}_WHEELHOUSE"
image="rocmkit-ci/$stack:gate"

echo "== rocmkit build --stack $stack"
# The image this tag held before (an earlier CI run on this machine): removed once the new one is built, so a
# reused machine does not gather a 4 GB image per run until its disk is full.
previous=$("$ROCMKIT_DOCKER" image inspect -f '{{.Id}}' "$image" 2>/dev/null || true)
# BuildKit's lines go to the log file (its tail is printed if the build fails); the summary to CI's log.
rocmkit build --stack "$stack" --base-image "$ROCMKIT_TEST_BASE_IMAGE" --wheelhouse "${!wheelhouse_var}" \
  --network none --tag "$image" --progress plain --log-file "$work/build-$stack.log" \
  2> "$work/build-$stack.stderr" || { tail -n 60 "$work/build-$stack.stderr" >&2; exit 1; }
if [ -n "$previous" ] && [ "$previous" != "$("$ROCMKIT_DOCKER" image inspect -f '{{.Id}}' "$image")" ]; then
  "$ROCMKIT_DOCKER" image rm "$previous" >/dev/null 2>&1 || echo "note: the previous $image ($previous) is still in use; kept"
fi
