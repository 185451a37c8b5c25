"""A rollout that could not start because the job itself filled the GPU, said as a job that does not fit.

vLLM refuses to start when the GPU's free memory is below the share it was told to take ("Free memory on device
cuda:0 (76.35/139.8 GiB) on startup is less than desired GPU memory utilization (0.6, 83.88 GiB)"). Its words, and
the usual cause, are another process holding the GPU (an orphaned engine of an earlier run). But verl starts the
actor and reference workers before the rollout: with no offload they hold the model, in fp32, when vLLM starts.
certify checked the GPUs free at its setup; when vLLM then finds less free than it wanted, the memory went to the
run's own processes. On an H200 a Qwen3-8B job (verl's examples/grpo_trainer/run_qwen3_8b_fsdp.sh, no offload)
found 76.35 of 139.8 GiB free: 62.94 GiB held by its own workers (139.29 free at the setup)
(tests/data/crash/verl-h200-job-qwen3-8b-*).
Pure: the cause and the setup's memory read in, a cause out.
"""

from __future__ import annotations

from . import signatures

KIND = "vllm.free_memory_at_start"
GIB = 2**30


def _signature():
    return next(s for s in signatures.SIGNATURES if s.id == KIND)


def explain(why: dict, setup_memory: list[dict]) -> dict:
    """The cause again, where vLLM's refusal came from the run's own processes: what vLLM wanted, what was free,
    what the job held, and the memory read at the setup (`memory`); else `why` as it was."""
    if why.get("kind") != KIND:
        return why
    got = signatures.field(why.get("error") or "", _signature())
    free_at_setup = [g["free"] for g in setup_memory if g.get("free")]
    if not got or not free_at_setup:
        return why
    wanted, free, total = (float(got[k]) for k in ("wanted", "free", "total"))
    before = min(free_at_setup) / GIB  # the device vLLM names is one of these; the least free says the least
    if before < wanted:  # the GPU lacked the room at the setup already: another process may hold it
        return why
    memory = {"wanted_gib": wanted, "free_gib": free, "total_gib": total, "utilization": float(got["utilization"]),
              "free_at_setup_gib": round(before, 2), "held_by_the_job_gib": round(before - free, 2)}
    proc = why.get("process") or {}
    who = f" ({proc['role']}, pid {proc['pid']})" if proc.get("role") and proc.get("pid") else ""
    summary = (f"the job does not fit on this GPU: starting the rollout, vLLM{who} wanted {wanted:g} GiB "
               f"(gpu_memory_utilization {memory['utilization']:g} of {total:g} GiB) and found {free:g} GiB free; "
               f"the GPU had {memory['free_at_setup_gib']:g} GiB free at the setup, so the run's own processes started "
               f"before the rollout (verl's actor and reference workers) held {memory['held_by_the_job_gib']:g} GiB")
    hint = ("keep less of the training on the GPU while the rollout starts (actor_rollout_ref.actor.fsdp_config."
            "param_offload=True, optimizer_offload=True), or let vLLM take less (actor_rollout_ref.rollout."
            f"gpu_memory_utilization below {free / total:.2f}, the share that was free), then check the update fits")
    return {**why, "summary": summary, "hint": hint, "memory": memory}
