#!/usr/bin/env bash
# The image pipeline's gate for one CPU stack, on this machine's CPU: build the image from its stack with
# rocmkit's real BuildKit build (.ci/image-build.sh: offline, from the wheelhouse of 50-cpu-stacks.sh; skipped with
# IMAGE_GATE_BUILT=1, when .ci/run has built it already), check it with `rocmkit doctor --image`, and certify it
# inside with the engine the arguments name:
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
image="rocmkit-ci/$stack:gate"
out="$work/certify-$stack"

# .ci/run builds both CPU stacks' images side by side first (.ci/image-build.sh) and says so: then only check here.
if [ "${IMAGE_GATE_BUILT:-}" != 1 ]; then
  bash "$(dirname "$0")/image-build.sh" "$stack"
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
