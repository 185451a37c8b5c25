"""verl's batch split, planned so that it divides: the mini batch over the data-parallel ranks, and each rank's
share into micro batches. verl 0.9.1 asserts the second only when dynamic batching is off and only at the first
update or log-prob pass (verl/workers/engine/utils.py, prepare_micro_batches: "data size must be divisible by
force_group_size * micro_batch_size_per_gpu"), so a plan's micro batches divide the shares whether a user keeps
dynamic batching on or turns it off.

A rank's shares, as verl 0.9.1 computes them (verl/workers/engine_workers.py, train_mini_batch and infer_batch;
verl/trainer/ppo/ray_trainer.py multiplies the mini batch by rollout.n): the mini batch share is
ppo_mini_batch_size x n / DP, the log-prob share train_batch_size x n / DP, where DP is the actor's data-parallel
size: the GPUs over Ulysses' sequence-parallel size for FSDP, over TP x PP x CP for Megatron.
"""

from __future__ import annotations

from ..errors import UsageError

# job and plan below are rocmkit.tune.plan's Job and Plan (not imported: plan imports this module).


def shares(job, mini: int, dp: int) -> tuple[int, int]:
    """(sequences a rank trains per mini batch, sequences a rank scores per log-prob pass)."""
    return mini * job.n // dp, job.train_batch * job.n // dp


def mini_batch(job, plan, dp: int) -> int:
    """The mini batch, checked against verl's divisibility rules; returns the per-rank share of a mini batch."""
    if (job.train_batch * job.n) % job.gpus:
        good = next(b for b in range(job.train_batch, job.train_batch + job.gpus + 1) if (b * job.n) % job.gpus == 0)
        raise UsageError(f"--train-batch {job.train_batch} x --n {job.n} = {job.train_batch * job.n} responses "
                         f"do not divide over {job.gpus} GPUs (verl's check in validate_config)",
                         hint=f"--train-batch {good}")
    mini = job.train_batch
    for parts in (4, 2):
        cand = job.train_batch // parts
        if job.train_batch % parts == 0 and (cand * job.n) % dp == 0 and cand * job.n // dp >= 1:
            mini = cand
            break
    updates = job.train_batch // mini
    plan.add("actor_rollout_ref.actor.ppo_mini_batch_size", mini,
             f"{count(updates, 'update')} a step; {mini} x n={job.n} = {count(mini * job.n, 'response')} "
             f"split over DP={dp} ({shares(job, mini, dp)[0]} a rank)", "AMD MI300X study + verl")
    return shares(job, mini, dp)[0]


def divisor_at_most(share: int, cap: int) -> int:
    """The largest micro batch of at most `cap` that splits `share` sequences evenly: with fixed micro batches
    (use_dynamic_bsz=False) verl chunks each rank's share into micro batches and asserts "data size must be
    divisible by force_group_size * micro_batch_size_per_gpu" (verl 0.9.1 verl/workers/engine/utils.py,
    prepare_micro_batches)."""
    return max(d for d in range(1, max(1, min(share, cap)) + 1) if share % d == 0)


def count(k: int, word: str) -> str:
    return f"{k} {word}" + ("" if k == 1 else "s")


def log_prob_micro(job, plan, dp: int) -> None:
    """The forward-only micro batch of the rollout's and the reference's log-prob passes: twice the training one
    where it divides each rank's share of the whole batch (train batch x n / DP, what verl 0.9.1's infer_batch
    splits on every rank), else the largest that does."""
    micro = plan.value("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu")
    share = shares(job, plan.value("actor_rollout_ref.actor.ppo_mini_batch_size"), dp)[1]
    lp = divisor_at_most(share, 2 * micro)
    said = "2x the training micro batch" if lp == 2 * micro else f"at most 2x the training micro batch ({2 * micro})"
    why = (f"forward only: {said}, dividing the {count(share, 'sequence')} a rank scores (train batch x n / DP={dp}) when dynamic batching is off")
    for key in ("actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu",
                "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu"):
        plan.add(key, lp, why, "guide + verl")
