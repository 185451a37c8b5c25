#!/usr/bin/env bash
# The manual's tools (the `docs` extra: mkdocs, mkdocs-material, mkdocs-click) in the main venv, so the test
# suite builds the site with `mkdocs build --strict` (tests/test_docs.py) instead of skipping.
set -euo pipefail
venv="$ROCMKIT_CI_WORK/venv"
"$venv/bin/python" -m pip install -q -e '.[docs]'
echo "export ROCMKIT_REQUIRE_DOCS=1" >> "$ROCMKIT_CI_WORK/env"
