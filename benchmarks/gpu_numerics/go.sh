#!/usr/bin/env bash
# go.sh NAME... — on a lent GPU host, inside ../shared/tools/gpu-verl's run.sh (which puts verl, vLLM and this
# checkout on PYTHONPATH): certify runs that show the numerics section and the weight-sync witness, as a user types
# them, each with its own vLLM and Triton caches. For each NAME: the command, `NAME rc=... in ... s`, the
# certificate.md's head, and the run folder's small files in $OUT/NAME.tgz.
#
#   default   rocmkit certify --host --engine verl --gpus 1 (the default command)
#   noop      the same with every weight sync after the first made a no-op in the rollout (noop@2+), 4 steps
#   skip      the same with decoder layer 1 left out of every sync after the first (skip:1@2+), 4 steps
#   job       certify --script tests/data/certify_job/run_qwen2_tiny_grpo.sh (random weights from the config), 4 steps
#   job-fp8kv the same job with the rollout's KV cache in fp8 (engine_kwargs.vllm.kv_cache_dtype=fp8)
#
#   bash .stash/bin/run.sh bash benchmarks/gpu_numerics/go.sh default noop
# ROCMKIT_BWRAP: verl-check's sandbox for the job runs (Debian 12's bubblewrap, glibc 2.34, carried in .stash-num/).
set -uo pipefail
ROOT=$PWD
RUNS=${RUNS:-/var/tmp/numerics}
export ROCMKIT_BWRAP=${ROCMKIT_BWRAP:-$ROOT/.stash-num/bwrap}
JOB=(--script "$ROOT/tests/data/certify_job/run_qwen2_tiny_grpo.sh"
     --model-config "$ROOT/tests/data/certify_job/qwen2-tiny-config.json" --steps 4)
for name in "$@"; do
  work=$RUNS/$name; rm -rf "$work"; mkdir -p "$work"
  export VLLM_CACHE_ROOT=$work/vllm-cache TRITON_CACHE_DIR=$work/triton-cache
  unset ROCMKIT_TEST_SYNC_FAULT
  case "$name" in
    default) args=() ;;
    noop) args=(--steps 4); export ROCMKIT_TEST_SYNC_FAULT=noop@2+ ;;
    skip) args=(--steps 4); export ROCMKIT_TEST_SYNC_FAULT=skip:1@2+ ;;
    job) args=("${JOB[@]}") ;;
    job-fp8kv) args=("${JOB[@]}" --arg +actor_rollout_ref.rollout.engine_kwargs.vllm.kv_cache_dtype=fp8) ;;
    *) echo "go.sh: unknown run $name" >&2; exit 2 ;;
  esac
  cmd=(python3 -m rocmkit certify --host --engine verl --gpus 1 "${args[@]}" --out "$work/run")
  echo "== $name: ${ROCMKIT_TEST_SYNC_FAULT:+ROCMKIT_TEST_SYNC_FAULT=$ROCMKIT_TEST_SYNC_FAULT }${cmd[*]}"
  t0=$SECONDS
  (cd "$work" && "${cmd[@]}") > "$work/console.txt" 2>&1
  echo "$name rc=$? in $((SECONDS - t0)) s"
  head -12 "$work/run/certificate.md" 2>/dev/null || tail -20 "$work/console.txt"
  grep -E "^\| (rollout log-probs|weight sync)" "$work/run/certificate.md" 2>/dev/null
  cp "$work/console.txt" "$work/run/" 2>/dev/null
  (cd "$work" && find run -type f -size -8M | tar czf "$OUT/$name.tgz" -T -)
done
