"""The memory model against a verl certificate: the job's shape read from the certificate (its settings and the
verl overrides of its command), the actor's per-GPU peak that the model predicts for that shape, and the peak
verl measured.

What verl 0.9.1 measures, `actor/perf/max_memory_allocated_gb` (TrainingWorker._postprocess_output in
verl/workers/engine_workers.py), is `torch.cuda.max_memory_allocated()` in GiB (divided by 1024**3, despite
the name). It is not the training step's own peak:
- one process per GPU holds the actor, the reference (FSDP: its weights on the host, FSDP's CPU offload of a
  forward-only model; Megatron: on the GPU, unless param_offload) and the sender of the weight sync; vLLM runs
  in a process of its own, outside the figure;
- verl never resets the peak (reset_peak_memory_stats is called only by its memory profiler), so at step k it
  is the highest since the process started: the weight sync before the first step, the syncs after steps
  1..k-1, the log-prob passes and the updates of steps 1..k;
- every mini-batch reports it and the trainer keeps the largest (reduce_metrics: a key containing "max"), and
  only data-parallel rank 0's metrics reach the trainer (concat_tensordict_with_none_bsz keeps the first; with
  Megatron, of the ranks that collect, is_mp_src_rank_with_outputs: TP rank 0 of the last pipeline stage).
So the comparable prediction is the larger of the training step and the weight syncs before it: at step 1 the
first sync, before AdamW has allocated its moments; from step 2 on, a sync with them.
`max_memory_reserved_gb` is the caching allocator's reserved peak, allocated plus its free blocks: not
what the model counts.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import partial

from ..errors import UsageError
from . import memory
from .memory import GIB, Estimate
from .models import ModelSpec, from_config, lookup

MEASURED = "actor/perf/max_memory_allocated_gb"
BUILTIN = "built-in "
MEGATRON = "actor_rollout_ref.actor.megatron"
# verl 0.9.1's defaults (verl/trainer/config/_generated_ppo_trainer.yaml) for what a command may leave out.
VERL_DEFAULTS = {
    "actor_rollout_ref.actor.strategy": "fsdp",  # FSDP1; fsdp2 must be asked for
    "actor_rollout_ref.actor.use_dynamic_bsz": "False",
    "actor_rollout_ref.model.lora_rank": "0",  # no LoRA
    "actor_rollout_ref.actor.ppo_max_token_len_per_gpu": "16384",
    "actor_rollout_ref.model.enable_gradient_checkpointing": "True",
    "actor_rollout_ref.actor.fsdp_config.param_offload": "False",
    "actor_rollout_ref.actor.fsdp_config.optimizer_offload": "False",
    "actor_rollout_ref.actor.fsdp_config.offload_policy": "False",
    "actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes": str(memory.VERL_SYNC_BUCKET >> 20),
    # verl/trainer/config/engine/megatron.yaml, under actor_rollout_ref.actor.megatron
    f"{MEGATRON}.tensor_model_parallel_size": "1",
    f"{MEGATRON}.pipeline_model_parallel_size": "1",
    f"{MEGATRON}.context_parallel_size": "1",
    f"{MEGATRON}.expert_model_parallel_size": "1",
    f"{MEGATRON}.sequence_parallel": "True",
    f"{MEGATRON}.use_distributed_optimizer": "True",
    f"{MEGATRON}.vanilla_mbridge": "False",
    f"{MEGATRON}.param_offload": "False",
    f"{MEGATRON}.optimizer_offload": "False",
}


class NotComparable(Exception):
    """A certificate the model cannot be compared with; the message says why."""


@dataclass(frozen=True)
class Shape:
    """What tune's memory model takes, as the certified job ran it."""
    model: ModelSpec
    model_name: str  # as the certificate names it
    gpus: int  # FSDP shards the actor over all of them; Megatron splits it over TP x PP and DP
    rollout_tp: int
    micro_batch: int  # sequences; with dynamic batching, 0 and `tokens` is the budget
    tokens: int  # of one micro batch, at most: verl pads it to its longest sequence, prompt + response at most
    grad_ckpt: bool
    fsdp1: bool
    param_offload: bool  # the weights on the host between phases (FSDP2's offload_policy: throughout)
    optimizer_offload: bool
    offload_policy: bool
    bucket_bytes: int
    backend: str = "fsdp"  # or "megatron"
    tp: int = 1  # Megatron's tensor and pipeline parallel sizes
    pp: int = 1
    foreach: bool = True  # torch's AdamW over all tensors at once (override_optimizer_config foreach:False: not)
    lora_rank: int = 0  # LoRA adapters of this rank on every linear layer (0: full-parameter training)

    @property
    def dp(self) -> int:
        """Megatron's data-parallel ranks (FSDP: every GPU)."""
        return self.gpus // (self.tp * self.pp)


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


