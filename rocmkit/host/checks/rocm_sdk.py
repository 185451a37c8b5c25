"""This year's traps of ROCm from pip and ROCm 10: two libamd_smi copies (or two amdsmi packages) in one
Python, where the second to start sees no GPU; and ROCm 10.0's PyTorch on MI350X/MI355X, whose AOTriton 0.13b
picks a slower flash-attention backward kernel."""

from __future__ import annotations

import re

from ..facts import Facts
from ..facts.rocm_sdk import copies
from ..model import Status
from . import Context, documents, finding

AMD_SMI_REF = "pytorch/pytorch#186516; ROCm/rocm-systems#7643; sgl-project/sglang docker/rocm.Dockerfile (libamd_smi link)"
AOTRITON_REF = ("ROCm/TheRock#7696; ROCm 10.0.0 release notes, known issues (AOTriton 0.13b); ROCm 10.1.0 release "
                "notes (kernel selection corrected)")


@documents("software.amd_smi_copies",
           what="ROCm from pip (TheRock): one `libamd_smi` file behind `_rocm_sdk_core` and `_rocm_sdk_devel`, and one `amdsmi` package on the path; with two, whichever starts second sees no GPU and torch and Ray count 0 (fail)")
def check_amd_smi_copies(f: Facts, ctx: Context):
    sdk = (f.process or {}).get("rocm_sdk")
    if not isinstance(sdk, dict):
        return
    files = copies(sdk)
    packages = [p for p in sdk.get("amdsmi_packages") or [] if isinstance(p, str)]
    if len(files) > 1:
        core = next((x for x in files if "_rocm_sdk_core" in x), files[0])
        others = [x for x in files if x != core]
        yield finding("software.amd_smi_copies", "software", Status.FAIL,
                      f"{len(files)} copies of libamd_smi in one Python ({', '.join(files)}): each keeps its own "
                      "state, and the one that starts second enumerates no GPU, so torch.cuda.device_count() and "
                      "Ray see 0 GPUs", fix="link the others to _rocm_sdk_core's: " + "; ".join(
                          f"ln -sf {core} {o}" for o in others) + " (rocmkit's pip ROCm images do it at build time)",
                      ref=AMD_SMI_REF, libraries=files)
    elif len(packages) > 1:
        yield finding("software.amd_smi_copies", "software", Status.FAIL,
                      f"{len(packages)} amdsmi packages on the path ({', '.join(packages)}): Python imports the "
                      "first, which may load another libamd_smi than torch's, and then sees no GPU",
                      fix="keep the one installed from _rocm_sdk_core/share/amd_smi: `pip uninstall -y amdsmi`, then "
                          "`pip install --no-deps <site-packages>/_rocm_sdk_core/share/amd_smi`",
                      ref=AMD_SMI_REF, packages=packages)
    elif files:
        yield finding("software.amd_smi_copies", "software", Status.PASS,
                      f"one libamd_smi in this Python's ROCm SDK ({files[0]})", library=files[0])


def _hip(f: Facts) -> tuple[int, int] | None:
    text = (f.process or {}).get("torch_hip")
    m = re.match(r"(\d+)\.(\d+)", text) if isinstance(text, str) else None
    return (int(m.group(1)), int(m.group(2))) if m else None


@documents("software.aotriton_gfx950",
           what="PyTorch built for ROCm 10.0 on MI350X/MI355X (gfx950, a GPU here or the target): its AOTriton 0.13b selects a slower flash-attention backward kernel than 0.11.2b, 9-25% less training throughput (warn)")
def check_aotriton_gfx950(f: Facts, ctx: Context):
    hip = _hip(f)
    gfx950 = any(d.gfx == "gfx950" for d in f.devices) or "gfx950" in (ctx.arch or "").split(",")
    if hip != (10, 0) or not gfx950 or not f.package("torch"):
        return
    yield finding("software.aotriton_gfx950", "software", Status.WARN,
                  f"PyTorch {f.package('torch')} is built for ROCm 10.0 (HIP {f.process['torch_hip']}) and runs on "
                  "gfx950: its AOTriton 0.13b picks a slower flash-attention backward kernel than AOTriton 0.11.2b's "
                  "3-kernel split, 9-25% less training throughput on MI350X/MI355X",
                  fix="move to ROCm 10.1 (its PyTorch selects the faster kernel again), or rebuild PyTorch with "
                      "AOTriton pinned to 0.11.2b", ref=AOTRITON_REF, torch=f.package("torch"),
                  torch_hip=f.process["torch_hip"], aotriton="0.13b (ROCm 10.0.0's)")


CHECKS = [check_amd_smi_copies, check_aotriton_gfx950]
