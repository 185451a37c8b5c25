#!/usr/bin/env bash
# The CPU stacks' packages (verl-cpu, trl-cpu), for their image gates (.ci/image-gate.sh) and the host runs of
# the tests (verl's GRPO, TRL's server mode, verl-check, the Megatron probe's torch). For each stack: one
# wheelhouse made by `rocmkit wheelhouse` (PyPI, and torch's CPU build that lies on this machine's disk), which
# the image build uses with no network at all, and a venv on this host installed from it the way the image
# installs (base pins, the components resolved together, the removals, the no-deps components, then rocmkit
# with its requirements). Each stack exports ROCMKIT_<STACK>_PYTHON, ROCMKIT_<STACK>_WHEELHOUSE and
# ROCMKIT_REQUIRE_<STACK>=1 (provisioned: its tests must run, not skip), STACK in capitals with _ for -.
# Idempotent: an existing wheelhouse and venv are kept.
set -euo pipefail
work="${ROCMKIT_CI_WORK:?set by .ci/run}"
py="$work/venv/bin/python"

provision() {
  local stack=$1 var wh venv pip
  var=$(echo "$stack" | tr 'a-z-' 'A-Z_')
  wh="$work/wheelhouse/$stack"
  venv="$work/venv-$stack"
  if [ ! -f "$wh/wheelhouse.json" ]; then
    # download.pytorch.org is unreachable here (torch's CPU wheel is on this machine's disk), and pip's default
    # retries would cost seconds on every package.
    PIP_RETRIES=0 "$py" -m rocmkit wheelhouse --stack "$stack" "$wh" > "$work/wheelhouse-$stack.log" 2>&1 \
      || { tail -n 30 "$work/wheelhouse-$stack.log" >&2; exit 1; }
  fi
  du -sh "$wh"
  if [ ! -x "$venv/bin/rocmkit" ]; then
    python3 -m venv "$venv"
    # The stack's own pip steps, in the image's order, read from the stack file through rocmkit.
    "$py" - "$work" "$stack" <<'PY'
import sys
from pathlib import Path
from rocmkit import stacks
from rocmkit.image.wheelhouse import pip_calls
out, name = Path(sys.argv[1]), sys.argv[2]
stack = stacks.load(name)
calls = pip_calls(stack)
(out / f"{name}-base.txt").write_text("\n".join(stack.base.pip) + "\n")
(out / f"{name}-together.txt").write_text("\n".join(calls[0].requirements) + "\n")
(out / f"{name}-remove.txt").write_text("\n".join(r for c in stack.pip_components for r in c.remove) + "\n")
(out / f"{name}-nodeps.txt").write_text("".join(r + "\n" for c in calls[1:] for r in c.requirements))
PY
    pip="$venv/bin/python -m pip install -q --no-index --find-links $wh"
    $pip -r "$work/$stack-base.txt"
    $pip -r "$work/$stack-together.txt"
    xargs -r "$venv/bin/python" -m pip uninstall -q -y < "$work/$stack-remove.txt"
    if [ -s "$work/$stack-nodeps.txt" ]; then $pip --no-deps -r "$work/$stack-nodeps.txt"; fi
    # as the image installs rocmkit's wheel: with the requirements that wheel declares (IMAGE_REQUIREMENTS, not the
    # CLI's: the SBOM library stays out), which `rocmkit wheelhouse` puts in the wheelhouse
    "$py" -c 'from rocmkit.image.selfwheel import IMAGE_REQUIREMENTS; print("\n".join(IMAGE_REQUIREMENTS))' \
      > "$work/$stack-rocmkit.txt"
    $pip -r "$work/$stack-rocmkit.txt"
    $pip --no-build-isolation --no-deps -e .
  fi
  "$venv/bin/rocmkit" --version
  {
    echo "export ROCMKIT_${var}_PYTHON=$venv/bin/python"
    echo "export ROCMKIT_${var}_WHEELHOUSE=$wh"
    echo "export ROCMKIT_REQUIRE_${var}=1"
  } >> "$work/env"
}

for stack in verl-cpu trl-cpu; do
  provision "$stack"
done

# The three venvs (CI's own and the two stacks') hold the same torch, vllm and friends: link identical files
# to one copy (util-linux's hardlink; -t: mtimes may differ, modes and owners must not). About 4 GB less on
# disk. pip replaces files by unlink and rename, never in place, so one venv's install cannot change another's.
# Sources (.py) stay each venv's own: a linked source takes the other venv's mtime, and Python then finds this
# venv's bytecode stale (its .pyc records the mtime the source had at install) and compiles the module again in
# every process, since CI's environment sets PYTHONDONTWRITEBYTECODE=1 (a verl CPU run starts about ten such
# processes; torch, vLLM and verl are ~3,900 modules: `import vllm.entrypoints.llm` took 31 s stale, 15 s not).
if command -v hardlink >/dev/null; then
  hardlink -t -x '\.py$' "$work/venv" "$work/venv-verl-cpu" "$work/venv-trl-cpu" | grep -E '^(Linked|Saved)' || true
fi
