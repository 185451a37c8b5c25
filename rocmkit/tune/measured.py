"""The memory model against a verl certificate: the job's shape read from the certificate (its settings and the
verl overrides of its command), the actor's per-GPU peak that the model predicts for that shape, and the peak
verl measured.

What verl 0.9.1 measures, `actor/perf/max_memory_allocated_gb` (TrainingWorker._postprocess_output in
verl/workers/engine_workers.py), is `torch.cuda.max_memory_allocated()` in GiB (divided by 1024**3, despite
the name). It is not the training step's own peak:
- one process per GPU holds the actor, the reference (its weights on the host: FSDP's CPU offload of a
  forward-only model) and the sender of the weight sync; vLLM runs in a process of its own, outside the figure;
- verl never resets the peak (reset_peak_memory_stats is called only by its memory profiler), so at step k it
  is the highest since the process started: the weight sync before the first step, the syncs after steps
  1..k-1, the log-prob passes and the updates of steps 1..k;
- every mini-batch reports it and the trainer keeps the largest (reduce_metrics: a key containing "max"), and
  only data-parallel rank 0's metrics reach the trainer (concat_tensordict_with_none_bsz keeps the first).
So the comparable prediction is the larger of the training step and the weight syncs before it: at step 1 the
first sync, before AdamW has allocated its moments; from step 2 on, a sync with them.
`max_memory_reserved_gb` is the caching allocator's reserved peak, allocated plus its free blocks: not
what the model counts.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import UsageError
from . import memory
from .memory import GIB, Estimate
from .models import ModelSpec, from_config, lookup

MEASURED = "actor/perf/max_memory_allocated_gb"
BUILTIN = "built-in "
# verl 0.9.1's defaults (verl/trainer/config/_generated_ppo_trainer.yaml) for what a command may leave out.
VERL_DEFAULTS = {
    "actor_rollout_ref.actor.strategy": "fsdp",  # FSDP1; fsdp2 must be asked for
    "actor_rollout_ref.actor.use_dynamic_bsz": "False",
    "actor_rollout_ref.actor.ppo_max_token_len_per_gpu": "16384",
    "actor_rollout_ref.model.enable_gradient_checkpointing": "True",
    "actor_rollout_ref.actor.fsdp_config.param_offload": "False",
    "actor_rollout_ref.actor.fsdp_config.optimizer_offload": "False",
    "actor_rollout_ref.actor.fsdp_config.offload_policy": "False",
    "actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes": str(memory.VERL_SYNC_BUCKET >> 20),
}


class NotComparable(Exception):
    """A certificate the model cannot be compared with; the message says why."""


@dataclass(frozen=True)
class Shape:
    """What tune's memory model takes, as the certified job ran it."""
    model: ModelSpec
    model_name: str  # as the certificate names it
    gpus: int  # FSDP shards the actor over all of them
    rollout_tp: int
    micro_batch: int  # sequences; with dynamic batching, 0 and `tokens` is the budget
    tokens: int  # of one micro batch, at most: verl pads it to its longest sequence, prompt + response at most
    grad_ckpt: bool
    fsdp1: bool
    param_offload: bool  # the weights on the host between phases (FSDP2's offload_policy: throughout)
    optimizer_offload: bool
    offload_policy: bool
    bucket_bytes: int


@dataclass(frozen=True)
class Comparison:
    name: str
    device: str
    shape: Shape
    step: Estimate  # the training step
    first_sync: Estimate  # before step 1: no AdamW moments yet
    sync: Estimate  # after every update
    measured_first: int  # bytes, at step 1
    measured_last: int  # at the last step
    last_step: int

    @property
    def predicted_first(self) -> Estimate:
        return max((self.step, self.first_sync), key=lambda e: e.peak)

    @property
    def predicted_last(self) -> Estimate:
        return max((self.step, self.first_sync, self.sync), key=lambda e: e.peak)

    @property
    def ratio_first(self) -> float:
        return self.predicted_first.peak / self.measured_first

    @property
    def ratio_last(self) -> float:
        return self.predicted_last.peak / self.measured_last


def verl_overrides(command: list) -> dict[str, str]:
    """main_ppo's Hydra overrides in a command: key=value, with Hydra's + and ++ (add, force) dropped."""
    out = {}
    for arg in command:
        key, sep, value = str(arg).partition("=")
        if sep and not key.startswith("-"):
            out[key.lstrip("+")] = value
    return out


def _flag(overrides: dict[str, str], key: str) -> bool:
    value = overrides.get(key, VERL_DEFAULTS[key]).lower()
    if value not in ("true", "false"):
        raise NotComparable(f"{key}={overrides[key]}: not True or False")
    return value == "true"


def _int(overrides: dict[str, str], key: str) -> int:
    value = overrides.get(key, VERL_DEFAULTS.get(key))
    if value is None:
        raise NotComparable(f"its command has no {key}")
    try:
        return int(value)
    except ValueError:
        raise NotComparable(f"{key}={value}: not an integer") from None


