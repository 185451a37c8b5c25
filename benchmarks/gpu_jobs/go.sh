#!/usr/bin/env bash
# go.sh NAME... — on the GPU host, inside `bash .stash/bin/run.sh bash .stash-jobs/bin/go.sh NAME...` (run.sh puts
# verl/vLLM and the checkout on PYTHONPATH): certify verl's own example launch scripts as jobs on one GPU, exactly
# as a user would run `rocmkit certify --script`. For each NAME: the certify command, `NAME rc=... in ... s`, the
# certificate.md's tail, and the run folder's small files in $OUT/NAME.tgz.
# go.sh --print NAME...  prints each job's script and flags (no GPU needed: feed them to `rocmkit verl-check` here).
# Names: qwen3-4b qwen2.5-7b qwen3-8b-lora qwen3-8b-oom (README.md beside the source, benchmarks/gpu_jobs/go.sh).
set -uo pipefail
ROOT=$PWD
J=$ROOT/.stash-jobs/0  # the scripts (examples/... as in verl's repo, v0.9.0) and bin/bwrap
RUNS=${RUNS:-/var/tmp/jobs}
HOMES=${HOMES:-/var/tmp/jobhome}
TIMEOUT=${TIMEOUT:-540}
STEPS=${STEPS:-3}  # certify's --steps (a job's default is 3; on a cold host Qwen3-4B's third step ends past 600 s)
read -ra EXTRA <<< "${EXTRA:-}"  # more of certify's flags for every job, e.g. EXTRA="--arg key=value"

# Every job: one GPU, the model path a folder that is not there whose last part names the table entry (certify builds
# random weights of that shape), the data left as the script has it ($HOME/data/... is not on the host: the built-in
# task at the script's lengths stands in), prompts and responses of at most 256 tokens (random weights never stop
# early: every response is max_response_length long; and without flash-attn on the host certify's --attn auto picks
# SDPA, which runs padded (use_remove_padding=False), so every sequence costs prompt + response tokens).
job() {
  case "$1" in
    qwen3-4b)  # Qwen3-4B, GRPO, FSDP; the script's own knobs for one GPU
      SCRIPT=examples/grpo_trainer/run_qwen3_4b_fsdp.sh
      FLAGS=(--env NGPUS_PER_NODE=1 --env ROLLOUT_TP=1 --env ROLLOUT_GPU_MEM_UTIL=0.4
             --env TRAIN_BATCH_SIZE=32 --env PPO_MINI_BATCH_SIZE=16 --env MAX_PROMPT_LENGTH=256
             --env MAX_RESPONSE_LENGTH=256 --env MODEL_PATH=/var/tmp/models/Qwen3-4B
             # as published the job dies in verl 0.9.1's vLLM server: enable_chunked_prefill=False with max_model_len
             # unset sets it to the model's 40960 and then writes max_num_batched_tokens of a frozen config
             # (vllm_async_server.py _validate_configs, FrozenInstanceError): the job's own lengths avoid it
             --arg actor_rollout_ref.rollout.max_model_len=512) ;;
    qwen2.5-7b)  # Qwen2.5-7B, RLOO with rollout correction, FSDP; the script reads no size knobs: --arg ($@, last)
      SCRIPT=examples/rollout_correction/run_qwen2_5_7b_fsdp.sh
      FLAGS=(--env MODEL_PATH=/var/tmp/models/Qwen2.5-7B-Instruct
             --arg trainer.n_gpus_per_node=1 --arg actor_rollout_ref.rollout.tensor_model_parallel_size=1
             --arg data.max_prompt_length=256 --arg data.max_response_length=256
             --arg actor_rollout_ref.actor.fsdp_config.optimizer_offload=True
             --arg "actor_rollout_ref.actor.optim.override_optimizer_config={foreach:False}") ;;
    qwen3-8b-lora)  # Qwen3-8B, GRPO + LoRA rank 64, FSDP; the script's own knobs for one GPU
      SCRIPT=examples/tuning/lora/run_qwen3_8b_fsdp.sh
      FLAGS=(--env NGPUS_PER_NODE=1 --env ROLLOUT_TP=1 --env TRAIN_BATCH_SIZE=32 --env PPO_MINI_BATCH_SIZE=16
             --env MAX_PROMPT_LENGTH=256 --env MAX_RESPONSE_LENGTH=256 --env MODEL_PATH=/var/tmp/models/Qwen3-8B
             # under FSDP1 (the script's default) verl 0.9.1's weight sync collects no LoRA tensors: on one H200 the
             # job died at its first weight sync as published (layered_summon: FSDP refuses offload_to_cpu for
             # NO_SHARD), and with layered_summon=False vLLM was sent an empty adapter (StopIteration in add_lora)
             # while verl waited; verl's collect_lora_params returns them under FSDP2 (tests/lora_sync_oracle.py)
             --arg actor_rollout_ref.actor.strategy=fsdp2) ;;
    qwen3-8b-oom)  # Qwen3-8B, GRPO, FSDP, no offload (the script's GPU default): expected to run out of GPU memory
      SCRIPT=examples/grpo_trainer/run_qwen3_8b_fsdp.sh
      FLAGS=(--env NGPUS_PER_NODE=1 --env ROLLOUT_TP=1 --env TRAIN_BATCH_SIZE=32
             --env PPO_MINI_BATCH_SIZE=16 --env MAX_PROMPT_LENGTH=256 --env MAX_RESPONSE_LENGTH=256
             --env MODEL_PATH=/var/tmp/models/Qwen3-8B) ;;
    *) echo "go.sh: unknown job $1 (qwen3-4b qwen2.5-7b qwen3-8b-lora qwen3-8b-oom)" >&2; return 2 ;;
  esac
}

