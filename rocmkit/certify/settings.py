"""What a certification run is asked to do, checked before anything is read or started (exit 2 on a mistake)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError
from ..runtime import imageref
from ..textenum import TextEnum
from .watchdog import STALL_S


class EngineKind(TextEnum):
    TRL = "trl"
    VERL = "verl"
    MILES = "miles"  # Miles' own e2e test in its image (certify/miles_run.py)


class Backend(TextEnum):
    FSDP = "fsdp"
    MEGATRON = "megatron"


class VllmMode(TextEnum):
    """TRL's two ways of generating with vLLM (GRPOConfig.vllm_mode)."""
    SERVER = "server"
    COLOCATE = "colocate"


class Rollout(TextEnum):
    VLLM = "vllm"
    SGLANG = "sglang"


SIZES = ("tiny", "0.5b")
MILES_DIR = "/root/miles"  # where Miles' Dockerfile.rocm clones it; its tests and train.py live there
MIN_STEPS = 4  # learning is judged over the first and the last quarter of the steps
# Built-in task, TRL: a group of 8 answers per prompt, 2 prompts a step, a high learning rate for a tiny model
# (the reward rises within about ten steps on a CPU). A 0.5B model diverges at the tiny model's rate.
TRL_DEFAULTS = {"beta": 0.04, "num_generations": 8, "batch_size": 16, "max_completion_length": 12}
TRL_LR = {"tiny": 5e-3, "0.5b": 2e-5, "user": 2e-5}
# TRL with vLLM: the server's context (the built-in prompts are short; a user's data gets room) and how long
# rocmkit waits for its /health/ (vLLM's CPU build loads and warms up in about a minute on two cores).
TRL_MAX_MODEL_LEN = {"builtin": 256, "user": 2048}
SERVER_READY_S = 600
ZERO_STAGES = (1, 2, 3)
@dataclass(frozen=True)
class Settings:
    engine: EngineKind = EngineKind.TRL
    image: str | None = None  # None: run on this host
    model: Path | None = None  # None: the built-in model
    data: Path | None = None  # None: the built-in task
    steps: int = 16
    gpus: int = 1
    out: Path = Path("rocmkit-certify")
    require_learning: bool | None = None  # None: required only on the built-in task
    size: str = "tiny"
    rollout: Rollout = Rollout.VLLM
    timeout: int = 3600
    stall_timeout: int = STALL_S  # 0: no stall limit (fatal errors still stop the run); see watchdog.py
    probes: bool = True
    force: bool = False
    dry_run: bool = False
    seed: int = 0
    tune: tuple[str, ...] = ()  # a `rocmkit tune` plan's overrides, checked against the target's verl
    backend: Backend = Backend.FSDP  # verl's actor: FSDP, or Megatron (model_engine=megatron, mbridge)
    tp: int = 1  # Megatron tensor and pipeline parallel sizes of the actor (and reference)
    pp: int = 1
    vllm_mode: VllmMode | None = None  # TRL only; None: TRL generates with Hugging Face's generate
    zero: int | None = None  # DeepSpeed ZeRO stage for TRL's trainer under accelerate
    attn: str = "auto"  # verl's actor and reference attention: auto, flash_attention_2, sdpa (attention.py)
    rollout_graphs: bool = False  # verl's rollout compiled with CUDA/HIP graphs instead of eager
    miles_dir: str = MILES_DIR  # Miles only: its checkout inside the image

    @property
    def builtin(self) -> bool:
        return self.model is None and self.data is None

    @property
    def learning_required(self) -> bool:
        return self.builtin if self.require_learning is None else self.require_learning

    @property
    def on_cpu(self) -> bool:
        return self.gpus == 0


