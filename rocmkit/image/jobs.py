"""`--max-jobs auto`: how many compile jobs each build stage may run, from the builder's memory and cores.

Memory is what usually binds: a hipcc job on flash-attention, CK or aiter kernels peaks at several GB,
and BuildKit runs the stages of one plan level at the same time, each with MAX_JOBS jobs of its own.
vLLM's base image ran a 32-core / 64 GB builder out of memory with `$(nproc)` jobs (vllm-project/vllm
PR #29003); upstream recipes that hard-code 512 only work on builders with terabytes."""

from __future__ import annotations

from dataclasses import dataclass

from ..stacks.model import NO_ROCM

GIB = 1024 ** 3
# Peak resident memory of one compile job. hipcc on the heavy ROCm kernels needs about 4 GB; plain
# C/C++ (stacks without ROCm) about 1 GB.
GIB_PER_JOB_ROCM = 4
GIB_PER_JOB_PLAIN = 1
# Left for the engine, BuildKit and the stages' pip/linker steps.
RESERVED_GIB = 2


@dataclass(frozen=True)
class JobsChoice:
    jobs: int
    reason: str


def auto_max_jobs(mem_total: int, ncpu: int, parallel_stages: int, gib_per_job: float) -> JobsChoice:
    """Jobs per stage such that every stage of the widest plan level compiling at once stays inside
    the builder's memory, and no stage runs more jobs than the builder has cores. At least 1."""
    stages = max(1, parallel_stages)
    usable = max(0.0, mem_total / GIB - RESERVED_GIB)
    by_memory = int(usable // (gib_per_job * stages))
    jobs = max(1, min(max(1, ncpu), by_memory))
    bound = "cores" if ncpu <= by_memory else "memory"
    reason = (f"auto: {mem_total / GIB:.1f} GiB and {ncpu} CPUs on the builder, up to {stages} stage(s) compiling "
              f"at once, {gib_per_job:g} GiB per compile job; bound by {bound}")
    return JobsChoice(jobs, reason)


def gib_per_job(rocm: str) -> float:
    """Per-job memory for a stack: ROCm stacks compile HIP kernels, `rocm = "none"` stacks plain C."""
    return GIB_PER_JOB_PLAIN if rocm == NO_ROCM else GIB_PER_JOB_ROCM
