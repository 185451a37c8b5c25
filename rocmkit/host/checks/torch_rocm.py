"""The ROCm that PyTorch was built with, against the GPUs here. PyTorch's ROCm wheels carry their own HIP
runtime, so /opt/rocm (rocm.version) may be new enough while torch is not: a torch built for ROCm 6.x has
no gfx950 kernels and fails on MI355X with "no kernel image is available" (hipErrorNoBinaryForGpu)."""

from __future__ import annotations

import re

from ... import archs
from ..facts import Facts
from ..model import Status
from . import Context, documents, finding

MATRIX = "https://rocm.docs.amd.com/en/latest/compatibility/compatibility-matrix.html"


@documents("rocm.torch",
           what="the ROCm PyTorch was built with (`torch.version.hip`; its wheels carry their own runtime), new enough for the GPUs (a ROCm 6.x torch on MI355X has no gfx950 kernels)")
def check_torch_rocm(f: Facts, ctx: Context):
    hip = (f.process or {}).get("torch_hip")
    m = re.match(r"([0-9]+)\.([0-9]+)", hip) if isinstance(hip, str) else None
    if not m or not f.devices:
        return  # no ROCm build of torch (software.torch says so), or no AMD GPU to judge it against
    built = f"{m.group(1)}.{m.group(2)}"
    too_old = sorted({f"{d.product.name if d.product else d.gfx} needs ROCm >= {archs.min_rocm_for(a, d.product)}"
                      for d in f.devices if (a := archs.all_archs().get(d.gfx or ""))
                      and not archs.rocm_supports(built, a, d.product)})
    torch = f.package("torch")
    if too_old:
        yield finding("rocm.torch", "software", Status.FAIL,
                      f"PyTorch {torch} is built for ROCm {built}, too old for these GPUs ({'; '.join(too_old)}): "
                      "its kernels do not run here (hipErrorNoBinaryForGpu)",
                      fix="install a PyTorch built for a ROCm that supports them (e.g. from "
                          "https://download.pytorch.org/whl/rocm7.0), or use a rocmkit image for this arch",
                      ref=f"{MATRIX}; vllm-project/vllm#32895", torch=torch, torch_hip=hip)
    else:
        yield finding("rocm.torch", "software", Status.PASS,
                      f"PyTorch {torch} is built for ROCm {built}, which supports the GPUs here", torch_hip=hip)


CHECKS = [check_torch_rocm]