def lora_rank(o: dict[str, str]) -> int:
    """The LoRA rank of the job (0: full-parameter), NotComparable for adapters the model does not count: other
    target modules than verl's default ("all-linear"), excluded modules, a pre-trained adapter's own rank."""
    value = o.get("actor_rollout_ref.model.lora_rank")
    rank = 0 if value in ("null", "None") else _int(o, "actor_rollout_ref.model.lora_rank")
    adapter = o.get("actor_rollout_ref.model.lora_adapter_path", "null")
    if adapter not in ("null", "None", ""):
        raise NotComparable(f"a LoRA adapter loaded from {adapter}: its rank and modules are the adapter's")
    if not rank:
        return 0
    targets = o.get("actor_rollout_ref.model.target_modules", "all-linear")
    if targets != "all-linear":
        raise NotComparable(f"LoRA on target_modules={targets}: the model counts verl's default, all-linear")
    if o.get("actor_rollout_ref.model.exclude_modules", "null") not in ("null", "None", "[]"):
        raise NotComparable("LoRA with exclude_modules: the model counts every linear layer but the output")
    return rank


def model_spec(name: str, padded: bool = False) -> ModelSpec:
    """The certified model: the built-in one as certify generates it (its vocabulary comes from training its
    tokenizer; `padded`: its rows as a certificate from before one row per token had them), or a path or name
    `rocmkit tune --model` takes."""
    if name.startswith(BUILTIN):
        from .. import tinymodel

        size = name.removeprefix(BUILTIN)
        try:
            config = tinymodel.config(size, padded=padded)  # certify always builds it with seed 0
        except ValueError as exc:
            raise NotComparable(f"model {name!r}: {exc}") from None
        except ImportError as exc:
            raise NotComparable(f"the built-in model's vocabulary needs the tokenizers package ({exc})") from None
        return from_config(config, name, "rocmkit/tinymodel.py")
    try:
        return lookup(name)
    except UsageError as exc:
        raise NotComparable(str(exc)) from None


def _job_model(settings: dict, padded: bool = False) -> ModelSpec:
    """The certified model; a job's random-weight stand-in by the config.json it was built from."""
    job = settings.get("job") or {}
    if job.get("model_config"):
        try:
            return from_config(job["model_config"], str(job.get("model_path")), str(job.get("model_source")))
        except UsageError as exc:
            raise NotComparable(str(exc)) from None
    return model_spec(str(settings.get("model")), padded=padded)


