#!/usr/bin/env bash
# The level-2 probe tests (tests/test_probes*.py): PyTorch on the CPU runs the real measuring code (GEMMs,
# copies, a two-rank gloo all-reduce in spawned processes) and the real no-GPU path of
# `rocmkit doctor --level 2`. The same torch as the certify step, so this is a no-op after it (pip finds it
# installed); alone, it installs torch 2.13.0 (about a minute). GPU-marked tests skip: CI has no GPU.
set -euo pipefail
work="${ROCMKIT_CI_WORK:?set by .ci/run}"
"$work/venv/bin/python" -m pip install -q torch==2.13.0
# Provisioned: the probe tests must run, not skip.
echo "export ROCMKIT_REQUIRE_PROBES=1" >> "$work/env"
