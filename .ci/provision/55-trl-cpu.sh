#!/usr/bin/env bash
# The trl-cpu stack's packages, for its image gate (.ci/trl-gate.sh) and the host server-mode runs of
# tests/test_trl_launch.py: one wheelhouse made by `rocmkit wheelhouse` (PyPI, and torch's CPU build that
# lies on this machine's disk), which the image build uses with no network at all, and a venv on this host
# installed from it the way the image installs (base pins, then the components resolved together).
# Idempotent: an existing wheelhouse and venv are kept.
set -euo pipefail
work="${ROCMKIT_CI_WORK:?set by .ci/run}"
py="$work/venv/bin/python"
wh="$work/wheelhouse/trl-cpu"
venv="$work/venv-trl-cpu"

if [ ! -f "$wh/wheelhouse.json" ]; then
  # download.pytorch.org is unreachable here (torch's CPU wheel is on this machine's disk): no retries.
  PIP_RETRIES=0 "$py" -m rocmkit wheelhouse --stack trl-cpu "$wh" > "$work/wheelhouse-trl-cpu.log" 2>&1 \
    || { tail -n 30 "$work/wheelhouse-trl-cpu.log" >&2; exit 1; }
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
stack = stacks.load("trl-cpu")
calls = pip_calls(stack)
out = Path(sys.argv[1])
(out / "trl-cpu-base.txt").write_text("\n".join(stack.base.pip) + "\n")
(out / "trl-cpu-together.txt").write_text("\n".join(r for c in calls for r in c.requirements) + "\n")
(out / "trl-cpu-remove.txt").write_text("\n".join(r for c in stack.pip_components for r in c.remove) + "\n")
PY
  pip="$venv/bin/python -m pip install -q --no-index --find-links $wh"
  $pip -r "$work/trl-cpu-base.txt"
  $pip -r "$work/trl-cpu-together.txt"
  xargs -r "$venv/bin/python" -m pip uninstall -q -y < "$work/trl-cpu-remove.txt"
  # rocmkit's own requirements are in the wheelhouse (rocmkit wheelhouse adds them)
  $pip click jinja2 packaging psutil rich docker
  $pip --no-deps --no-build-isolation -e .
fi
"$venv/bin/rocmkit" --version
{
  echo "export ROCMKIT_TRL_CPU_PYTHON=$venv/bin/python"
  echo "export ROCMKIT_TRL_CPU_WHEELHOUSE=$wh"
  # Provisioned: the host server-mode runs must run, not skip.
  echo "export ROCMKIT_REQUIRE_TRL_CPU=1"
} >> "$work/env"
