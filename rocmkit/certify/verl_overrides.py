"""verl 0.9.x `main_ppo` overrides for a one-node GRPO smoke run (research/smoke-grpo.md §1.4)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class VerlRun:
    model_dir: str
    train_file: str
    val_file: str
    reward_file: str
    gpus: int = 1
    steps: int = 8
    rollout: str = "vllm"
    batch_size: int = 8  # prompts per step
    n: int = 4  # responses per prompt (GRPO group)
    max_prompt_length: int = 128
    max_response_length: int = 32
    lr: float = 1e-5
    tensor_parallel: int = 1
    attn_sdpa: bool = False  # images without flash-attention


def overrides(r: VerlRun) -> list[str]:
    """The overrides, in `key=value` form. trainer.n_gpus_per_node and nnodes are filled in here."""
    micro = max(1, r.batch_size * r.n // (2 * r.gpus))
    out = [
        "algorithm.adv_estimator=grpo",
        f"data.train_files={r.train_file}", f"data.val_files={r.val_file}",
        f"data.train_batch_size={r.batch_size}",
        f"data.max_prompt_length={r.max_prompt_length}", f"data.max_response_length={r.max_response_length}",
        "data.dataloader_num_workers=0",
        f"actor_rollout_ref.model.path={r.model_dir}",
        f"actor_rollout_ref.actor.optim.lr={r.lr}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={max(1, r.batch_size // 2)}",
        f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={micro}",
        # KL loss on: it is what makes verl build the reference policy, so reference log-probs run.
        "actor_rollout_ref.actor.use_kl_loss=True", "actor_rollout_ref.actor.kl_loss_coef=0.001",
        "actor_rollout_ref.actor.kl_loss_type=low_var_kl",
        "actor_rollout_ref.actor.use_dynamic_bsz=False",
        f"actor_rollout_ref.rollout.name={r.rollout}",
        f"actor_rollout_ref.rollout.tensor_model_parallel_size={r.tensor_parallel}",
        "actor_rollout_ref.rollout.gpu_memory_utilization=0.4", f"actor_rollout_ref.rollout.n={r.n}",
        f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={micro}",
        "actor_rollout_ref.rollout.agent.num_workers=1",
        f"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu={micro}",
        f"reward.custom_reward_function.path={r.reward_file}", "reward.custom_reward_function.name=compute_score",
        "reward.num_workers=1",
        "trainer.critic_warmup=0", "trainer.logger=['console','file']",
        "trainer.project_name=rocmkit", "trainer.experiment_name=certify",
        f"trainer.n_gpus_per_node={r.gpus}", "trainer.nnodes=1",
        "trainer.total_epochs=100", f"trainer.total_training_steps={r.steps}",
        "trainer.save_freq=-1", "trainer.test_freq=-1", "trainer.val_before_train=False",
        "trainer.resume_mode=disable",
    ]
    if r.rollout == "vllm":
        # ROCm: expandable segments and vLLM's custom all-reduce do not mix (verl's ROCm CI sets this).
        out.append("+actor_rollout_ref.rollout.engine_kwargs.vllm.disable_custom_all_reduce=True")
    if r.attn_sdpa:
        out += ["+actor_rollout_ref.model.override_config.attn_implementation=sdpa",
                "actor_rollout_ref.model.use_remove_padding=False"]
    return out