def _megatron(o: dict[str, str], gpus: int) -> dict:
    """Shape's Megatron fields from the command's overrides; NotComparable for a layout the estimates do not
    model (rocmkit/tune/memory.py: megatron_step, megatron_weight_sync)."""
    tp, pp = _int(o, f"{MEGATRON}.tensor_model_parallel_size"), _int(o, f"{MEGATRON}.pipeline_model_parallel_size")
    if tp < 1 or pp < 1 or gpus % (tp * pp):
        raise NotComparable(f"Megatron TP {tp} x PP {pp} does not divide {gpus} GPUs")
    if pp > 1:
        raise NotComparable(f"Megatron PP {pp}: verl reports its last pipeline stage, and the estimates do not "
                            "place the embedding and output layer on their stages; no certificate checks them")
    for key in ("context_parallel_size", "expert_model_parallel_size"):
        if _int(o, f"{MEGATRON}.{key}") != 1:
            raise NotComparable(f"{MEGATRON}.{key}={o[f'{MEGATRON}.{key}']}: the estimates know TP, PP and DP")
    if tp > 1 and not _flag(o, f"{MEGATRON}.sequence_parallel"):
        raise NotComparable("sequence_parallel off: the estimates split every activation over TP, as Megatron "
                            "does only with it")
    if not _flag(o, f"{MEGATRON}.use_distributed_optimizer"):
        raise NotComparable("use_distributed_optimizer off: the estimates shard the optimizer's states over DP")
    if not _flag(o, f"{MEGATRON}.vanilla_mbridge"):
        raise NotComparable("vanilla_mbridge off (verl's default, Megatron-Bridge): the weight-sync estimate "
                            "follows mbridge's export_weights")
    recompute = o.get(f"{MEGATRON}.override_transformer_config.recompute_granularity", "null")
    if recompute.lower() not in ("null", "none", "~"):
        raise NotComparable(f"Megatron recompute_granularity={recompute}: the estimates know no recomputation")
    offload = _flag(o, f"{MEGATRON}.param_offload")
    if o.get("actor_rollout_ref.ref.megatron.param_offload", str(offload)).lower() != str(offload).lower():
        raise NotComparable("the reference's param_offload differs from the actor's: the estimates take one")
    return {"backend": "megatron", "tp": tp, "pp": pp, "grad_ckpt": False, "fsdp1": False, "param_offload": offload,
            "optimizer_offload": _flag(o, f"{MEGATRON}.optimizer_offload"), "offload_policy": False}