if [ "${1:-}" = --print ]; then
  shift
  for name in "$@"; do job "$name" || exit 2; printf '%q ' "$name" "$SCRIPT" "${FLAGS[@]}"; echo; done
  exit 0
fi
[ $# -gt 0 ] || { echo "usage: go.sh NAME... (qwen3-4b qwen2.5-7b qwen3-8b-lora qwen3-8b-oom)" >&2; exit 2; }
OUT=${OUT:-$ROOT/out-jobs}; mkdir -p "$OUT" "$RUNS" "$HOMES"

# verl-check's sandbox: Ubuntu 24.04's bwrap, first on PATH (the host has none installed)
chmod 0755 "$J/bin/bwrap" 2>/dev/null
export PATH=$J/bin:$PATH
echo "bwrap: $(command -v bwrap) $(bwrap --version 2>&1)"
if ! err=$(bwrap --ro-bind / / --dev /dev --proc /proc --tmpfs /tmp --unshare-all --cap-drop ALL --die-with-parent \
           --new-session true 2>&1); then
  echo "bwrap cannot make its sandbox here: $err"
  echo "(unprivileged user namespaces: $(cat /proc/sys/user/max_user_namespaces 2>/dev/null)," \
       "apparmor_restrict_unprivileged_userns=$(cat /proc/sys/kernel/apparmor_restrict_unprivileged_userns 2>/dev/null))"
  exit 3
fi
echo "python3: $(command -v python3); PYTHONPATH=${PYTHONPATH:-}"
nvidia-smi --query-gpu=name,memory.total,memory.used --format=csv,noheader 2>&1 | head -n 8
echo "disk: $(df -h /var/tmp | tail -n 1)"

status=0
for name in "$@"; do
  job "$name" || { status=2; continue; }
  run=$RUNS/$name
  rm -rf "$run"  # a previous run's results came back in its call's $OUT; its model would fill the disk
  mkdir -p "$HOMES/$name"
  cmd=(python3 -m rocmkit certify --script "$SCRIPT" "${FLAGS[@]}" --gpus 1 --out "$run" --progress plain
       --timeout "$TIMEOUT" --steps "$STEPS" "${EXTRA[@]}")
  echo "=== $name: (cd .stash-jobs/0 && HOME=$HOMES/$name $(printf '%q ' "${cmd[@]}"))"
  t0=$SECONDS
  (cd "$J" && HOME=$HOMES/$name "${cmd[@]}") 2>&1 | tee "$OUT/$name.console.txt"
  rc=${PIPESTATUS[0]}
  echo "$name rc=$rc in $((SECONDS - t0)) s"
  [ -f "$run/certificate.md" ] && { echo "--- $run/certificate.md (tail)"; tail -n 60 "$run/certificate.md"; }
  if [ -d "$run" ]; then
    (cd "$RUNS" && find "$name" -type f -size -8M -print0 | tar --null -czf "$OUT/$name.tgz" -T -)
    echo "$OUT/$name.tgz: $(du -h "$OUT/$name.tgz" | cut -f1)"
    find "$run" -name '*.safetensors' -delete  # the stand-in model's weights (8-16 GB): the next job needs the disk
  fi
  [ "$rc" = 0 ] || status=1
done
exit $status
