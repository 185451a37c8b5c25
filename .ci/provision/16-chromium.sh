#!/usr/bin/env bash
# Debian's chromium, headless, for the tests that render the fleet report (tests/test_fleet_chromium.py: the
# page's DOM holds the JSON's findings; at 800 and 1300 px every red cell is in view, by layout and by pixels).
# Idempotent.
set -euo pipefail
if ! command -v chromium >/dev/null; then
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends chromium
fi
echo "export ROCMKIT_REQUIRE_CHROMIUM=1" >> "$ROCMKIT_CI_WORK/env"
