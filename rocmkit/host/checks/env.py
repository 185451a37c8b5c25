"""Environment variables that decide which GPUs a job sees and how ROCm/RCCL/Ray behave."""

from __future__ import annotations

import re

from ... import archs, raycompat
from ..facts import Facts
from ..model import Status
from . import Context, documents, finding, not_captured

VISIBLE = ("ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
ARCH_VARS = ("PYTORCH_ROCM_ARCH", "GPU_ARCHS", "AMDGPU_TARGETS", "NVTE_ROCM_ARCH")
ENV_DOC = "https://rocm.docs.amd.com/en/docs-7.1.1/reference/env-variables.html"
WORKLOAD_DOC = "https://rocm.docs.amd.com/en/latest/how-to/rocm-for-ai/inference-optimization/workload.html"


def _uint(value: str | None) -> int | None:
    """A plain ASCII decimal (str.isdigit() also accepts "²", which int() refuses)."""
    return int(value) if value is not None and re.fullmatch(r"[0-9]+", value) else None


def _indices(value: str) -> list[int] | None:
    out = []
    for part in value.split(","):
        i = _uint(part.strip())
        if i is None:
            return None  # UUIDs and the like: not judged by index
        out.append(i)
    return out


@documents("env.visible_devices", "env.visible_devices.*",
           what="`ROCR/HIP/CUDA_VISIBLE_DEVICES`: set-but-empty, HIP≠CUDA, ROCR mixed with HIP/CUDA, values that hide every GPU (`NoDevFiles`, `-1`, a first index past the GPUs), indices past the GPUs visible")
def check_visible_devices(f: Facts, ctx: Context):
    if f.process is None:
        yield not_captured("env.visible_devices", "env", "visible-devices variables")
        return
    env = f.env
    setvars = {k: env[k] for k in VISIBLE if k in env}
    problems = []
    for k, v in setvars.items():
        if v.strip() == "":
            problems.append((Status.FAIL, f"{k} is set but empty: CUDA semantics hide every GPU, HIP ignores it "
                             "(ROCm/hip#3001) — the job's view depends on which layer reads it",
                             f"unset {k} or list the GPUs"))
    hip, cuda = setvars.get("HIP_VISIBLE_DEVICES"), setvars.get("CUDA_VISIBLE_DEVICES")
    if hip and cuda and hip != cuda:
        problems.append((Status.FAIL, f"HIP_VISIBLE_DEVICES={hip} and CUDA_VISIBLE_DEVICES={cuda} disagree "
                         "(vLLM and Ray refuse to start)", "set only one of them"))
    if "ROCR_VISIBLE_DEVICES" in setvars and (hip or cuda):
        problems.append((Status.WARN, "ROCR_VISIBLE_DEVICES is set together with HIP/CUDA_VISIBLE_DEVICES: HIP "
                         "ordinals renumber after ROCr masking (invalid device ordinal; ray-project/ray#53737, "
                         "vllm-project/vllm#12572)", "unset ROCR_VISIBLE_DEVICES and use HIP_VISIBLE_DEVICES"))
    # HIP, like CUDA, reads the list up to its first invalid entry: "-1" (the CUDA idiom) or Slurm's and
    # Ray's "NoDevFiles" first hides every GPU.
    for k, v in setvars.items():
        first = v.split(",")[0].strip()
        if first == "NoDevFiles" or re.fullmatch(r"-[0-9]+", first):
            problems.append((Status.FAIL, f"{k}={v} hides every GPU from this process (the list stops at its "
                             "first invalid entry)", f"unset {k}, or list the GPUs the job should use"))
    if f.devices:
        partitions = sum(d.partitions for d in f.devices)
        for k, v in setvars.items():
            idx = _indices(v) if v.strip() else None
            if idx and idx[0] >= partitions:
                problems.append((Status.FAIL, f"{k}={v} hides every GPU: its first index is past the {partitions} "
                                 "visible here, and the list stops there", f"list indices below {partitions}"))
            elif idx and max(idx) >= partitions:
                problems.append((Status.FAIL, f"{k}={v} names GPU {max(idx)} but only {partitions} are visible here",
                                 f"list indices below {partitions}"))
    if not problems:
        yield finding("env.visible_devices", "env", Status.PASS,
                      "visible-devices variables are consistent" if setvars else "no visible-devices variable set",
                      **setvars)
        return
    for i, (status, title, fix) in enumerate(problems):
        yield finding(f"env.visible_devices{'' if i == 0 else f'.{i}'}", "env", status, title, fix=fix,
                      ref=ENV_DOC, **setvars)


@documents("env.ray_noset", "env.ray_noset.typo",
           what="the `RAY_EXPERIMENTAL_NOSET_*` variable the installed Ray reads (from its `amd_gpu.py`, else its version) is set; typos")
def check_ray(f: Facts, ctx: Context):
    if f.process is None:
        yield not_captured("env.ray_noset", "env", "Ray and its no-set variables")
        return
    ray = f.package("ray")
    set_vars = sorted(k for k in f.env if k.startswith("RAY_EXPERIMENTAL_NOSET"))
    typos = [k for k in set_vars if k not in raycompat.ALL_NOSET_VARS]
    if typos:
        yield finding("env.ray_noset.typo", "env", Status.WARN, f"unknown Ray variable(s) {typos}: Ray ignores them",
                      fix="the variables are RAY_EXPERIMENTAL_NOSET_{HIP,ROCR,CUDA}_VISIBLE_DEVICES",
                      ref="vllm-project/vllm#46895", variables=typos)
    if not ray:
        yield finding("env.ray_noset", "env", Status.SKIP, "Ray is not installed")
        return
    try:
        needed = raycompat.noset_variable(ray)
    except ValueError:
        yield finding("env.ray_noset", "env", Status.WARN, f"cannot read Ray's version {ray!r}", ray=ray)
        return
    honoured = f.process.get("ray_noset_vars")  # what the installed Ray's AMD code actually reads
    if honoured and needed not in honoured:
        needed = next((v for v in honoured if v in (raycompat.HIP_VAR, raycompat.ROCR_VAR)), needed)
    if f.env.get(needed) == "1":
        yield finding("env.ray_noset", "env", Status.PASS, f"{needed}=1 matches Ray {ray}", ray=ray, honoured=honoured)
        return
    wrong = [v for v in set_vars if v != needed and v in (raycompat.HIP_VAR, raycompat.ROCR_VAR)]
    yield finding("env.ray_noset", "env", Status.WARN,
                  f"Ray {ray} reads {needed}, which is not set" + (f" ({', '.join(wrong)} is set but has no effect)"
                                                                   if wrong else "") +
                  ": Ray will narrow each actor's GPUs under verl", fix=f"export {needed}=1",
                  ref="verl AMD docs; ray-project/ray#51104 (2.45 switched to HIP_VISIBLE_DEVICES)",
                  ray=ray, honoured=honoured, set=set_vars)


@documents("env.arch", "env.arch.*", "env.hsa_override_gfx_version",
           what="`PYTORCH_ROCM_ARCH`/`GPU_ARCHS`/`AMDGPU_TARGETS`/`NVTE_ROCM_ARCH` cover the host arch; no consumer-GPU override")
def check_arch_vars(f: Facts, ctx: Context):
    if not f.devices:
        return
    if f.process is None:
        yield not_captured("env.arch", "env", "arch variables (PYTORCH_ROCM_ARCH, ...)")
        return
    host = sorted({d.gfx for d in f.devices if d.gfx})
    for var in ARCH_VARS:
        value = f.env.get(var)
        if value is None:
            continue
        listed = archs.split_targets(value)
        missing = [g for g in host if g not in listed]
        if missing:
            yield finding(f"env.arch.{var.lower()}", "env", Status.FAIL,
                          f"{var}={value} does not include this host's {', '.join(missing)}: extensions built or "
                          "JIT-compiled here get no code for these GPUs (hipErrorNoBinaryForGpu)",
                          fix=f"export {var}=\"{archs.join_targets(sorted(set(listed) | set(host)))}\"",
                          ref="vllm-project/vllm#32895", value=value, host=host)
        else:
            yield finding(f"env.arch.{var.lower()}", "env", Status.PASS, f"{var} covers {', '.join(host)}", value=value)
    override = f.env.get("HSA_OVERRIDE_GFX_VERSION")
    if override is not None:
        yield finding("env.hsa_override_gfx_version", "env", Status.FAIL,
                      f"HSA_OVERRIDE_GFX_VERSION={override} is set: a consumer-GPU workaround that makes Instinct GPUs "
                      "load kernels for another arch", fix="unset HSA_OVERRIDE_GFX_VERSION", value=override)


@documents("env.hip_force_dev_kernarg", "env.hsa_no_scratch_reclaim", "env.nccl_min_nchannels", "env.tuning",
           what="where they apply (ROCm < 6.2; ROCm ≥ 7.1, MEC firmware < 177 or gfx90a; multi-GPU gfx942/gfx950)")
def check_tuning_vars(f: Facts, ctx: Context):
    if not f.devices:
        return
    if f.process is None:
        yield not_captured("env.tuning", "env", "HIP_FORCE_DEV_KERNARG, HSA_NO_SCRATCH_RECLAIM, NCCL_MIN_NCHANNELS")
        return
    env = f.env
    rocm = f.rocm_version.split("-")[0] if f.rocm_version else None  # as written, less its build number
    release = archs.rocm_release(rocm) if rocm else None
    gfx = {d.gfx for d in f.devices}
    multi = sum(d.partitions for d in f.devices) > 1
    if env.get("HIP_FORCE_DEV_KERNARG") != "1":
        old = release is not None and release < (6, 2)
        yield finding("env.hip_force_dev_kernarg", "env", Status.WARN if old else Status.PASS,
                      "HIP_FORCE_DEV_KERNARG is not set" + (f": ROCm {rocm} keeps kernel arguments in host memory "
                                                            "(slower launches)" if old else " (the default since ROCm 6.2)"),
                      fix="export HIP_FORCE_DEV_KERNARG=1" if old else None,
                      ref="https://instinct.docs.amd.com/projects/amdgpu-docs/en/latest/system-optimization/mi300x.html")
    else:
        yield finding("env.hip_force_dev_kernarg", "env", Status.PASS, "HIP_FORCE_DEV_KERNARG=1")
    if multi and env.get("HSA_NO_SCRATCH_RECLAIM") != "1":
        fw = min((d.props.get("fw_version", 10**6) for d in f.devices), default=10**6)
        reasons = []
        if release is not None and release >= (7, 1):
            reasons.append(f"RCCL on ROCm {rocm} fails ncclCommInitRank without it (vllm-project/vllm#32497)")
        if fw < 177:
            reasons.append(f"MEC firmware {fw} < 177 cannot reclaim RCCL scratch memory")
        if "gfx90a" in gfx:
            reasons.append("gfx90a small-message latency (ROCm/rocm-systems#8657)")
        if reasons:
            yield finding("env.hsa_no_scratch_reclaim", "env", Status.WARN,
                          "HSA_NO_SCRATCH_RECLAIM is not set: " + "; ".join(reasons),
                          fix="export HSA_NO_SCRATCH_RECLAIM=1",
                          ref="vllm-project/vllm#32497; ROCm/rccl#1867; ROCm/rocm-systems#8657; " + ENV_DOC, mec_fw=fw)
    if multi and (gfx & {"gfx942", "gfx950"}):
        v = env.get("NCCL_MIN_NCHANNELS")
        if _uint(v) is None or _uint(v) < 112:
            yield finding("env.nccl_min_nchannels", "env", Status.WARN,
                          f"NCCL_MIN_NCHANNELS is {v or 'not set'}: RCCL uses too few channels to fill XGMI",
                          fix="export NCCL_MIN_NCHANNELS=112", ref=WORKLOAD_DOC, value=v)
        else:
            yield finding("env.nccl_min_nchannels", "env", Status.PASS, f"NCCL_MIN_NCHANNELS={v}")


CHECKS = [check_visible_devices, check_ray, check_arch_vars, check_tuning_vars]
