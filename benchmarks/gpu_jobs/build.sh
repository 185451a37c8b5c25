#!/usr/bin/env bash
# build.sh — run on the developer machine, in the project's root. Writes .stash-jobs/ (git-ignored, ~0.2 MB):
#   .stash-jobs/0/examples/...  the verl v0.9.0 launch scripts the jobs certify, from the verl mirror, paths kept
#   .stash-jobs/0/bin/bwrap     bubblewrap 0.9.0 from Ubuntu 24.04 (noble-updates), for verl-check's sandbox there
#   .stash-jobs/bin/go.sh       the job runner (benchmarks/gpu_jobs/go.sh)
# README.md beside this file says what follows.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
[ -d .git ] || { echo "run this in the project's root" >&2; exit 2; }
MIRROR=${VERL_MIRROR:-/work/.mirror/verl-project+verl/repo}
TAG=v0.9.0
SCRIPTS=(examples/grpo_trainer/run_qwen3_4b_fsdp.sh
         examples/rollout_correction/run_qwen2_5_7b_fsdp.sh
         examples/tuning/lora/run_qwen3_8b_fsdp.sh
         examples/grpo_trainer/run_qwen3_8b_fsdp.sh)
DEB=bubblewrap_0.9.0-1ubuntu0.1_amd64.deb  # noble-updates (noble's release is 0.9.0-1build1)
DEB_URL=http://archive.ubuntu.com/ubuntu/pool/main/b/bubblewrap/$DEB
DEB_SHA256=${DEB_SHA256-1b506492bd9c7fd0cdb4f02ac822f1d3e336b0aead5113c1239baf8db5db562a}  # DEB_SHA256= skips the check

rm -rf .stash-jobs && mkdir -p .stash-jobs/0/bin .stash-jobs/bin
git check-ignore -q .stash-jobs || grep -qx '/.stash-jobs/' .git/info/exclude 2>/dev/null ||
  { mkdir -p .git/info; echo '/.stash-jobs/' >> .git/info/exclude; }
git check-ignore -q .stash-jobs || { echo ".stash-jobs is not git-ignored" >&2; exit 2; }
for s in "${SCRIPTS[@]}"; do
  mkdir -p ".stash-jobs/0/$(dirname "$s")"
  git -C "$MIRROR" show "$TAG:$s" > ".stash-jobs/0/$s"
done
git -C "$MIRROR" rev-parse "$TAG^{commit}" > .stash-jobs/0/VERL_COMMIT

W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
curl -fsS --retry 3 --max-time 120 -o "$W/$DEB" "$DEB_URL"
sum=$(sha256sum "$W/$DEB" | cut -d' ' -f1)
[ -z "$DEB_SHA256" ] || [ "$sum" = "$DEB_SHA256" ] || { echo "$DEB: sha256 $sum, expected $DEB_SHA256" >&2; exit 4; }
dpkg-deb -x "$W/$DEB" "$W/x" 2>/dev/null || (cd "$W" && ar x "$DEB" && mkdir x && tar -xf data.tar.* -C x)
install -m 0755 "$W/x/usr/bin/bwrap" .stash-jobs/0/bin/bwrap
echo "$DEB $sum" > .stash-jobs/0/bin/BWRAP_SOURCE

install -m 0755 "$HERE/go.sh" .stash-jobs/bin/go.sh
find .stash-jobs -type f | sort
v=$(.stash-jobs/0/bin/bwrap --version 2>&1) || v="does not run here (${v##*: }): it needs glibc 2.38+, Ubuntu 24.04 has 2.39"
echo "bwrap: $v ($DEB sha256 $sum)"
echo ".stash-jobs: $(du -sh .stash-jobs | cut -f1); carry .stash-jobs with the call that runs go.sh (README.md)"
