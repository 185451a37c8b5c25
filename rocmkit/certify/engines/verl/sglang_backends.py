"""Which attention and sampling backends verl's SGLang rollout runs with, chosen in the target where the setup can
see what is installed.

verl 0.9.1 picks SGLang's attention itself (verl/workers/rollout/sglang_rollout/async_sglang_server.py,
launch_server): `aiter` on ROCm, `flashinfer` on CUDA from SGLang 0.5.12 on ("FA3 CUDA-graph capture is broken"),
else `fa3`; SGLang picks its sampler (sglang/srt/server_args.py: `flashinfer` where flashinfer imports, else
`pytorch`). Each of those needs kernels a trimmed or partial install may lack, and then fails minutes into the run,
or compiles for minutes first: flashinfer without its prebuilt kernels (the `flashinfer-cubin` or
`flashinfer-jit-cache` packages) compiles every kernel with nvcc at first use; `fa3` needs sgl_kernel's
FlashAttention library (`flash_ops`, 1 GB); `aiter` needs AMD's aiter. `probe()` looks (without loading any GPU
library); `choose()` (pure) keeps verl's and SGLang's own choice where its kernels are there and otherwise takes the
backend that needs none beyond Triton: SGLang's Triton attention, and the PyTorch sampler. The choice and why are
in the certificate (`engine_run.sglang`); the overrides set only what differs from the defaults.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path

from ....pkgdirs import package_dir

KEY = "+actor_rollout_ref.rollout.engine_kwargs.sglang"
PREBUILT = ("flashinfer-cubin", "flashinfer-jit-cache")  # flashinfer's kernels, compiled ahead of time


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def probe() -> dict:
    """In the target, after torch is imported: SGLang's version, the platform, and which backends' kernels exist."""
    import torch

    kernel_dir = package_dir("sgl_kernel")
    return {
        "sglang": _version("sglang"),
        "rocm": torch.version.hip is not None,
        "aiter": importlib.util.find_spec("aiter") is not None,
        "flashinfer": _version("flashinfer-python"),
        "flashinfer_prebuilt": [d for d in PREBUILT if _version(d)],
        "fa3": bool(kernel_dir and any(Path(kernel_dir).glob("flash_ops*.so"))),
    }


def choose(found: dict) -> dict:
    """{"attention_backend", "sampling_backend", "why", "overrides"}: verl's and SGLang's defaults where their
    kernels are installed, else Triton attention and the PyTorch sampler. Pure."""
    why = []
    if found.get("rocm"):
        attention = "aiter" if found.get("aiter") else "triton"
        why.append("verl's default on ROCm, aiter" if found.get("aiter")
                   else "triton: verl's ROCm default, aiter, is not installed")
        sampling = "pytorch"  # flashinfer is CUDA-only: SGLang's own default on ROCm
        why.append("SGLang's sampler on ROCm, pytorch")
    else:
        ready = bool(found.get("flashinfer") and found.get("flashinfer_prebuilt"))
        attention = "flashinfer" if ready else "triton"
        sampling = "flashinfer" if ready else "pytorch"
        if ready:
            why.append(f"verl's default, flashinfer, with prebuilt kernels ({', '.join(found['flashinfer_prebuilt'])})")
        else:
            missing = ("flashinfer is not installed" if not found.get("flashinfer") else
                       "flashinfer has no prebuilt kernels (flashinfer-cubin or flashinfer-jit-cache) and would "
                       "compile each with nvcc at first use")
            why.append(f"triton attention and the pytorch sampler: {missing}")
    overrides = []
    if attention not in ("aiter", "flashinfer"):
        overrides.append(f"{KEY}.attention_backend={attention}")
    if sampling == "pytorch" and not found.get("rocm"):
        overrides.append(f"{KEY}.sampling_backend={sampling}")
    return {"attention_backend": attention, "sampling_backend": sampling, "why": "; ".join(why),
            "overrides": overrides}

