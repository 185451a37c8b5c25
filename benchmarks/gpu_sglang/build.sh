#!/usr/bin/env bash
# build.sh [OUT] — here, with PyPI reachable: fetch what verl 0.9.1's SGLang rollout needs on the NVIDIA test host
# beyond gpu-verl's packages (wheels.txt), trim SGLang's kernel wheel to what a dense model on Hopper loads, and
# split the wheels into parts that fit one call beside the checkout. Writes OUT/0, OUT/1 (one part each) and
# OUT/bin (these scripts, SHA256SUMS). OUT: .stash-sg.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-.stash-sg}
part_mib=${PART_MIB:-50}  # a call carries at most 64 MiB with the checkout (about 10 MiB)
rm -rf "$out" && mkdir -p "$out/dl/w" "$out/bin"
tags="--only-binary=:all: --python-version 3.12 --implementation cp --platform manylinux2014_x86_64"
for n in $(seq 5 39); do tags="$tags --platform manylinux_2_${n}_x86_64"; done
python3 -m pip download -q --no-deps $tags -d "$out/dl/w" -r "$here/wheels.txt"
# sgl_kernel keeps sm90/common_ops (the norms, activations, rotary embedding and sampling a dense model runs on Hopper)
# and drops FlashAttention 3 (flash_ops, 1.07 GB: the fa3 attention backend), FlashMLA (DeepSeek's MLA) and the
# Blackwell build; certify then runs SGLang's Triton attention backend (rocmkit/certify/engines/verl/sglang_backends.py says why).
zip -q -d "$out"/dl/w/sglang_kernel-*.whl 'sgl_kernel/flash_ops.abi3.so' 'sgl_kernel/flashmla_ops.abi3.so' \
  'sgl_kernel/sm100/*' 'lib/libmscclpp_nccl_static.a' >/dev/null
echo "$(ls "$out"/dl/w/*.whl | wc -l) wheels, $(du -sh "$out/dl/w" | cut -f1)"
(cd "$out/dl/w" && tar -cf ../all.tar ./*.whl) && (cd "$out/dl" && split -b "${part_mib}M" -d -a 1 all.tar p)
: > "$out/bin/SHA256SUMS"
for p in "$out"/dl/p[0-9]; do
  n=${p##*/p}; mkdir -p "$out/$n"; mv "$p" "$out/$n/p$n"
  (cd "$out/$n" && sha256sum "p$n") >> "$out/bin/SHA256SUMS"
done
rm -rf "$out/dl"
cp "$here/stash.sh" "$here/install.sh" "$here/faults.sh" "$out/bin/"
case $out in /*) ;; *) git check-ignore -q "$out" || echo "/$out/" >> "$(git rev-parse --git-dir)/info/exclude" ;; esac
ls "$out"
