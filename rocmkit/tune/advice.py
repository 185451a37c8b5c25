"""rocmkit tune's plan for a job that ran out of GPU memory: the same model, GPUs and batch as its script asked,
planned by the memory model, said as the fix in the certificate's cause (certify --script)."""

from __future__ import annotations

import shlex

from ..errors import UsageError
from . import measured, plan
from .measured import verl_overrides
from .models import ModelSpec

# what tune takes from a verl command, and verl 0.9.1's default where the script leaves the key out
# (verl/trainer/config/_generated_ppo_trainer.yaml)
SHAPE = {"gpus_per_node": ("trainer.n_gpus_per_node", 8), "nodes": ("trainer.nnodes", 1),
         "prompt_len": ("data.max_prompt_length", 512), "response_len": ("data.max_response_length", 512),
         "n": ("actor_rollout_ref.rollout.n", 1), "train_batch": ("data.train_batch_size", 1024)}
DESCRIBES_THE_JOB = {key for key, _ in SHAPE.values()} | {"algorithm.adv_estimator", "actor_rollout_ref.rollout.name",
                                                          "actor_rollout_ref.model.lora_rank"}
TUNE_FLAG = {"gpus_per_node": "--gpus-per-node", "nodes": "--nodes", "prompt_len": "--prompt-len",
             "response_len": "--response-len", "n": "--n", "train_batch": "--train-batch"}


def for_job(command: list[str], model: ModelSpec, model_arg: str, gpu_name: str, gpu_bytes: int,
            host_bytes: int | None = None) -> str:
    """The tune command for this job's shape and what its plan changes in the job's settings; or, where nothing
    fits, tune's own word on what does not and what would. `host_bytes`: the run's host memory, which the plan's
    CPU offloads must fit (tune's own check); None leaves it unchecked."""
    o = verl_overrides(command)
    shape = {}
    for field, (key, default) in SHAPE.items():
        try:
            shape[field] = int(o.get(key, default))
        except ValueError:
            shape[field] = default
    rollout = o.get("actor_rollout_ref.rollout.name", "vllm")
    rollout = rollout if rollout in ("vllm", "sglang") else "vllm"  # what tune plans for
    backend = "megatron" if o.get("actor_rollout_ref.actor.strategy") == "megatron" else "fsdp"
    try:
        lora, unmodelled = measured.lora_rank(o), ""
    except measured.NotComparable as exc:  # adapters tune does not count: planned as full-parameter training
        lora, unmodelled = 0, f" (planned as full-parameter training: {exc})"
    argv = ["rocmkit", "tune", "--model", model_arg, "--gpu", gpu_name,
            *[x for f, flag in TUNE_FLAG.items() for x in (flag, str(shape[f]))], "--rollout", rollout,
            "--backend", backend, *(["--lora-rank", str(lora)] if lora else [])]
    said = f"`{shlex.join(argv)}`{unmodelled}"
    try:
        result = plan.make(plan.Job(model, gpu_name, gpu_bytes, rollout=rollout, backend=backend, **shape,
                                    lora_rank=lora, host_bytes=host_bytes, host_source="the run's host"))
    except UsageError as exc:
        return f"{said} says it cannot fit: {exc}" + (f" ({exc.hint})" if getattr(exc, "hint", None) else "")
    # the job's own shape and algorithm are what was planned for, not advice: an RLOO job is not told to run GRPO
    changed = [x for x in result.overrides() if x.partition("=")[0] not in DESCRIBES_THE_JOB
               and o.get(x.partition("=")[0]) != x.partition("=")[2]]
    planned = f"{said} plans this job with " + (", ".join(changed) if changed else "the settings it already has")
    host = next((n for n in result.notes if n.startswith(plan.HOST_MISFIT)), None)
    return planned + (f"; but {host[len(plan.HOST_MISFIT):]}" if host else "")
