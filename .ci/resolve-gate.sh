#!/usr/bin/env bash
# Resolve every built-in stack with pip before anything is built (`rocmkit stacks --resolve`): a conflict
# fails CI. The CPU stacks must resolve fully (torch+cpu from their wheelhouses when download.pytorch.org is
# not reachable). A ROCm stack whose torch/Triton pins only repo.radeon.com serves exits 3 where that page
# is unreachable: everything else is resolved against stand-ins of those pins, and the unchecked pins are
# printed; that passes here, said plainly, since no other source has those wheels. A stack with git components
# exits 4 (or 3, with the above) since their requirements are read only from a checkout (--source), which CI does
# not fetch: that passes too, and the line says what was not read. The CPU stacks have none: they must exit 0.
# The stacks resolve side by side (pip mostly waits on the index), each into its own log, printed in order.
set -euo pipefail
work="${ROCMKIT_CI_WORK:?set by .ci/run}"
# shellcheck disable=SC1091
source "$work/env"
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
names=$(python -c 'from rocmkit import stacks; print(" ".join(stacks.builtin_names()))')
for stack in $names; do
  extra=()
  if [ "$stack" = verl-cpu ] && [ -n "${ROCMKIT_VERL_CPU_WHEELHOUSE:-}" ]; then
    extra=(--find-links "$ROCMKIT_VERL_CPU_WHEELHOUSE")
  elif [ "$stack" = trl-cpu ] && [ -n "${ROCMKIT_TRL_CPU_WHEELHOUSE:-}" ]; then
    extra=(--find-links "$ROCMKIT_TRL_CPU_WHEELHOUSE")
  fi
  ( start=$(date +%s); rc=0
    rocmkit stacks --resolve "$stack" "${extra[@]}" > "$logs/$stack.log" 2>&1 || rc=$?
    echo "$rc $(( $(date +%s) - start ))" > "$logs/$stack.rc" ) &
done
wait
failed=0
for stack in $names; do
  cat "$logs/$stack.log"
  read -r rc took < "$logs/$stack.rc"
  case "$rc" in
    0) echo "resolve $stack: ok (${took}s)" ;;
    3|4) if [ "$stack" = verl-cpu ] || [ "$stack" = trl-cpu ]; then echo "resolve $stack: NOT fully checked, exit $rc (${took}s)"; failed=1;
       elif [ "$rc" = 3 ]; then echo "resolve $stack: what was read resolves; the pins listed NOT CHECKED are served only by an unreachable page, and git requirements are read only from a checkout (${took}s)";
       else echo "resolve $stack: what was read resolves; its git components' requirements were not read (no checkout here) (${took}s)"; fi ;;
    *) echo "resolve $stack: FAILED, exit $rc (${took}s)"; failed=1 ;;
  esac
done
exit "$failed"
