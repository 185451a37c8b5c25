"""Hardware health facts of each GPU and RDMA NIC, read from sysfs through the doctor's reader: amdgpu's RAS
error counters and bad pages, PCIe link state, ACS on the bridges above them, the processes holding GPU memory
and each GPU's total and used memory (gpu_holders.py), and the power cap.

Formats, from the kernel:
- `<pci>/ras/<block>_err_count`: "ue: N\\nce: M" (newer kernels add "de: K", deferred errors);
  `<pci>/ras/gpu_vram_bad_pages`: "0x<pfn> : 0x<size> : R|P|F" per page (R retired, P pending, F failed)
  (drivers/gpu/drm/amd/amdgpu/amdgpu_ras.c, Documentation/gpu/amdgpu/ras.rst).
- `<pci>/{current,max}_link_{speed,width}`: "32.0 GT/s PCIe", "16" (drivers/pci/pci-sysfs.c).
- `<pci>/config`: the binary config space; a reader without CAP_SYS_ADMIN gets its first 64 bytes only, so
  the extended capabilities (ACS, id 0x000D, from offset 0x100) need root (PCIe base spec, 7.7.8).
- `<pci>/hwmon/hwmon*/power1_cap{,_max,_default}`: microwatts (amdgpu_pm.c).
- `<pci>/aer_dev_*` and a root port's `aer_rootport_total_err_*`: PCIe AER counters since boot (aer.py).
Where the bridges above a device are found: the realpath of /sys/bus/pci/devices/<pci> nests the device
under every bridge on its way to the root complex. Those links are recorded (HealthFacts.links) so that a
capture can recreate them and `--root` sees the same chain.
"""

from __future__ import annotations

import os
import re
from typing import NamedTuple

from .aer import Aer, read_aer, uptime_s
from .gpu_holders import GpuMemory, Holder, gpu_memory, holders
from .kfd import Device
from .reader import Reader

PCI_DEVICES = "sys/bus/pci/devices"
INFINIBAND = "sys/class/infiniband"
PCI_ADDRESS = re.compile(r"[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]")
ACS_ID = 0x000D
# ACS control register bits (PCIe base spec 7.7.8.3), lspci's names
ACS_BITS = {0: "SrcValid", 1: "TransBlk", 2: "ReqRedir", 3: "CmpltRedir", 4: "UpstreamFwd", 5: "EgressCtrl",
            6: "DirectTrans"}


class Link(NamedTuple):
    """A PCIe link's current and maximum speed and width, as sysfs writes them."""

    current_speed: str | None = None
    current_width: str | None = None
    max_speed: str | None = None
    max_width: str | None = None

    def gts(self, which: str) -> float | None:
        m = re.match(r"\s*([0-9.]+)\s*GT/s", getattr(self, f"{which}_speed") or "")
        return float(m.group(1)) if m else None

    def lanes(self, which: str) -> int | None:
        w = (getattr(self, f"{which}_width") or "").strip().lstrip("x")
        return int(w) if w.isdigit() else None


class Bridge(NamedTuple):
    """A PCI bridge above a GPU or NIC: its ACS control, its link (the nearest one only) and AER counters."""

    pci: str
    config_bytes: int | None = None  # bytes of config space readable (64: not root); None: unreadable
    acs_control: int | None = None  # the ACS control register; None where the bridge has no ACS capability
    link: Link | None = None  # read for the bridge nearest a GPU or NIC only
    error: str | None = None
    aer: Aer | None = None  # PCIe AER counters since boot (aer.py); None: no AER files


class PciHealth(NamedTuple):
    """One GPU or RDMA NIC: its link, the bridges above it (nearest first) and, for GPUs, RAS and power."""

    pci: str
    link: Link | None
    bridges: list[str]  # PCI addresses, nearest first
    aer: Aer | None  # PCIe AER counters since boot (aer.py); None: no AER files
    ras: dict[str, dict[str, int]] | None = None  # block -> {"ue": N, "ce": M, ...}; None: no ras folder
    ras_errors: tuple[str, ...] = ()  # ras files that could not be read or parsed
    bad_pages: list[tuple[str, str, str]] | None = None  # (pfn, size, flag)
    power: dict[str, int] | None = None  # power1_cap, power1_cap_max, power1_cap_default (µW)


class HealthFacts:
    """The health facts of a host's GPUs, RDMA NICs and the bridges above them, filled in by read_health (a plain
    class, as gather.Facts is: see there)."""

    def __init__(self) -> None:
        self.gpus: dict[str, PciHealth] = {}
        self.nics: dict[str, PciHealth] = {}  # RDMA device name -> its PCI function
        self.bridges: dict[str, Bridge] = {}
        self.holders: list[Holder] = []  # other processes holding GPU memory (the doctor's own left out)
        self.holders_source = ""  # what was read to find them ("": nothing was readable)
        self.gpu_memory: list[GpuMemory] = []  # each GPU's total and used memory, where readable
        self.self_pid: int | None = None
        self.links: dict[str, str] = {}  # symlink (root-relative) -> its target (root-relative)
        self.uptime_s: float | None = None  # /proc/uptime: the AER counters count since boot


