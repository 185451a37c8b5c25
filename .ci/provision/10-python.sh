#!/usr/bin/env bash
# Python environment: a venv with rocmkit and everything the tests import (the `test` extra, pytest-xdist among
# them: the suite runs on every core, docs/development.md).
set -euo pipefail
venv="$ROCMKIT_CI_WORK/venv"
if [ ! -x "$venv/bin/python" ]; then
  python3 -m venv "$venv"
fi
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q -e '.[test]'
echo "export PATH=\"$venv/bin:\$PATH\"" >> "$ROCMKIT_CI_WORK/env"
