#!/usr/bin/env bash
# megatron-core for the Megatron probe's tests (tests/test_probes_megatron.py): its CPU/gloo path trains the
# probe's GPT with the verl-cpu venv's torch (which also brings triton, which megatron-core 0.18 imports at
# load). Installed into a folder of its own, put on the worker's PYTHONPATH by the tests, so neither venv
# changes. megatron-core 0.18.0 publishes one cp312 wheel (Requires-Python >= 3.12): --python-version 3.12
# takes it whatever this machine's Python is; its only compiled file is the datasets index helper, which the
# probe never loads, and the rest runs on 3.11 (checked: the tests run it). --no-deps: torch, numpy and
# packaging are the venv's. Idempotent: an existing folder is kept.
set -euo pipefail
work="${ROCMKIT_CI_WORK:?set by .ci/run}"
target="$work/megatron-core"
if [ ! -f "$target/megatron/core/__init__.py" ]; then
  "$work/venv/bin/python" -m pip install -q --target "$target" --python-version 3.12 --only-binary=:all: \
    --no-deps megatron-core==0.18.0
fi
# mbridge 0.15.1 (pure Python, the newest on PyPI) in a folder of its own: rocmkit/certify/engines/verl/compat.py reads it beside
# megatron-core 0.18.0, which no longer has the ModelType member it uses (tests/test_certify_engines.py).
if [ ! -f "$work/mbridge/mbridge/core/util.py" ]; then
  "$work/venv/bin/python" -m pip install -q --target "$work/mbridge" --no-deps mbridge==0.15.1
fi
{
  echo "export ROCMKIT_MEGATRON_PATH=$target"
  echo "export ROCMKIT_MBRIDGE_PATH=$work/mbridge"
  # Provisioned: the Megatron probe's CPU runs must run, not skip.
  echo "export ROCMKIT_REQUIRE_MEGATRON=1"
} >> "$work/env"
