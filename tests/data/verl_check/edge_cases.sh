#!/bin/bash
# Shell features verl-check reads, and mistakes it reports (see tests/test_verl_check.py).
set -euo pipefail
TP=${TP:-2}
NAME="run-${TP}"
NODES=$(nproc)
export LR=1e-6
for PP in 1 2; do
  echo $PP
done
python3 -m verl.trainer.main_ppo \
    --config-name ppo_trainer \
    actor_rollout_ref.actor.optim.lr=$LR \
    'trainer.logger=["console","wandb"]' \
    "trainer.experiment_name=exp ${NAME}" \
    trainer.n_gpus_per_node=$NODES \
    actor_rollout_ref.actor.megatron.pipeline_model_parallel_size=$PP \
    actor_rollout_ref.actor.ppo_micro_batch_size=8 \
    actor_rollout_ref.actor.router_replay.mode=R3 \
    actor_rollout_ref.actor.optim.lrr=1 \
    custom_reward_function.path=/r.py \
    # the reward
    reward.num_workers=2 \
    trainer.nnodes=1 "$@" 2>&1 | tee log.txt
