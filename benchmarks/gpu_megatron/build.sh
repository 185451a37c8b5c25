#!/usr/bin/env bash
# build.sh [OUT] — here, with PyPI reachable: fetch what verl's Megatron backend needs on the NVIDIA test host
# beyond gpu-verl's packages (Python 3.12, x86-64, torch 2.11.0+cu130), and cut TransformerEngine's core wheel
# into parts that fit one call beside the checkout. Writes OUT/0 ... OUT/4 (one part each), OUT/small (the
# other wheels and TE's PyTorch sdist) and OUT/bin (these scripts, NAME, SHA256SUMS). OUT: .stash-mc.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-.stash-mc}
part_mib=${PART_MIB:-58}  # a call carries at most 64 MiB with the checkout (about 5 MiB)
rm -rf "$out" && mkdir -p "$out/dl" "$out/small" "$out/bin"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 -d "$out/dl" \
  transformer-engine-cu13==2.20.2 transformer-engine==2.20.2 megatron-core==0.16.1 mbridge==0.15.1 \
  nvidia-cudnn-frontend==1.32.0 nvdlfw-inspect==0.2.2
# transformer-engine-torch has no wheel on PyPI: its sdist, compiled on the GPU host (install.sh)
# (PyPI's simple index, as pip reads it; the sha256 in the link is checked)
link=$(curl -fsS -m 60 https://pypi.org/simple/transformer-engine-torch/ | grep -o 'https://[^"]*transformer_engine_torch-2\.20\.2\.tar\.gz#sha256=[0-9a-f]*')
curl -fsS -m 300 -o "$out/dl/transformer_engine_torch-2.20.2.tar.gz" "${link%%#*}"
echo "${link##*sha256=}  $out/dl/transformer_engine_torch-2.20.2.tar.gz" | sha256sum -c --quiet -
core=$(ls "$out"/dl/transformer_engine_cu13-*.whl)
basename "$core" > "$out/bin/NAME"
find "$out/dl" -type f ! -name "$(basename "$core")" -exec mv {} "$out/small/" \;
split -b "${part_mib}M" -d -a 1 "$core" "$out/dl/p"
: > "$out/bin/SHA256SUMS"
for p in "$out"/dl/p[0-9]; do
  n=${p##*/p}; mkdir -p "$out/$n"; mv "$p" "$out/$n/p$n"
  (cd "$out/$n" && sha256sum "p$n") >> "$out/bin/SHA256SUMS"
done
rm -rf "$out/dl"
cp "$here/stash.sh" "$here/install.sh" "$out/bin/"
case $out in /*) ;; *) git check-ignore -q "$out" || echo "/$out/" >> "$(git rev-parse --git-dir)/info/exclude" ;; esac
ls "$out" "$out/small"