def shape(doc: dict) -> Shape:
    """The job's shape from a certificate; NotComparable for one that is not a verl FSDP or Megatron run on GPUs
    that the model can take."""
    settings = doc.get("settings") or {}
    # what decides is whether verl's actor measured its memory (the engine's name is the engines' own business)
    if not any(MEASURED in row for row in (doc.get("metrics") or {}).get("per_step") or []):
        raise NotComparable(f"no {MEASURED} in its steps (a {doc.get('engine')} certificate): rocmkit tune plans "
                            "verl jobs, whose actor measures it")
    backend = settings.get("backend", "fsdp")
    if backend not in ("fsdp", "megatron"):
        raise NotComparable(f"backend {backend}: the model knows FSDP and Megatron")
    if not settings.get("gpus"):
        raise NotComparable("a CPU run")
    o = verl_overrides(settings.get("command") or [])
    lora = lora_rank(o)
    optim = o.get("actor_rollout_ref.actor.optim.override_optimizer_config", "")
    foreach = not re.search(r"\bforeach\s*:\s*false\b", optim, re.I)
    dynamic = _flag(o, "actor_rollout_ref.actor.use_dynamic_bsz")
    micro = 0 if dynamic else _int(o, "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu")
    seq = _int(o, "data.max_prompt_length") + _int(o, "data.max_response_length")
    gpus = _int(o, "trainer.n_gpus_per_node") * _int(o, "trainer.nnodes")
    common = dict(
        # a certificate without `numerics` comes from before the built-in model had one row per token
        model=_job_model(settings, padded="numerics" not in doc), model_name=str(settings.get("model")), gpus=gpus,
        rollout_tp=_int(o, "actor_rollout_ref.rollout.tensor_model_parallel_size"), micro_batch=micro,
        tokens=_int(o, "actor_rollout_ref.actor.ppo_max_token_len_per_gpu") if dynamic else micro * seq,
        bucket_bytes=memory.sync_staging(settings.get("rollout") or "vllm", _int(
            o, "actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes") << 20),
        foreach=foreach, lora_rank=lora)
    if lora and common["model"].experts:
        raise NotComparable("LoRA on a mixture-of-experts model: the model counts adapters on dense layers")
    if backend == "megatron":  # FSDP's strategy, checkpointing and fsdp_config are not read
        if lora:
            raise NotComparable("LoRA with Megatron: the model counts LoRA under FSDP")
        return Shape(**common, **_megatron(o, gpus))
    strategy = o.get("actor_rollout_ref.actor.strategy", VERL_DEFAULTS["actor_rollout_ref.actor.strategy"])
    if strategy not in ("fsdp", "fsdp2"):
        raise NotComparable(f"actor strategy {strategy}: the model knows FSDP's")
    fsdp1 = strategy == "fsdp"
    # FSDP2's CPUOffloadPolicy; verl's FSDP1 engine never reads offload_policy
    policy = not fsdp1 and _flag(o, "actor_rollout_ref.actor.fsdp_config.offload_policy")
    return Shape(
        **common, grad_ckpt=_flag(o, "actor_rollout_ref.model.enable_gradient_checkpointing"), fsdp1=fsdp1,
        param_offload=policy or _flag(o, "actor_rollout_ref.actor.fsdp_config.param_offload"),
        optimizer_offload=policy or _flag(o, "actor_rollout_ref.actor.fsdp_config.optimizer_offload"),
        offload_policy=policy)


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

    if s.backend == "megatron":
        step = memory.megatron_step(s.model, tokens=s.tokens, tp=s.tp, pp=s.pp, dp=s.dp, param_offload=s.param_offload)
        sync = partial(memory.megatron_weight_sync, s.model, tp=s.tp, pp=s.pp, dp=s.dp, bucket_bytes=s.bucket_bytes,
                       param_offload=s.param_offload, optimizer_offload=s.optimizer_offload)
    else:
        step = memory.actor_step(s.model, tokens=s.tokens, grad_ckpt=s.grad_ckpt, shards=s.gpus,
                                 offload=s.offload_policy, foreach=s.foreach, fsdp1=s.fsdp1, lora_rank=s.lora_rank)
        sync = partial(memory.weight_sync, s.model, shards=s.gpus, bucket_bytes=s.bucket_bytes, fsdp1=s.fsdp1,
                       param_offload=s.param_offload, lora_rank=s.lora_rank)
    return Comparison(name=name, device=str(doc.get("device", "")), shape=s, step=step,
                      first_sync=sync(adam_on_gpu=False), sync=sync(adam_on_gpu=not s.optimizer_offload),
                      measured_first=measured[0][1], measured_last=measured[-1][1], last_step=measured[-1][0])


def side_by_side(doc: dict) -> dict | None:
    """The actor's peak memory per GPU as verl measured it (at its last step), beside this model's prediction for
    the same shape and the GPU's capacity: what a job's certificate shows. None for a run with no measured peak
    (TRL, the CPU); with "not_compared" (why) where the model cannot take the shape."""
    rows = _measured(doc)
    if not rows:
        return None
    step, peak = rows[-1]
    out: dict = {"step": step, "measured_gib": round(peak / GIB, 2)}
    totals = [g["total"] for g in (doc.get("setup") or {}).get("gpu_memory") or [] if g.get("total")]
    if totals:  # the smallest GPU's; the rollout engine's share is freed while the actor trains (sleep mode)
        out["capacity_gib"] = round(min(totals) / GIB, 2)
        out["headroom_gib"] = round(out["capacity_gib"] - out["measured_gib"], 2)
    try:
        c = compare("", doc)
    except NotComparable as exc:
        out["not_compared"] = str(exc)
    else:
        out.update(predicted_gib=round(c.predicted_last.peak / GIB, 2), ratio=round(c.ratio_last, 3))
    return out

