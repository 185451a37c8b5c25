#!/usr/bin/env bash
# The CPU stacks' packages (verl-cpu, trl-cpu), for their image gates (.ci/image-gate.sh) and the host runs of
# the tests (verl's GRPO, TRL's server mode, verl-check, the Megatron probe's torch). For each stack: one
# wheelhouse made by `rocmkit wheelhouse` (PyPI, and torch's CPU build that lies on this machine's disk), which
# the image build uses with no network at all, and a venv on this host made by the README's own command,
# `rocmkit venv --stack STACK DEST` (the image's pip steps: base pins, the components resolved together, the
# removals, the no-deps components, then rocmkit), from that wheelhouse. tests/test_readme.py checks that the
# command here is the README's. Each stack exports ROCMKIT_<STACK>_PYTHON, ROCMKIT_<STACK>_WHEELHOUSE and
# ROCMKIT_REQUIRE_<STACK>=1 (provisioned: its tests must run, not skip), STACK in capitals with _ for -.
# Idempotent: an existing wheelhouse and a finished venv (rocmkit-venv.json, which `rocmkit venv` writes last)
# are kept.
# The two stacks provision side by side, each in a process group of its own (set -m, so that a signal to this script
# reaches them: a background job of a script without job control would ignore SIGINT), each to its own log; they
# share nothing but this checkout, where `rocmkit venv`'s editable install takes a lock (rocmkit/image/venv.py,
# checkout_lock), and the read-only CI venv and torch wheel.
set -euo pipefail
set -m
work="${ROCMKIT_CI_WORK:?set by .ci/run}"
py="$work/venv/bin/python"

provision() {
  local stack=$1 var wh venv
  var=$(echo "$stack" | tr 'a-z-' 'A-Z_')
  wh="$work/wheelhouse/$stack"
  venv="$work/venv-$stack"
  if [ ! -f "$wh/wheelhouse.json" ]; then
    # download.pytorch.org is unreachable here (torch's CPU wheel is on this machine's disk), and pip's default
    # retries would cost seconds on every package.
    PIP_RETRIES=0 "$py" -m rocmkit wheelhouse --stack "$stack" "$wh" > "$work/wheelhouse-$stack.log" 2>&1 \
      || { echo "rocmkit wheelhouse failed; $work/wheelhouse-$stack.log ends:"; tail -n 30 "$work/wheelhouse-$stack.log"
           exit 1; }
  fi
  du -sh "$wh"
  if [ ! -f "$venv/rocmkit-venv.json" ]; then
    # The README's line, from the wheelhouse (offline: the same pins). rocmkit itself editable from this checkout,
    # so the tests that run in this venv run the code under test; --force replaces a venv an older CI run made.
    "$py" -m rocmkit venv --stack "$stack" "$venv" --wheelhouse "$wh" --rocmkit editable --force \
      > "$work/venv-$stack.log" 2>&1 \
      || { echo "rocmkit venv failed; $work/venv-$stack.log ends:"; tail -n 40 "$work/venv-$stack.log"; exit 1; }
    grep -E '^(step|made|note)' "$work/venv-$stack.log"
  fi
  "$venv/bin/rocmkit" --version
  {
    echo "export ROCMKIT_${var}_PYTHON=$venv/bin/python"
    echo "export ROCMKIT_${var}_WHEELHOUSE=$wh"
    echo "export ROCMKIT_REQUIRE_${var}=1"
  } > "$work/env-$stack"
}

declare -A job
stop() { for s in "${!job[@]}"; do kill -TERM -- "-${job[$s]}" 2>/dev/null || true; done; }
trap 'stop; exit 143' TERM
trap 'stop; exit 130' INT
for stack in verl-cpu trl-cpu; do
  rm -f "$work/env-$stack"
  provision "$stack" > "$work/provision-$stack.log" 2>&1 &
  job[$stack]=$!
done
# Both are waited for, even when one fails: the other's venv is then finished and kept by the next run.
failed=()
for stack in verl-cpu trl-cpu; do
  rc=0
  wait "${job[$stack]}" || rc=$?
  unset "job[$stack]"
  echo "== $stack (exit $rc; $work/provision-$stack.log)"
  if [ "$rc" = 0 ]; then cat "$work/provision-$stack.log"; else failed+=("$stack"); fi
done
for stack in "${failed[@]}"; do
  echo "50-cpu-stacks.sh: stack $stack failed; the end of its log, $work/provision-$stack.log:" >&2
  tail -n 60 "$work/provision-$stack.log" >&2
done
[ "${#failed[@]}" = 0 ] || exit 1
# CI's env lines once both succeeded, in the stacks' order (not in the order they finished).
for stack in verl-cpu trl-cpu; do
  cat "$work/env-$stack" >> "$work/env"
  rm -f "$work/env-$stack"
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
