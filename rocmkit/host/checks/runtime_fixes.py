"""The runtime fixes upstream RL recipes ship, checked where the doctor runs: legacy HIP IPC on ROCm >= 7.2
(its dma-buf IPC leaks VRAM in colocated rollouts), a ROCm PyTorch that pip replaced with a CUDA build, and a
GPU that libdrm's amdgpu.ids does not name (hipDeviceGetName then says "AMD Radeon Graphics")."""

from __future__ import annotations

import re

from ..facts import Facts
from ..model import Status
from . import Context, documents, finding

IPC_REF = "radixark/miles#1707; ROCm/hip#3886; verl-project/verl docker/rocm/Dockerfile.rocm@c791da0bf"
IDS_REF = "ROCm/ROCm#5992; sgl-project/sglang docker/rocm.Dockerfile (amdgpu.ids fix)"


def _rocm(f: Facts) -> tuple[int, int] | None:
    """The ROCm the processes here run on: torch's own HIP (its wheels carry their runtime), else /opt/rocm."""
    for text in ((f.process or {}).get("torch_hip"), f.rocm_version):
        m = re.match(r"(\d+)\.(\d+)", text) if isinstance(text, str) else None
        if m:
            return int(m.group(1)), int(m.group(2))
    return None


@documents("env.ipc_legacy",
           what="`HSA_ENABLE_IPC_MODE_LEGACY=1` on ROCm >= 7.2, whose dma-buf IPC leaks VRAM when rollout and training share GPUs (OOM after some steps)")
def check_ipc_legacy(f: Facts, ctx: Context):
    rocm = _rocm(f)
    if f.process is None or rocm is None or rocm < (7, 2) or not f.devices:
        return
    value = f.env.get("HSA_ENABLE_IPC_MODE_LEGACY")
    version = "%d.%d" % rocm
    if value == "1":
        yield finding("env.ipc_legacy", "env", Status.PASS, f"ROCm {version} with legacy HIP IPC (HSA_ENABLE_IPC_MODE_LEGACY=1)")
    else:
        yield finding("env.ipc_legacy", "env", Status.WARN,
                      f"ROCm {version} without HSA_ENABLE_IPC_MODE_LEGACY=1: its dma-buf IPC leaks the VRAM a "
                      "colocated rollout exports to training, until OOM after a few steps",
                      fix="export HSA_ENABLE_IPC_MODE_LEGACY=1 where rollout and training share GPUs (rocmkit's "
                          "ROCm >= 7.2 stacks set it)", ref=IPC_REF, rocm=version, value=value)


@documents("software.torch_cuda_swap",
           what="a ROCm image's PyTorch still a ROCm build: not replaced by a CUDA wheel (`+cu` in the version, or no `torch.version.hip` under a ROCm stack's manifest)")
def check_torch_cuda_swap(f: Facts, ctx: Context):
    version = f.package("torch")
    if f.process is None or not version:
        return
    stack_rocm = (f.manifest or {}).get("rocm")
    rocm_image = isinstance(stack_rocm, str) and stack_rocm != "none"
    cuda = re.search(r"\+cu\d+", version) is not None
    if cuda or (rocm_image and not f.process.get("torch_hip")):
        why = f"its version {version} is a CUDA build" if cuda else "torch.version.hip is empty"
        where = f" in an image built for ROCm {stack_rocm}" if rocm_image else ""
        yield finding("software.torch_cuda_swap", "software", Status.FAIL,
                      f"PyTorch was replaced by a CUDA build{where}: {why}",
                      fix="reinstall the ROCm PyTorch the image shipped and keep pip from replacing it: install "
                          "with the image's PIP_CONSTRAINT (rocmkit images set it) or pip's --no-deps",
                      ref="sgl-project/sglang docker/rocm.Dockerfile (PIP_CONSTRAINT)", torch=version,
                      manifest_rocm=stack_rocm)
    elif rocm_image:
        yield finding("software.torch_cuda_swap", "software", Status.PASS,
                      f"PyTorch {version} is still the ROCm build of this ROCm {stack_rocm} image")


