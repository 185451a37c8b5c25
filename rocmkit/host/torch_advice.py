"""What certify tells a user whose torch cannot see the GPUs asked for: which torch it found, and the command
that installs the right one.

The usual case: `pip install 'rocmkit[certify]'` on an AMD GPU host installs PyPI's torch, which is built
for CUDA (or for the CPU only) and sees no AMD GPU. ROCm's build comes from PyTorch's own index,
https://download.pytorch.org/whl/rocmX.Y (PyTorch's install page, https://pytorch.org/get-started/locally/,
lists the ROCm releases of the current torch). Its wheels carry their own ROCm libraries, so what must match
the host is the amdgpu driver, not /opt/rocm: the index named is the newest one not newer than the host's ROCm.

`hint()` is pure: it takes the setup report's `devices` (setup.devices: torch, hip, cuda, visible, visible_env,
names) and what `host()` read of this machine.

It lives under host, not certify: the doctor's software check names the same index, and the doctor must not
import certify (certify stands on host).
"""

from __future__ import annotations

from pathlib import Path

from .. import archs

INDEX = "https://download.pytorch.org/whl/rocm"
# ROCm releases with a torch index at download.pytorch.org/whl/rocm<version>, oldest first: 6.2.4 is the one
# the verl-rocm6 stack installs from; 7.0 and 7.2 are the ROCm of the verl-vllm-rocm702, miles and
# verl-sglang stacks. Newer host ROCm (7.14, TheRock's pip SDK) takes the newest: the wheels bring their own.
ROCM_INDEXES = ("6.2.4", "6.3", "6.4", "7.0", "7.1", "7.2")
VISIBLE = ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")
KFD_NODES = "sys/class/kfd/kfd/topology/nodes"


def host(root: str | Path = "/") -> dict:
    """What this machine says about AMD GPUs, read from its files (a captured tree under `root` too):
    `amd_gpus` (/dev/kfd exists or the KFD topology lists a GPU node), `archs` (gfx names of the GPU nodes) and
    `rocm` (/opt/rocm/.info/version, or None)."""
    root = Path(root)
    gfx = set()
    nodes = root / KFD_NODES
    for props in sorted(nodes.glob("*/properties")) if nodes.is_dir() else ():
        try:
            fields = dict(line.split(None, 1) for line in props.read_text().splitlines() if " " in line)
            simd, version = int(fields.get("simd_count", 0)), int(fields.get("gfx_target_version", 0))
        except (OSError, ValueError):
            continue
        if simd > 0 and version > 0:
            gfx.add(archs.gfx_name(version))
    try:
        rocm = (root / "opt/rocm/.info/version").read_text().strip() or None
    except OSError:
        rocm = None
    return {"amd_gpus": (root / "dev/kfd").exists() or bool(gfx), "archs": sorted(gfx), "rocm": rocm}


def rocm_index(rocm: str | None) -> str:
    """The ROCm release of PyTorch's index for a host with this ROCm: the newest not newer than it (the newest
    when the host's ROCm is unknown or newer than every index; the oldest when it is older than all)."""
    have = archs.rocm_release(rocm) if rocm else None
    if have is None:
        return ROCM_INDEXES[-1]
    fitting = [v for v in ROCM_INDEXES if archs.rocm_release(v) <= have[:len(archs.rocm_release(v))]]
    return fitting[-1] if fitting else ROCM_INDEXES[0]


def install_command(python: str, rocm: str | None, *, replace: bool = True) -> str:
    """The commands that put ROCm's torch into `python`'s environment. `replace`: uninstall the torch (and the
    CUDA build's triton, which ROCm's pytorch-triton-rocm would otherwise sit beside) first, since pip keeps an
    installed torch that already satisfies `torch`."""
    pip = f"{python} -m pip"
    install = f"{pip} install torch --index-url {INDEX}{rocm_index(rocm)}"
    return f"{pip} uninstall -y torch triton && {install}" if replace else install


def _built_for(dev: dict) -> str:
    if dev.get("hip"):
        return f"ROCm (HIP {dev['hip']})"
    if dev.get("cuda"):
        return f"CUDA {dev['cuda']}"
    return "the CPU only"


def _hidden_by(dev: dict) -> str:
    env = {k: v for k, v in (dev.get("visible_env") or {}).items() if k in VISIBLE}
    return ", ".join(f"{k}={v!r}" for k, v in env.items())


def hint(dev: dict, machine: dict, *, python: str = "python3", image: str | None = None, cpu_note: str = "") -> str:
    """The hint when torch in the target sees fewer GPUs than asked for. `dev`: the setup report's `devices`;
    `machine`: host() of this machine; `python`: the target's interpreter on this host; `image`: the image
    certified, if any; `cpu_note`: what the engine adds to "--gpus 0 runs on the CPU"."""
    torch = f"torch {dev.get('torch', '?')}"
    where = f"the image's {torch}" if image else torch
    cpu = f"--gpus 0 runs on the CPU{cpu_note}"
    hidden = _hidden_by(dev)
    seen = dev.get("visible", 0)
    if seen:  # torch drives some GPUs of this host: the run fits on those, or the rest are hidden from it
        names = sorted(set(dev.get("names") or []))
        return (f"{where} (built for {_built_for(dev)}) sees {seen} GPU(s)" + (f" ({', '.join(names)})" if names
                else "") + f": ask for --gpus {seen}" + (f", or unset {hidden} to show it the others" if hidden
                                                          else " or fewer"))
    if not machine.get("amd_gpus"):
        return (f"this host shows no AMD GPU (no /dev/kfd, no GPU in the KFD topology) and {where} is built for "
                f"{_built_for(dev)}: {cpu}; on a GPU host `rocmkit doctor` says why the GPUs are not visible")
    arch = (machine.get("archs") or ["ARCH"])[0]  # ARCH: gfx942 (MI300X/MI325X) or gfx950 (MI350X/MI355X)
    if dev.get("hip"):
        check = f"`rocmkit doctor --image {image}`" if image else "`rocmkit doctor`"
        why = (f"{hidden} hides them" if hidden else
               "usual causes: this user not in the video and render groups, /dev/kfd not readable, "
               "HIP_VISIBLE_DEVICES or ROCR_VISIBLE_DEVICES set")
        return f"{where} is ROCm's build but sees no GPU ({why}): {check} says why; or {cpu}"
    if image:
        return (f"{where} is built for {_built_for(dev)}, which cannot drive this host's AMD GPUs: certify an image "
                f"built from a ROCm stack (`rocmkit stacks` lists them), e.g. `rocmkit build --stack verl-vllm "
                f"--arch {arch}`, then `rocmkit certify --image IMAGE`; or {cpu}")
    replace = install_command(python, machine.get("rocm"))
    rocm = f" (this host's ROCm {machine['rocm'].split('-')[0]})" if machine.get("rocm") else ""
    return (f"{where} is built for {_built_for(dev)}, which cannot drive this host's AMD GPUs: install ROCm's "
            f"build{rocm}: {replace}; then `{python} -c \"import torch; print(torch.version.hip)\"` prints a HIP "
            f"version. Or certify inside an image: `rocmkit build --arch {arch}`, then `rocmkit certify --image "
            f"IMAGE`; or {cpu}")
