"""What verl's history knows about keys and config names a recipe may still use: removed, renamed,
deprecated or silently ignored, with what to use instead and where verl said so (its pull requests, or
the comment in its own config). Pure data and a lookup; `rocmkit verl-check` annotates what the target's
own verl rejected or accepted with it, so an entry never decides on its own that a key is wrong.
"""

from __future__ import annotations

from dataclasses import dataclass

PR = "https://github.com/verl-project/verl/pull/"


@dataclass(frozen=True)
class Change:
    key: str  # a dotted key; it also covers the keys below it
    kind: str  # removed | renamed | deprecated | ignored
    use: str | None  # what to use instead; None: nothing (the option is gone)
    since: str  # the verl version it applies to, as far as it is known
    source: str
    why: str = ""


ENGINES = ("actor_rollout_ref.actor", "actor_rollout_ref.ref", "critic")

CHANGES: tuple[Change, ...] = (
    *(Change(f"{e}.megatron.grad_offload", "removed", None, "verl 0.9.1 has no such key", PR + "7544",
             "it was never read: gradient buffers follow param_offload") for e in ENGINES),
    Change("actor_rollout_ref.actor.router_replay", "renamed", "actor_rollout_ref.actor.megatron.router_replay "
           "(or actor_rollout_ref.actor.veomni.router_replay)", "verl 0.9.1 has no such key", PR + "7466",
           "the top-level key was never read; the engines read their own"),
    Change("custom_reward_function", "ignored", "reward.custom_reward_function", "verl 0.9",
           PR + "7331", "main_ppo no longer migrates the legacy top-level reward keys: they are silently ignored"),
    Change("reward_model.reward_manager", "ignored", "reward.reward_manager.name", "verl 0.9",
           PR + "4387", "reward_manager became its own section; main_ppo ignores the legacy key (#7331)"),
    Change("reward_model", "ignored", "reward.reward_model", "verl 0.9", PR + "7331",
           "main_ppo no longer migrates the legacy top-level reward keys: they are silently ignored"),
    Change("actor_rollout_ref.actor.ppo_micro_batch_size", "deprecated",
           "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", "verl 0.9.1",
           "verl/trainer/config/actor/actor.yaml: '[Deprecated] Global micro batch size'"),
    Change("critic.ppo_micro_batch_size", "deprecated", "critic.ppo_micro_batch_size_per_gpu", "verl 0.9.1",
           "verl/trainer/config/critic/critic.yaml: '[Deprecated] Global micro batch size'"),
    Change("actor_rollout_ref.rollout.log_prob_micro_batch_size", "deprecated",
           "actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu", "verl 0.9.1",
           "verl/trainer/config/rollout/rollout.yaml: '[Will be deprecated, use log_prob_micro_batch_size_per_gpu]'"),
    Change("actor_rollout_ref.ref.log_prob_micro_batch_size", "deprecated",
           "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu", "verl 0.9.1",
           "verl/trainer/config/ref/ref.yaml: '[Will be deprecated, use log_prob_micro_batch_size_per_gpu]'"),
    Change("actor_rollout_ref.actor.ulysses_sequence_parallel_size", "deprecated",
           "actor_rollout_ref.actor.fsdp_config.ulysses_sequence_parallel_size", "verl 0.9.1",
           "verl/trainer/config/actor/dp_actor.yaml: '[DEPRECATED] use fsdp_config.ulysses_sequence_parallel_size'"),
)

# Config names (--config-name) that became aliases: name -> (replacement, source)
CONFIG_NAMES: dict[str, tuple[str, str]] = {
    "ppo_megatron_trainer": ("--config-name=ppo_trainer with the override model_engine=megatron", PR + "5848"),
}


def lookup(key: str) -> Change | None:
    """The most specific entry for key (an entry covers the keys below it)."""
    hits = [c for c in CHANGES if key == c.key or key.startswith(c.key + ".")]
    return max(hits, key=lambda c: len(c.key)) if hits else None


def instead(change: Change) -> str:
    """`use X` or `remove it`, with the source."""
    what = f"use {change.use}" if change.use else "remove it (no replacement)"
    return f"{what}; {change.why + '; ' if change.why else ''}{change.since}, {change.source}"
