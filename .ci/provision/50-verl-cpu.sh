#!/usr/bin/env bash
# The verl-cpu stack's packages, for the image gate (.ci/image-gate.sh) and the host verl run of the tests:
# one wheelhouse made by `rocmkit wheelhouse` (PyPI, and torch's CPU build that lies on this machine's
# disk), which the image build uses with no network at all, and a venv on this host installed from it the
# way the image installs (base pins, then the components resolved together, then the no-deps ones).
# Idempotent: an existing wheelhouse and venv are kept.
set -euo pipefail
work="${ROCMKIT_CI_WORK:?set by .ci/run}"
py="$work/venv/bin/python"
wh="$work/wheelhouse/verl-cpu"
venv="$work/venv-verl-cpu"

if [ ! -f "$wh/wheelhouse.json" ]; then
  # The stack names download.pytorch.org for torch's CPU build; it is unreachable here (the wheel is on
  # this machine's disk), and pip's default retries would cost seconds on every package.
  PIP_RETRIES=0 "$py" -m rocmkit wheelhouse --stack verl-cpu "$wh" > "$work/wheelhouse-verl-cpu.log" 2>&1 \
    || { tail -n 30 "$work/wheelhouse-verl-cpu.log" >&2; exit 1; }
fi
du -sh "$wh"

if [ ! -x "$venv/bin/rocmkit" ]; then
  python3 -m venv "$venv"
  # The stack's own pip steps, in the image's order, read from the stack file through rocmkit.
  "$py" - "$work" <<'PY'
import sys
from pathlib import Path
from rocmkit import stacks
from rocmkit.image.wheelhouse import pip_calls
stack = stacks.load("verl-cpu")
calls = pip_calls(stack)
out = Path(sys.argv[1])
(out / "verl-cpu-base.txt").write_text("\n".join(stack.base.pip) + "\n")
(out / "verl-cpu-together.txt").write_text("\n".join(calls[0].requirements) + "\n")
(out / "verl-cpu-nodeps.txt").write_text("\n".join(r for c in calls[1:] for r in c.requirements) + "\n")
(out / "verl-cpu-remove.txt").write_text("\n".join(r for c in stack.pip_components for r in c.remove) + "\n")
PY
  pip="$venv/bin/python -m pip install -q --no-index --find-links $wh"
  $pip -r "$work/verl-cpu-base.txt"
  $pip -r "$work/verl-cpu-together.txt"
  xargs -r "$venv/bin/python" -m pip uninstall -q -y < "$work/verl-cpu-remove.txt"
  $pip --no-deps -r "$work/verl-cpu-nodeps.txt"
  $pip --no-deps --no-build-isolation -e .
fi
"$venv/bin/rocmkit" --version
{
  echo "export ROCMKIT_VERL_CPU_PYTHON=$venv/bin/python"
  echo "export ROCMKIT_VERL_CPU_WHEELHOUSE=$wh"
  # Provisioned: the host verl run must run, not skip.
  echo "export ROCMKIT_REQUIRE_VERL_CPU=1"
} >> "$work/env"
