#!/usr/bin/env bash
# The image pipeline's gate, on this machine's CPU: build the verl-cpu image from its stack with rocmkit's
# real BuildKit build (offline: the wheelhouse of 50-verl-cpu.sh, --network none, the local base image),
# check it with `rocmkit doctor --image`, and certify it with a real verl GRPO run inside it. The image then
# serves the certify tests (ROCMKIT_TEST_VERL_CPU_IMAGE). Each step's exit code stops CI.
set -euo pipefail
work="${ROCMKIT_CI_WORK:?set by .ci/run}"
# shellcheck disable=SC1091
source "$work/env"
image=rocmkit-ci/verl-cpu:gate
out="$work/certify-verl-cpu"

echo "== rocmkit build --stack verl-cpu"
# BuildKit's lines go to the log file (its tail is printed if the build fails); the summary to CI's log.
rocmkit build --stack verl-cpu --base-image "$ROCMKIT_TEST_BASE_IMAGE" --wheelhouse "$ROCMKIT_VERL_CPU_WHEELHOUSE" \
  --network none --tag "$image" --progress plain --log-file "$work/build-verl-cpu.log" \
  2> "$work/build-verl-cpu.stderr" || { tail -n 60 "$work/build-verl-cpu.stderr" >&2; exit 1; }

echo "== rocmkit doctor --image $image"
rocmkit doctor --image "$image"

echo "== rocmkit certify --image $image --engine verl --gpus 0"
rm -rf "$out"
rocmkit certify --image "$image" --engine verl --gpus 0 --out "$out" --progress plain
python3 - "$out/certificate.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
m = c["metrics"]
print(f"verdict {c['verdict']}; device {c['device']}; {m['steps']} steps; reward {m['reward']['first']} -> "
      f"{m['reward']['last']}; whole {c['timings']['whole_s']} s (setup {c['timings']['setup_s']} s, "
      f"run {c['timings']['run_s']} s)")
for row in m["per_step"]:
    print("  ", row)
PY
echo "export ROCMKIT_TEST_VERL_CPU_IMAGE=$image" >> "$work/env"