@documents("gpu.amdgpu_ids",
           what="every GPU's PCI device id named in libdrm's `amdgpu.ids`, else its name shows as \"AMD Radeon Graphics\" and name-keyed tuned configs are missed")
def check_amdgpu_ids(f: Facts, ctx: Context):
    ids = {d.device_id[2:].upper(): d for d in f.devices if d.device_id and d.props.get("device_id")}
    if not ids:
        return
    if f.amdgpu_ids is None:
        yield finding("gpu.amdgpu_ids", "gpu", Status.WARN,
                      "libdrm's amdgpu.ids is absent: every GPU is named \"AMD Radeon Graphics\"",
                      fix="install libdrm's data (libdrm-amdgpu-common, or /opt/amdgpu/share/libdrm/amdgpu.ids "
                          "linked to /usr/share/libdrm/amdgpu.ids)", ref=IDS_REF)
        return
    path, known = f.amdgpu_ids
    missing = sorted(i for i in ids if i not in known)
    if missing:
        names = ", ".join(f"0x{i.lower()} ({ids[i].product.name if ids[i].product else 'unknown'})" for i in missing)
        yield finding("gpu.amdgpu_ids", "gpu", Status.WARN,
                      f"{path} does not name device {names}: hipDeviceGetName reports \"AMD Radeon Graphics\" "
                      "and engines miss their tuned configs",
                      fix="use a newer libdrm amdgpu.ids (the upstream libdrm file names MI300X through MI355X)",
                      ref=IDS_REF, path=path, missing=missing)
    else:
        yield finding("gpu.amdgpu_ids", "gpu", Status.PASS, f"{path} names every GPU here", path=path)


CAR_REF = "ROCm/aiter#4174 (fixed by ROCm/aiter#4621, 84fdad89); vllm-project/vllm#42609"
# PyTorch reads the first of these that is set (the order aiter#4560 follows).
ALLOC_CONF = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF", "PYTORCH_ALLOC_CONF")
# A rollout engine and the variable that sends its all-reduce through AITER's custom all-reduce.
AITER_ENGINES = (("vllm", "VLLM_ROCM_USE_AITER"), ("sglang", "SGLANG_USE_AITER"))


@documents("env.expandable_segments",
           what="`expandable_segments:True` in PyTorch's allocator settings where vLLM or SGLang route collectives through AITER's custom all-reduce, whose IPC buffers cannot be exported from expandable segments: TP workers abort at start-up, unless verl's rollout defaults turn custom all-reduce off (warn)")
def check_expandable_segments(f: Facts, ctx: Context):
    if f.process is None or not f.package("amd-aiter"):
        return
    name = next((n for n in ALLOC_CONF if n in f.env), None)
    if name is None or not re.search(r"expandable_segments\s*:\s*true", f.env[name], re.I):
        return
    engines = [e for e, flag in AITER_ENGINES if f.package(e) and f.env.get(flag) == "1"]
    if not engines:
        return
    off = f.process.get("verl_car_off") or []
    at_risk = [e for e in engines if e not in off]
    if not at_risk:
        yield finding("env.expandable_segments", "env", Status.PASS,
                      f"{name} has expandable_segments, but verl's rollout defaults turn custom all-reduce off for "
                      f"{', '.join(engines)}", variable=name, engines=engines)
        return
    yield finding("env.expandable_segments", "env", Status.WARN,
                  f"{name}={f.env[name]} with {', '.join(at_risk)} on AITER: AITER's custom all-reduce shares its "
                  "buffers by hipIpcGetMemHandle, which expandable segments cannot export, so tensor-parallel "
                  "workers abort at start-up (aiter before ROCm/aiter#4621)",
                  fix=f"drop expandable_segments:True from {name} for the rollout, or turn custom all-reduce off "
                      "(vLLM/SGLang disable_custom_all_reduce; verl's ROCm recipes set it in rollout.yaml), or use "
                      "an aiter with ROCm/aiter#4621", ref=CAR_REF, variable=name, engines=at_risk,
                  aiter=f.package("amd-aiter"))


CHECKS = [check_ipc_legacy, check_torch_cuda_swap, check_amdgpu_ids, check_expandable_segments]
