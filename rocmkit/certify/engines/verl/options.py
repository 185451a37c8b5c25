"""verl's certify options checked before anything starts, from what rocmkit knows of verl's rules and of the
built-in model's shape (the engine calls them from Verl.check)."""

from __future__ import annotations

from ....errors import UsageError
from ...settings import Settings


def rollout_tp_checks(s: Settings) -> None:
    """verl's own rule, checked before anything starts: the rollout's TP divides the GPUs, which it fills with
    replicas (verl/workers/rollout/replica.py: world_size // tensor_model_parallel_size replicas; its config check
    asserts the division). vLLM also splits the attention heads over TP: the built-in model's bound it."""
    if s.rollout_tp < 1:
        raise UsageError(f"--rollout-tp {s.rollout_tp}: a parallel size, at least 1")
    if s.rollout_tp == 1:
        return
    if s.on_cpu:
        raise UsageError(f"--rollout-tp {s.rollout_tp} splits the rollout over GPUs: --gpus 0 runs vLLM's CPU build "
                         "in one process", hint="leave out --rollout-tp on the CPU")
    if s.gpus % s.rollout_tp:
        fits = [d for d in range(1, s.gpus + 1) if s.gpus % d == 0]
        raise UsageError(f"--rollout-tp {s.rollout_tp} does not divide --gpus {s.gpus}: verl fills the GPUs with "
                         f"rollout replicas of {s.rollout_tp} GPUs each",
                         hint=f"--rollout-tp one of {', '.join(map(str, fits))}, or --gpus a multiple of {s.rollout_tp}")
    if s.model is None:
        from ....tinymodel import SIZES

        _, _, _, heads, kv_heads = SIZES[s.size]
        if heads % s.rollout_tp or (kv_heads % s.rollout_tp and s.rollout_tp % kv_heads):
            fits = [d for d in range(1, heads + 1) if heads % d == 0 and (kv_heads % d == 0 or d % kv_heads == 0)]
            raise UsageError(f"--rollout-tp {s.rollout_tp}: the built-in {s.size} model has {heads} attention and "
                             f"{kv_heads} KV heads, which vLLM splits over TP", hint=f"--rollout-tp one of "
                             f"{', '.join(map(str, fits))}")


def megatron_checks(s: Settings) -> None:
    """What rocmkit knows before verl is asked: Megatron trains on GPUs only, and the built-in model's heads and
    layers bound TP and PP. Whether TP x PP fits the GPUs is verl's own rule (its validate_config)."""
    if s.on_cpu:
        raise UsageError("--backend megatron trains on GPUs only (megatron-core's fused kernels and NCCL/RCCL); "
                         "--gpus 0 is refused", hint="give --gpus N on a GPU host, or leave out --backend to train "
                                                     "with FSDP on the CPU (the verl-cpu stack)")
    for name, value in (("--tp", s.tp), ("--pp", s.pp)):
        if value < 1:
            raise UsageError(f"{name} {value}: a parallel size, at least 1")
    if s.model is None:
        from ....tinymodel import SIZES

        _, _, layers, heads, kv_heads = SIZES[s.size]
        if heads % s.tp or kv_heads % s.tp:
            raise UsageError(f"--tp {s.tp}: the built-in {s.size} model has {heads} attention and {kv_heads} KV "
                             "heads; TP must divide both", hint=f"--tp {kv_heads} at most")
        if s.pp > layers:
            raise UsageError(f"--pp {s.pp}: the built-in {s.size} model has {layers} layers",
                             hint=f"--pp {layers} at most" + (", or --size 0.5b" if s.size == "tiny" else ""))
