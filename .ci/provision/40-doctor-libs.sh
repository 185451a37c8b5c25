#!/usr/bin/env bash
# The GPU libraries `rocmkit doctor` uses when they work (amdsmi, pyamdgpuinfo), with Ray, in a venv of
# their own: tests/test_doctor_libraries.py runs the doctor there and checks the libraries' real failures
# on a machine without ROCm. Not in the main CI venv: with the PyPI amdsmi 7.0.2 and no libamd_smi.so,
# Ray 2.60's AMD GPU detection raises KeyError, so `import ray` and `ray start` (the Slurm and certify
# tests) would fail there.
# Idempotent; about 20 s when pip's cache already holds Ray (the Slurm step downloads it).
set -euo pipefail
work="${ROCMKIT_CI_WORK:?set by .ci/run}"
venv="$work/venv-doctor-libs"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
# .ci/run runs this beside 50-cpu-stacks.sh, whose `rocmkit venv` runs install this checkout editable too: the same
# lock as theirs (flock on the checkout folder, rocmkit/image/venv.py's checkout_lock), so the two never build there
# at once; with its deadline (600 s), after which a holder that stopped is named instead of waited for.
rc=0
flock -w 600 -E 75 "$PWD" "$venv/bin/python" -m pip install -q -e '.[doctor-libs,slurm]' || rc=$?
[ "$rc" != 75 ] || { echo "40-doctor-libs.sh: another editable install of $PWD held its lock for 600 s" >&2; exit 1; }
[ "$rc" = 0 ] || exit "$rc"
{
  echo "export ROCMKIT_DOCTOR_LIBS_PYTHON=$venv/bin/python"
  # Provisioned: the library tests must run, not skip.
  echo "export ROCMKIT_REQUIRE_DOCTOR_LIBS=1"
} >> "$work/env"
