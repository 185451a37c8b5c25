"""The options of a certification checked before anything is read or started (exit 2 on a mistake): the generic
ones here, the ones an engine owns by that engine (certify/engines/), which also refuses them when another engine
was chosen."""

from __future__ import annotations

from pathlib import Path

from ..errors import UsageError
from ..runtime import imageref
from . import engines
from .settings import MAX_STEPS, MIN_STEPS, SIZES, Settings


def validate(s: Settings) -> Settings:
    """Every option on its own and in combination; paths made absolute. Raises UsageError. The options one engine
    owns are checked by that engine (certify/engines/), and refused by it when another engine was chosen."""
    engine = engines.of(s)
    if s.steps < (1 if s.job else MIN_STEPS):  # a job's learning is reported, not judged
        raise UsageError(f"--steps {s.steps}: at least {MIN_STEPS} (learning is judged over the first and last quarter)")
    if s.steps > MAX_STEPS:
        raise UsageError(f"--steps {s.steps}: at most {MAX_STEPS} (a smoke run; the built-in task writes rows for each "
                         "step before anything starts)", hint="the default, 16, proves a stack trains")
    if s.gpus < 0:
        raise UsageError(f"--gpus {s.gpus}: a count of GPUs, 0 for the CPU")
    if s.timeout < 1:
        raise UsageError(f"--timeout {s.timeout}: seconds, at least 1")
    if s.stall_timeout < 0:
        raise UsageError(f"--stall-timeout {s.stall_timeout}: seconds without a step or an output line, 0 for none")
    if s.size not in SIZES:
        raise UsageError(f"--size {s.size!r}", hint=f"one of: {', '.join(SIZES)}")
    for other in engines.registry().values():
        if other is not engine:
            other.refuse_foreign(s)
    engine.check(s)
    if s.image is not None:
        imageref.checked(s.image, "--image", image_id=True)
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
