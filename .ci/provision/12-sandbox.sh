#!/usr/bin/env bash
# bubblewrap: `rocmkit verl-check` runs a launch script with real bash inside a bwrap sandbox (read-only root,
# private $HOME and /tmp, no network) to read the exact argv it hands to verl's main_ppo. Idempotent.
set -euo pipefail
if ! command -v bwrap >/dev/null; then
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends bubblewrap
fi
bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --die-with-parent true  # namespaces work here
echo "export ROCMKIT_BWRAP=$(command -v bwrap)" >> "${ROCMKIT_CI_WORK:?set by .ci/run}/env"
echo "export ROCMKIT_REQUIRE_SANDBOX=1" >> "$ROCMKIT_CI_WORK/env"