def check(s: Settings) -> Settings:
    """Every option on its own and in combination; paths made absolute. Raises UsageError."""
    if s.steps < MIN_STEPS:
        raise UsageError(f"--steps {s.steps}: at least {MIN_STEPS} (learning is judged over the first and last quarter)")
    if s.gpus < 0:
        raise UsageError(f"--gpus {s.gpus}: a count of GPUs, 0 for the CPU")
    if s.timeout < 1:
        raise UsageError(f"--timeout {s.timeout}: seconds, at least 1")
    if s.stall_timeout < 0:
        raise UsageError(f"--stall-timeout {s.stall_timeout}: seconds without a step or an output line, 0 for none")
    if s.size not in SIZES:
        raise UsageError(f"--size {s.size!r}", hint=f"one of: {', '.join(SIZES)}")
    if s.engine is EngineKind.VERL and s.on_cpu and s.rollout is not Rollout.VLLM:
        raise UsageError("--gpus 0 with the verl engine runs vLLM's CPU build; SGLang has no CPU rollout in verl",
                         hint="leave out --rollout, or give GPUs")
    if s.backend is Backend.MEGATRON:
        megatron_checks(s)
    elif (s.tp, s.pp) != (1, 1):
        raise UsageError("--tp and --pp size verl's Megatron actor: they need --backend megatron")
    if s.vllm_mode is not None and s.engine is not EngineKind.TRL:
        raise UsageError(f"--vllm-mode {s.vllm_mode.value} is TRL's; verl's rollout is chosen with --rollout",
                         hint="add --engine trl, or leave out --vllm-mode")
    if s.vllm_mode is VllmMode.SERVER and s.gpus == 1:
        raise UsageError("--vllm-mode server puts the server on the first GPU and trains on the others: "
                         "--gpus 1 leaves none to train on", hint="--gpus 2 or more, --gpus 0 for the CPU, "
                         "or --vllm-mode colocate on one GPU")
    if s.vllm_mode is VllmMode.COLOCATE and s.on_cpu:
        # TRL's colocate sync calls model.load_weights on vLLM's model, whose linear weights vLLM's CPU build has
        # repacked and emptied (vllm/model_executor/layers/linear.py): the first sync fails
        raise UsageError("--vllm-mode colocate needs GPUs: on the CPU, TRL's weight sync into vLLM's repacked "
                         "model fails", hint="--vllm-mode server runs on the CPU")
    if s.zero is not None:
        if s.zero not in ZERO_STAGES:
            raise UsageError(f"--zero {s.zero}: a DeepSpeed ZeRO stage", hint="1, 2 or 3")
        if s.vllm_mode is None or s.on_cpu:
            raise UsageError("--zero runs TRL's trainer under accelerate with DeepSpeed, on GPUs",
                             hint="add --vllm-mode server or colocate, and --gpus")
    verl_run_checks(s)
    if s.tune and s.engine is not EngineKind.VERL:
        raise UsageError("--tune checks a verl plan: it needs --engine verl")
    if s.image is not None and not imageref.is_ref(s.image, image_id=True):
        raise UsageError(f"--image {s.image!r} is not an image reference",
                         hint="[registry/]repository[:tag][@sha256:digest] with a lower-case repository, or an image id")
    model = data = None
    if s.model is not None:
        model = Path(s.model).resolve()
        if not (model / "config.json").is_file():
            raise UsageError(f"--model {s.model}: not a model folder (no config.json)",
                             hint="give a local Hugging Face model folder; nothing is downloaded")
    if s.data is not None:
        data = Path(s.data).resolve()
        if not (data.is_file() and data.suffix == ".parquet"):
            raise UsageError(f"--data {s.data}: not a parquet file",
                             hint="a parquet file with verl's columns: prompt, data_source, reward_model.ground_truth")
    return Settings(**{**s.__dict__, "model": model, "data": data, "out": Path(s.out).absolute()})


def verl_run_checks(s: Settings) -> None:
    """--attn and --rollout-graphs shape verl's FSDP actor and its rollout on GPUs."""
    from ..verl.attention import CHOICES

    if s.attn not in CHOICES:
        raise UsageError(f"--attn {s.attn!r}", hint=f"one of: {', '.join(CHOICES)}")
    if s.attn != "auto" and (s.engine is not EngineKind.VERL or s.backend is not Backend.FSDP):
        raise UsageError(f"--attn {s.attn} chooses the attention of verl's FSDP actor (transformers' "
                         "attn_implementation)", hint="use it with --engine verl and the fsdp backend; Megatron "
                         "runs megatron-core's own attention")
    if s.rollout_graphs and (s.engine is not EngineKind.VERL or s.on_cpu):
        raise UsageError("--rollout-graphs compiles verl's rollout and captures its CUDA/HIP graphs: it needs "
                         "--engine verl and GPUs", hint="leave it out on the CPU (the rollout runs eager there)")


def megatron_checks(s: Settings) -> None:
    """What rocmkit knows before verl is asked: Megatron is verl's, trains on GPUs only, and the built-in model's
    heads and layers bound TP and PP. Whether TP x PP fits the GPUs is verl's own rule (its validate_config)."""
    if s.engine is not EngineKind.VERL:
        raise UsageError("--backend megatron is verl's Megatron actor: it needs --engine verl")
    if s.on_cpu:
        raise UsageError("--backend megatron trains on GPUs only (megatron-core's fused kernels and NCCL/RCCL); "
                         "--gpus 0 is refused", hint="give --gpus N on a GPU host, or leave out --backend to train "
                                                     "with FSDP on the CPU (the verl-cpu stack)")
    for name, value in (("--tp", s.tp), ("--pp", s.pp)):
        if value < 1:
            raise UsageError(f"{name} {value}: a parallel size, at least 1")
    if s.model is None:
        from .tinymodel import SIZES

        _, _, layers, heads, kv_heads = SIZES[s.size]
        if heads % s.tp or kv_heads % s.tp:
            raise UsageError(f"--tp {s.tp}: the built-in {s.size} model has {heads} attention and {kv_heads} KV "
                             "heads; TP must divide both", hint=f"--tp {kv_heads} at most")
        if s.pp > layers:
            raise UsageError(f"--pp {s.pp}: the built-in {s.size} model has {layers} layers",
                             hint=f"--pp {layers} at most" + (", or --size 0.5b" if s.size == "tiny" else ""))
