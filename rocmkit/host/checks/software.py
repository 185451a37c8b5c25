"""Python stack (PyTorch built for HIP, framework versions), GPU libraries, Docker."""

from __future__ import annotations

from ..facts import Facts
from ..model import Status
from . import Context, documents, finding, not_captured

FRAMEWORKS = ("vllm", "sglang", "ray", "verl", "transformers", "triton")


@documents("software.torch",
           what="PyTorch present and built for HIP (read from `torch/version.py`, without importing torch)")
def check_torch(f: Facts, ctx: Context):
    if f.process is None:
        yield not_captured("software.torch", "software", "PyTorch")
        return
    version = f.package("torch")
    hip = f.process.get("torch_hip")
    if version is None:
        yield finding("software.torch", "software", Status.WARN, "PyTorch is not installed in this environment",
                      fix="use a rocmkit-built image (rocmkit build), or install a ROCm build of PyTorch")
    elif hip:
        yield finding("software.torch", "software", Status.PASS, f"PyTorch {version} built for HIP {hip}",
                      torch=version, hip=hip)
    elif f.devices:
        yield finding("software.torch", "software", Status.FAIL,
                      f"PyTorch {version} is not a ROCm build (torch.version.hip is empty) on an AMD GPU host",
                      fix=f"install PyTorch from the ROCm index for this host's ROCm ({_torch_index(f.rocm_version)}); "
                          "a later `pip install` without a constraint may have replaced it (rocmkit images set "
                          "PIP_CONSTRAINT)",
                      torch=version)
    else:
        yield finding("software.torch", "software", Status.PASS, f"PyTorch {version} (no AMD GPU here)", torch=version)


@documents("software.versions",
           what="vLLM, SGLang, Ray, verl versions")
def check_versions(f: Facts, ctx: Context):
    if f.process is None:
        yield not_captured("software.versions", "software", "vLLM, SGLang, Ray, verl versions")
        return
    versions = {name: f.package(name) for name in FRAMEWORKS}
    present = {k: v for k, v in versions.items() if v}
    summary = ", ".join(f"{k} {v}" for k, v in present.items()) or "none of vLLM, SGLang, Ray, verl installed"
    yield finding("software.versions", "software", Status.PASS, summary, **versions)


@documents("software.amdsmi", "software.pyamdgpuinfo",
           what="used when they import and work; their failures (and what they print: `import amdsmi` prints to stdout without ROCm) are findings, never a crash or a corrupted `--json`")
def check_gpu_libraries(f: Facts, ctx: Context):
    if f.process is None:
        for name in ("pyamdgpuinfo", "amdsmi"):
            yield not_captured(f"software.{name}", "software", name)
        return
    for name, info in (f.process.get("gpu_libraries") or {}).items():
        if not isinstance(info, dict):
            continue
        status = info.get("status")
        if status == "error":
            yield finding(f"software.{name}", "software", Status.WARN if f.devices else Status.SKIP,
                          f"{name} is installed but fails: {info.get('error')} (sysfs is used instead)",
                          fix="install the amdsmi matching the host's ROCm (/opt/rocm/share/amd_smi)"
                          if name == "amdsmi" else "needs /dev/dri and the amdgpu driver", library=info)
        elif status == "ok":
            yield finding(f"software.{name}", "software", Status.PASS,
                          f"{name} works ({info.get('gpus')} GPU(s) seen)", library=info)


@documents("software.docker",
           what="Docker engine reachable and usable by this user")
def check_docker(f: Facts, ctx: Context):
    if f.process is None:
        yield not_captured("software.docker", "software", "Docker engine")
        return
    d = f.process.get("docker") or {}
    status = d.get("status")
    if status == "ok":
        yield finding("software.docker", "software", Status.PASS, f"Docker engine reachable at {d.get('host')}", engine=d)
    elif status == "denied":
        yield finding("software.docker", "software", Status.WARN,
                      f"Docker engine at {d.get('host')} refuses this user",
                      fix="sudo usermod -aG docker $USER (then log in again), or use rootless Docker", engine=d)
    elif status in ("absent", "down"):
        yield finding("software.docker", "software", Status.SKIP if f.container else Status.WARN,
                      f"no Docker engine at {d.get('host')} ({status}); needed for rocmkit build/run",
                      fix=None if f.container else "start dockerd (`sudo systemctl start docker`) or set DOCKER_HOST",
                      engine=d)
    else:  # "unchecked" (a tcp:// or ssh:// DOCKER_HOST is not probed at level 1), or unknown
        yield finding("software.docker", "software", Status.SKIP,
                      f"Docker engine at {d.get('host')} not checked: {d.get('reason') or status}", engine=d)


CHECKS = [check_torch, check_versions, check_gpu_libraries, check_docker]  # VF configs: vfconfigs.py


def _torch_index(rocm: str | None) -> str:
    """PyTorch's ROCm index for a host with this ROCm (certify's advice names the same one): the newest index not
    newer than it, so a ROCm 7.0.2 host is pointed at rocm7.0, not at a fixed older index."""
    from ..torch_advice import INDEX, rocm_index

    return f"{INDEX}{rocm_index(rocm)}"