def model_spec(name: str) -> ModelSpec:
    """The certified model: the built-in one as certify generates it (its vocabulary comes from training its
    tokenizer), or a path or name `rocmkit tune --model` takes."""
    if name.startswith(BUILTIN):
        from ..certify import tinymodel

        size = name.removeprefix(BUILTIN)
        try:
            config = tinymodel.config(size)  # certify always builds it with seed 0
        except ValueError as exc:
            raise NotComparable(f"model {name!r}: {exc}") from None
        except ImportError as exc:
            raise NotComparable(f"the built-in model's vocabulary needs the tokenizers package ({exc})") from None
        return from_config(config, name, "rocmkit/certify/tinymodel.py")
    try:
        return lookup(name)
    except UsageError as exc:
        raise NotComparable(str(exc)) from None


def shape(doc: dict) -> Shape:
    """The job's shape from a certificate; NotComparable for one that is not a verl FSDP run on GPUs."""
    settings = doc.get("settings") or {}
    # what decides is whether verl's actor measured its memory (the engine's name is the engines' own business)
    if not any(MEASURED in row for row in (doc.get("metrics") or {}).get("per_step") or []):
        raise NotComparable(f"no {MEASURED} in its steps (a {doc.get('engine')} certificate): rocmkit tune plans "
                            "verl jobs, whose actor measures it")
    if settings.get("backend", "fsdp") != "fsdp":
        raise NotComparable(f"backend {settings.get('backend')}: the model predicts Megatron's states only")
    if not settings.get("gpus"):
        raise NotComparable("a CPU run")
    o = verl_overrides(settings.get("command") or [])
    strategy = o.get("actor_rollout_ref.actor.strategy", VERL_DEFAULTS["actor_rollout_ref.actor.strategy"])
    if strategy not in ("fsdp", "fsdp2"):
        raise NotComparable(f"actor strategy {strategy}: the model knows FSDP's")
    dynamic = _flag(o, "actor_rollout_ref.actor.use_dynamic_bsz")
    micro = 0 if dynamic else _int(o, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu")
    seq = _int(o, "data.max_prompt_length") + _int(o, "data.max_response_length")
    fsdp1 = strategy == "fsdp"
    # FSDP2's CPUOffloadPolicy; verl's FSDP1 engine never reads offload_policy
    policy = not fsdp1 and _flag(o, "actor_rollout_ref.actor.fsdp_config.offload_policy")
    return Shape(
        model=model_spec(str(settings.get("model"))), model_name=str(settings.get("model")),
        gpus=_int(o, "trainer.n_gpus_per_node") * _int(o, "trainer.nnodes"),
        rollout_tp=_int(o, "actor_rollout_ref.rollout.tensor_model_parallel_size"), micro_batch=micro,
        tokens=_int(o, "actor_rollout_ref.actor.ppo_max_token_len_per_gpu") if dynamic else micro * seq,
        grad_ckpt=_flag(o, "actor_rollout_ref.model.enable_gradient_checkpointing"), fsdp1=fsdp1,
        param_offload=policy or _flag(o, "actor_rollout_ref.actor.fsdp_config.param_offload"),
        optimizer_offload=policy or _flag(o, "actor_rollout_ref.actor.fsdp_config.optimizer_offload"),
        offload_policy=policy,
        bucket_bytes=_int(o, "actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes") << 20)


def _measured(doc: dict) -> list[tuple[int, int]]:
    """(step, bytes) of every step that reports the actor's peak."""
    rows = []
    for row in (doc.get("metrics") or {}).get("per_step") or []:
        value = row.get(MEASURED)
        if isinstance(value, int | float) and value > 0:
            rows.append((int(row.get("step", len(rows) + 1)), round(value * GIB)))
    return rows


def compare(name: str, doc: dict) -> Comparison:
    """The model's prediction for a certificate's shape beside what it measured (NotComparable: why not)."""
    measured = _measured(doc)
    s = shape(doc)  # a TRL certificate is refused for its engine, before its (absent) figures
    if not measured:
        raise NotComparable(f"no {MEASURED} in metrics.per_step")

    def sync(adam: bool) -> Estimate:
        return memory.weight_sync(s.model, shards=s.gpus, bucket_bytes=s.bucket_bytes, fsdp1=s.fsdp1,
                                  param_offload=s.param_offload, adam_on_gpu=adam)

    step = memory.actor_step(s.model, tokens=s.tokens, grad_ckpt=s.grad_ckpt, shards=s.gpus, offload=s.offload_policy)
    return Comparison(name=name, device=str(doc.get("device", "")), shape=s, step=step, first_sync=sync(False),
                      sync=sync(not s.optimizer_offload), measured_first=measured[0][1],
                      measured_last=measured[-1][1], last_step=measured[-1][0])