def read_health(reader: Reader, devices: list[Device]) -> HealthFacts:
    """The health facts of these GPUs (the topology's devices) and of the host's RDMA NICs."""
    h = HealthFacts()
    stat_line = reader.line("proc/self/stat") or ""
    h.self_pid = int(stat_line.split()[0]) if stat_line.split()[:1] and stat_line.split()[0].isdigit() else None
    for d in devices:
        if d.pci_address and d.pci_address not in h.gpus:
            h.gpus[d.pci_address] = _gpu(reader, h, d.pci_address)
    for name in reader.listdir(INFINIBAND):
        real = _resolve(reader, h, f"{INFINIBAND}/{name}/device")
        pci = real.rsplit("/", 1)[-1] if real else None
        if pci and PCI_ADDRESS.fullmatch(pci):
            h.nics[name] = PciHealth(pci=pci, link=_link(reader, real), bridges=_bridges(reader, h, real),
                                     aer=read_aer(reader, real))
    if devices:  # (without an AMD GPU seen, nothing: no process scan, no nvidia-smi on the doctor's path)
        h.holders, h.holders_source = holders(reader, devices, exclude=[h.self_pid] if h.self_pid else [])
        h.gpu_memory = gpu_memory(reader, devices)
    h.uptime_s = uptime_s(reader) if h.gpus or h.nics else None
    return h


def _gpu(reader: Reader, h: HealthFacts, pci: str) -> PciHealth:
    base = _resolve(reader, h, f"{PCI_DEVICES}/{pci}") or f"{PCI_DEVICES}/{pci}"
    link, bridges, aer = _link(reader, base), _bridges(reader, h, base), read_aer(reader, base)
    ras_dir = f"{base}/ras"
    ras, ras_errors, bad_pages, power = None, [], None, None
    if reader.path(ras_dir).is_dir():
        ras = {}
        for name in sorted(reader.listdir(ras_dir)):
            if not name.endswith("_err_count"):
                continue
            text = reader.text(f"{ras_dir}/{name}", limit=4096)
            counts = {k: int(v) for k, v in re.findall(r"^\s*(\w+)\s*:\s*([0-9]+)\s*$", text or "", re.M)}
            if "ue" in counts or "ce" in counts:
                ras[name[:-len("_err_count")]] = counts
            else:
                ras_errors.append(name)
        if reader.path(f"{ras_dir}/gpu_vram_bad_pages").exists():
            text = reader.text(f"{ras_dir}/gpu_vram_bad_pages")
            if text is None:
                ras_errors.append("gpu_vram_bad_pages")
            else:
                bad_pages = re.findall(r"^\s*(0x[0-9a-fA-F]+)\s*:\s*(0x[0-9a-fA-F]+)\s*:\s*([RPF])\s*$", text, re.M)
    for hw in sorted(reader.listdir(f"{base}/hwmon")):
        values = {k: reader.line(f"{base}/hwmon/{hw}/{k}")
                  for k in ("power1_cap", "power1_cap_max", "power1_cap_default")}
        if values["power1_cap"] is not None:
            power = {k: int(v) for k, v in values.items() if v and v.isdigit()}
            break
    return PciHealth(pci=pci, link=link, bridges=bridges, ras=ras, ras_errors=tuple(ras_errors), bad_pages=bad_pages,
                     power=power, aer=aer)


def _link(reader: Reader, base: str) -> Link | None:
    link = Link(*(reader.line(f"{base}/{k}") for k in ("current_link_speed", "current_link_width", "max_link_speed",
                                                         "max_link_width")))
    return link if link.current_speed or link.current_width else None


def _bridges(reader: Reader, h: HealthFacts, real: str) -> list[str]:
    """The PCI bridges above a device (nearest first), from its sysfs path, each read once."""
    parts = real.split("/")
    chain = []
    for i in range(len(parts) - 2, -1, -1):
        if not PCI_ADDRESS.fullmatch(parts[i]):
            break
        pci, base = parts[i], "/".join(parts[:i + 1])
        chain.append(pci)
        if pci not in h.bridges:
            h.bridges[pci] = _bridge(reader, pci, base, link=not chain[:-1])
        elif not chain[:-1] and h.bridges[pci].link is None:
            h.bridges[pci] = h.bridges[pci]._replace(link=_link(reader, base))
    return chain


def _bridge(reader: Reader, pci: str, base: str, link: bool = True) -> Bridge:
    # the link of the bridge nearest a device is its evidence; those further up are not read (speed)
    near, aer = _link(reader, base) if link else None, read_aer(reader, base)
    data, error = reader.raw(f"{base}/config", 4096)
    return Bridge(pci=pci, config_bytes=len(data) if data is not None else None,
                  acs_control=_acs_control(data) if data is not None else None, link=near, error=error, aer=aer)


def _acs_control(config: bytes) -> int | None:
    """The ACS control register from a config space, or None where it has no ACS capability."""
    off, seen = 0x100, set()
    # the extended capability list: a header of id (16 bits), version (4), next offset (12), from 0x100
    while len(config) >= off + 8 and 0x100 <= off and off not in seen:
        seen.add(off)
        header = int.from_bytes(config[off:off + 4], "little")
        if header in (0, 0xFFFFFFFF):
            break
        if header & 0xFFFF == ACS_ID:
            return int.from_bytes(config[off + 6:off + 8], "little")
        off = (header >> 20) & 0xFFC
    return None


def _resolve(reader: Reader, h: HealthFacts, rel: str) -> str | None:
    """A sysfs link resolved inside the root (a link leading out of a captured tree is not followed)."""
    root = os.path.realpath(reader.root)
    try:
        real = os.path.realpath(reader.path(rel))
    except (OSError, ValueError):
        return None
    if real != root and not real.startswith(root.rstrip("/") + "/"):
        return None
    out = os.path.relpath(real, root)
    if out != rel and not os.path.exists(real):
        return None
    if out != rel:
        h.links[rel] = out
    return out
