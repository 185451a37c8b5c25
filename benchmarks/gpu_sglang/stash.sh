#!/usr/bin/env bash
# stash.sh N — on the GPU host: keep part N of the SGLang wheels in /var/tmp/stash-sg (outside the copy of the
# checkout; it stays while the host stays up). Exit 3 when an earlier part is missing: start again at 0.
S=/var/tmp/stash-sg; mkdir -p "$S"
for ((i = 0; i < $1; i++)); do [ -f "$S/p$i" ] || { echo "STASH-LOST: p$i missing; start again at part 0"; exit 3; }; done
cp ".stash-sg/$1/p$1" "$S/" && grep " p$1\$" .stash-sg/bin/SHA256SUMS | (cd "$S" && sha256sum -c -) || exit 4
ls -l "$S"
