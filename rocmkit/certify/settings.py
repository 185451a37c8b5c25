"""What a certification run is asked to do: the options, their types and defaults (the CLI reads them here).
validate.py checks them before anything is read or started (exit 2 on a mistake)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..textenum import TextEnum
from .job import Job
from .watchdog import STALL_S


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
MAX_STEPS = 100_000  # a smoke run: the built-in task writes 4 rows a step, so a typo of 10^12 steps would fill the disk


@dataclass(frozen=True)
class Settings:
    engine: str = "trl"  # a name in certify/engines' registry
    image: str | None = None  # None: run on this host
    model: Path | None = None  # None: the built-in model
    data: Path | None = None  # None: the built-in task
    steps: int = 16
    steps_given: bool = False  # --steps given: exactly that many; otherwise the built-in task stops once it learned
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
    engine_defaults: bool = False  # verl: none of the smoke run's start-up cuts (certify/engines/verl/smoke_cuts.py)
    rollout_tp: int = 1  # verl's rollout tensor parallel size: replicas of this many GPUs each
    miles_dir: str = MILES_DIR  # Miles only: its checkout inside the image
    job: Job | None = None  # verl only: a user's launch script read as a job (certify --script; job.py)

    @property
    def builtin(self) -> bool:
        return self.model is None and self.data is None

    @property
    def learning_required(self) -> bool:
        return self.builtin if self.require_learning is None else self.require_learning

    @property
    def on_cpu(self) -> bool:
        return self.gpus == 0
