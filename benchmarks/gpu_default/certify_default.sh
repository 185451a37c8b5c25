#!/usr/bin/env bash
# certify_default.sh NAME [ROCMKIT_DIR] — on a lent GPU host, inside ../shared/tools/gpu-verl's run.sh: the default
# command a user types (`python3 -m rocmkit certify --host --engine verl --gpus 1`) with ROCMKIT_DIR's rocmkit
# (default: this checkout), its own vLLM and Triton caches, so that a second run finds nothing the first compiled.
# Prints the exit code and the whole seconds, copies the run folder's small files to $OUT/NAME.tgz.
#
#   bash .stash/bin/run.sh bash benchmarks/gpu_default/certify_default.sh before .stash-before
#   bash .stash/bin/run.sh bash benchmarks/gpu_default/certify_default.sh after
set -u
name=$1; code=$(cd "${2:-.}" && pwd); work=/var/tmp/default-$name
rm -rf "$work"; mkdir -p "$work"
export VLLM_CACHE_ROOT=$work/vllm-cache TRITON_CACHE_DIR=$work/triton-cache
export PYTHONPATH=${PYTHONPATH/$PWD/$code}
t0=$SECONDS
(cd "$work" && python3 -m rocmkit certify --host --engine verl --gpus 1 --out "$work/run") > "$work/console.txt" 2>&1
echo "$name: certify rc=$? in $((SECONDS - t0)) s (rocmkit from $code)"
tail -25 "$work/console.txt"
cp "$work/console.txt" "$work/run/"
(cd "$work" && find run -type f -size -8M | tar czf "$OUT/$name.tgz" -T -)
