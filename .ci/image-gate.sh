#!/usr/bin/env bash
# The image pipeline's gate for one CPU stack, on this machine's CPU: build the image from its stack with
# rocmkit's real BuildKit build (offline: the wheelhouse of 50-cpu-stacks.sh, --network none, the local base
# image), check it with `rocmkit doctor --image`, and certify it inside with the engine the arguments name:
#   bash .ci/image-gate.sh verl-cpu --engine verl                                  # real verl GRPO
#   bash .ci/image-gate.sh trl-cpu --engine trl --vllm-mode server --steps 12      # TRL's vLLM server mode
# The image then serves the tests (ROCMKIT_TEST_<STACK>_IMAGE). Each step's exit code stops CI.
set -euo pipefail
stack=${1:?usage: image-gate.sh STACK CERTIFY-ARGS...}
shift
work="${ROCMKIT_CI_WORK:?set by .ci/run}"
# shellcheck disable=SC1091
source "$work/env"
var=$(echo "$stack" | tr 'a-z-' 'A-Z_')
wheelhouse_var="ROCMKIT_${var}_WHEELHOUSE"
image="rocmkit-ci/$stack:gate"
out="$work/certify-$stack"

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

echo "== rocmkit doctor --image $image"
# Any warning the build caused stops CI (.ci/doctor_gate.py says which count); the host's own (no GPU, the
# container's memlock limit) do not. The whole report stays in $report.
report="$work/doctor-$stack.json"
doctor_rc=0
rocmkit doctor --image "$image" --json > "$report" || doctor_rc=$?
python3 "$(dirname "$0")/doctor_gate.py" "$report"
[ "$doctor_rc" = 0 ] || { echo "rocmkit doctor --image exited $doctor_rc (report: $report)" >&2; exit "$doctor_rc"; }

echo "== rocmkit certify --image $image $* --gpus 0"
rm -rf "$out"
rocmkit certify --image "$image" "$@" --gpus 0 --out "$out" --progress plain
python3 - "$out/certificate.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
m = c["metrics"]
server = f"; server log {c['files']['server_log']}" if c.get("files", {}).get("server_log") else ""
print(f"verdict {c['verdict']}; device {c['device']}; {m['steps']} steps; reward {m['reward']['first']} -> "
      f"{m['reward']['last']}; whole {c['timings']['whole_s']} s (setup {c['timings']['setup_s']} s, "
      f"run {c['timings']['run_s']} s){server}")
print("timeline: " + "; ".join(f"{t['at_s']:.0f} s {t['detail']}" for t in c.get("timeline", [])[:6])
      + f"; longest silence {c['run'].get('longest_silence_s')} s")
for row in m["per_step"]:
    print("  ", row)
PY
echo "export ROCMKIT_TEST_${var}_IMAGE=$image" >> "$work/env"
