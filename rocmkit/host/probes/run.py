"""Level 2 of `rocmkit doctor`: measure what each GPU delivers, then judge it against the arch table.

    figures = measure(facts)            # plain dict: every figure with its samples (certificates embed it)
    findings = judge(figures)           # pure: judge.py
    run_probes(facts) -> findings       # both; what `rocmkit doctor --level 2` calls (no torch/GPU: exit 3,
                                        # or a skip finding with require_gpu=False)

Per GPU, one after another (so a shared PCIe switch or power budget does not blur whose figure is whose):
bf16 GEMM, fp8 GEMM where the arch has fp8, device-memory copy, pinned host-to-device and device-to-host
copies; then one all-reduce across all of them, one process per GPU; P2P copies between every pair; a small
Megatron GPT trained with TP over the first one or two (megatron.py); VRAM release on the first. Each
measuring probe stops once steady, within its share of `budget_s` seconds per GPU.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from ... import archs
from ...errors import EnvironmentMissing, UsageError
from ...progress import Display
from ..facts.reader import read_pci_device
from ..model import Finding, Status
from .judge import judge
from .measure import ProbeError, allreduce, device_copy, gemm, host_copy
from .megatron import measure_megatron
from .p2p import P2P_BYTES, measure_p2p
from .verdict import AREA
from .vram import measure_vram

DEFAULT_BUDGET_S = 4.0  # seconds of measuring per GPU, split by SHARE; each probe usually stops sooner
ALLREDUCE_BUDGET_S = 2.0
SHARE = {"gemm.bf16": 0.25, "gemm.fp8": 0.25, "hbm": 0.15, "h2d": 0.175, "d2h": 0.175}
FP8_DTYPE = {"fnuz": "float8_e4m3fnuz", "e4m3": "float8_e4m3fn"}


@dataclass(frozen=True)
class Sizes:
    """Problem sizes. The defaults saturate an MI355X or H200 while staying well inside a second per probe;
    the copy buffers dwarf MI300X's 256 MB Infinity Cache. All-reduce bus bandwidth still climbs past
    256 MiB messages (two H200s: 297 GB/s at 256 MiB, 337 at 2 GiB), hence 1 GiB."""

    gemm_n: int = 8192
    hbm_bytes: int = 1 << 30
    host_bytes: int = 256 << 20
    allreduce_bytes: int = 1 << 30
    p2p_bytes: int = P2P_BYTES


def _gpu_info(torch, device: str, facts) -> dict[str, Any]:
    """Name, arch, PCI address, product and partition count of one torch device."""
    if device == "cpu":
        import platform

        return {"index": "cpu", "device": "cpu", "name": platform.processor() or platform.machine(), "arch": None,
                "pci": None, "product": None, "partitions": 1}
    index = int(device.split(":")[1])
    props = torch.cuda.get_device_properties(index)
    if torch.version.hip:
        arch = (getattr(props, "gcnArchName", "") or "").split(":")[0] or None
    else:
        arch = f"sm{props.major}{props.minor}"
    pci = None
    if hasattr(props, "pci_bus_id"):
        pci = f"{getattr(props, 'pci_domain_id', 0):04x}:{props.pci_bus_id:02x}:{props.pci_device_id:02x}.0"
    info: dict[str, Any] = {"index": index, "device": device, "name": props.name, "arch": arch, "pci": pci,
                            "memory_gib": round(props.total_memory / 2**30, 1),
                            "multiprocessors": props.multi_processor_count, "product": None, "partitions": 1}
    product, partitions = None, 1
    for d in getattr(facts, "devices", None) or []:
        if pci and d.pci_address == pci:
            product, partitions = d.product, d.mode_partitions
    sysfs = read_pci_device(pci)
    if product is None and sysfs.get("device"):
        product = archs.product_for_pci_id(sysfs["device"])
    if product is None:
        product = next((p for a in archs.all_archs().values() for p in a.products
                        if p.torch_name.lower() == props.name.strip().lower()), None)
    if " MIG " in f" {props.name} ":  # an NVIDIA MIG slice: a fraction of the GPU with no datasheet figures
        product = None
    info.update(product=product.name if product else None, partitions=partitions,
                pci_device_id=sysfs.get("device"), link=sysfs.get("link"))
    if product and not arch:
        info["arch"] = product.arch
    return info


def _fp8_dtype(info: dict[str, Any]) -> str | None:
    arch = archs.all_archs().get(info.get("arch") or "")
    if arch is None and info.get("product"):
        arch = archs.all_archs().get(archs.product_named(info["product"]).arch)
    if info["device"] == "cpu":
        return "float8_e4m3fn"
    return FP8_DTYPE.get(arch.fp8) if arch else None


def _unavailable(missing: str, reason: str) -> dict[str, Any]:
    return {"available": False, "missing": missing, "reason": reason, "gpus": []}


def measure(facts=None, *, gpus: list[int] | None = None, budget_s: float = DEFAULT_BUDGET_S, sizes: Sizes = Sizes(),
            with_allreduce: bool = True, devices: list[str] | None = None,
            progress: Display | None = None, with_p2p: bool = True, with_vram: bool = True,
            with_megatron: bool = True) -> dict[str, Any]:
    """Measure every visible GPU (or the torch device indices in `gpus`) and return the figures document.

    `devices` overrides the device list ("cuda:N" or "cpu"): "cpu" measures the host through the same code,
    for testing the path on a machine without a GPU. `progress` shows the probe running and each result.
    """
    say = progress or _Quiet()
    started = time.perf_counter()
    try:
        import torch
    except ImportError:
        return _unavailable("torch", "PyTorch is not installed in this environment; level 2 measures through torch.cuda")
    if devices is None:
        if not torch.cuda.is_available():
            visible = {k: v for k, v in os.environ.items() if k in ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
                                                                      "CUDA_VISIBLE_DEVICES")}
            return _unavailable("gpu", f"torch {torch.__version__} sees no GPU (torch.cuda.is_available() is False"
                                + (f"; {visible}" if visible else "") + ")")
        count = torch.cuda.device_count()
        indices = list(range(count)) if gpus is None else list(gpus)
        bad = [i for i in indices if not 0 <= i < count]
        if bad:
            raise UsageError(f"GPU index {bad[0]} is not visible: torch sees {count} GPU(s), 0..{count - 1}")
        devices = [f"cuda:{i}" for i in indices]
    if facts is None and devices and devices[0] != "cpu":
        try:
            from ..facts import collect

            facts = collect("/")
        except Exception:  # noqa: BLE001 - facts only refine the product lookup (partitions); torch names suffice
            facts = None
    doc: dict[str, Any] = {
        "available": True, "torch": torch.__version__,
        "runtime": f"HIP {torch.version.hip}" if torch.version.hip else
                   (f"CUDA {torch.version.cuda}" if torch.version.cuda else "cpu"),
        "budget_s": budget_s, "sizes": asdict(sizes), "gpus": [],
    }
    for dev in devices:
        info = _gpu_info(torch, dev, facts)
        doc["gpus"].append(_measure_device(torch, dev, info, budget_s, sizes, say))
    if with_allreduce and len(devices) >= 2:
        say.stage(f"all-reduce across {len(devices)} devices")
        ar: dict[str, Any] = {"gpus": [g["index"] for g in doc["gpus"]]}
        try:
            ar["figure"] = allreduce(devices, nbytes=sizes.allreduce_bytes, budget_s=ALLREDUCE_BUDGET_S).to_json()
        except ProbeError as exc:
            ar["error"] = str(exc)
        doc["allreduce"] = ar
    elif with_allreduce:
        doc["allreduce"] = None
    if with_p2p:
        doc["p2p"] = measure_p2p(devices, nbytes=sizes.p2p_bytes, say=say) if len(devices) >= 2 else None
    if with_megatron:  # a small GPT trained with TP over the first one or two GPUs, in processes of its own
        if devices[0].startswith("cuda:"):
            tp = min(len(devices), 2)
            say.stage(f"Megatron GPT, TP={tp} on {', '.join(devices[:tp])}", "a few training steps")
            doc["megatron"] = measure_megatron(devices[:tp])
        else:  # the CPU/gloo path is measure_megatron's own (tests); here it would only repeat level 2's CPU run
            doc["megatron"] = {"available": False, "reason": f"needs a GPU (device {devices[0]})"}
    if with_vram:  # last: it takes most of the first GPU's free memory, in a process of its own
        if devices[0].startswith("cuda:"):
            say.stage(f"VRAM release on {devices[0]}", "a fresh process, a few cycles")
            doc["vram_release"] = measure_vram(int(devices[0].split(":")[1]))
        else:
            doc["vram_release"] = {"available": False, "reason": f"needs a GPU (device {devices[0]})"}
    say.done()
    doc["seconds"] = round(time.perf_counter() - started, 2)
    return doc


def _measure_device(torch, dev: str, info: dict[str, Any], budget_s: float, sizes: Sizes,
                    say: Display | _Quiet) -> dict[str, Any]:
    device = torch.device(dev)
    t0 = time.perf_counter()
    figures: dict[str, Any] = {}
    errors: dict[str, str] = {}
    fp8 = _fp8_dtype(info)
    hbm_bytes = sizes.hbm_bytes
    if device.type == "cuda":
        torch.cuda.set_device(device)
        hbm_bytes = min(hbm_bytes, torch.cuda.get_device_properties(device).total_memory // 16)
    probes: list[tuple[str, Callable[[float], Any]]] = [
        ("gemm.bf16", lambda b: gemm(device, n=sizes.gemm_n, dtype="bf16", budget_s=b)),
        ("gemm.fp8", (lambda b: gemm(device, n=sizes.gemm_n, dtype="fp8", fp8_dtype=fp8, budget_s=b)) if fp8 else None),
        ("hbm", lambda b: device_copy(device, nbytes=hbm_bytes, budget_s=b)),
        ("h2d", lambda b: host_copy(device, direction="h2d", nbytes=sizes.host_bytes, budget_s=b)),
        ("d2h", lambda b: host_copy(device, direction="d2h", nbytes=sizes.host_bytes, budget_s=b)),
    ]
    for key, run in probes:
        if run is None:
            continue
        say.stage(f"{dev} ({info['name']}) {key}", f"up to {SHARE[key] * budget_s:.1f} s")
        try:
            fig = run(SHARE[key] * budget_s)
            figures[key] = fig.to_json()
            say.note(f"{dev} ({info['name']}): {key} {fig.value:.1f} {fig.unit} in {fig.seconds:.2f} s")
        except ProbeError as exc:
            errors[key] = str(exc)
            say.note(f"{dev} ({info['name']}): {key} failed: {exc}")
    if device.type == "cuda":
        torch.cuda.synchronize(device)
        torch.cuda.empty_cache()  # give the memory back before the next GPU and the all-reduce workers
    info.update(figures=figures, errors=errors, seconds=round(time.perf_counter() - t0, 2))
    return info


def findings_for(doc: dict[str, Any]) -> list[Finding]:
    """Findings for a figures document; an unavailable one gives a single skip saying why."""
    if not doc.get("available", True):
        return [Finding(f"{AREA}.gpu", AREA, Status.SKIP, f"GPU probes not run: {doc['reason']}",
                        {"reason": doc["reason"]})]
    return judge(doc)


class _Quiet:
    """A display that shows nothing (measure() called from code, tests, certify's own display)."""

    def stage(self, name: str, detail: str = "") -> None: ...
    def note(self, text: str) -> None: ...
    def done(self) -> None: ...


def run_probes(facts=None, *, gpus: list[int] | None = None, budget_s: float = DEFAULT_BUDGET_S,
               require_gpu: bool = True, progress: str = "auto") -> list[Finding]:
    """Measure and judge: one finding per measure (probe.gemm.bf16, probe.gemm.fp8, probe.hbm, probe.h2d,
    probe.d2h, probe.allreduce, probe.p2p, probe.megatron, probe.vram_release), every figure with its samples in the evidence.

    With no torch or no GPU: EnvironmentMissing when `require_gpu` (level 2 asked for explicitly: exit 3),
    else a single skip finding saying why.
    """
    if facts is not None and not getattr(facts, "live", True):
        raise UsageError("--level 2 measures this machine's GPUs; a captured tree (--root) has none to measure",
                         hint="run `rocmkit doctor --level 2` on the host itself")
    with Display("probe", mode=progress) as shown:  # on stderr: stdout may carry --json
        doc = measure(facts, gpus=gpus, budget_s=budget_s, progress=shown)
    if require_gpu and not doc.get("available", True):
        raise _missing(doc)
    return findings_for(doc)


def _missing(doc: dict[str, Any]) -> EnvironmentMissing:
    if doc.get("missing") == "torch":
        hint = ("install PyTorch built for this GPU (ROCm wheels: https://pytorch.org/get-started/locally/), or "
                "run it inside a rocmkit-built image: `rocmkit doctor --image IMAGE --level 2`")
    else:
        hint = "run it where the GPUs are (in a container: grant /dev/kfd and /dev/dri, see `rocmkit run`), or use level 1"
    return EnvironmentMissing(f"level 2 needs a GPU: {doc['reason']}", hint=hint)
