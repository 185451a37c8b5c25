"""The hardware-health part of a generated host tree (rocmkit.host.treegen): each GPU's PCI device nested
under its bridges as sysfs nests it, with RAS counters, link state, power cap, the bridges' config space, RDMA
NICs beside the GPUs, and KFD processes. No AMD capture of these files was at hand: they are built from the
kernel's documented formats (amdgpu_ras.c and Documentation/gpu/amdgpu/ras.rst, pci-sysfs.c, kfd_process.c,
amdgpu_pm.c) and the PCIe base spec's config space layout (a type 1 header, a capability list at 0x34, the
extended capability list from 0x100 with ACS, id 0x000D, control register at +6)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .treegen import HostSpec

RAS_BLOCKS = ("umc", "gfx", "sdma", "mmhub", "xgmi_wafl", "pcie_bif", "hdp")
GEN5 = (32.0, 16)
DEFAULT_CAP_W = 750  # MI300X's default and maximum (amd-smi's power cap of an OAM MI300X)


def gpu_id(node_index: int) -> int:
    """The KFD gpu_id a generated tree gives a topology node (the kernel's is a hash; any non-zero value)."""
    return 40000 + node_index


def bridge_config(acs_control: int, root: bool = True) -> bytes:
    """A PCIe bridge's config space: type 1 header, PCIe capability, AER then ACS extended capabilities."""
    c = bytearray(4096)
    c[0:4] = (0x1022 | 0x14A4 << 16).to_bytes(4, "little")  # AMD vendor id, a switch port's device id
    c[0x06] = 0x10  # status: capability list present
    c[0x0E] = 0x01  # header type 1 (bridge)
    c[0x34] = 0x40
    c[0x40:0x44] = (0x10 | 0x0042 << 16).to_bytes(4, "little")  # PCI Express capability, v2, next 0
    c[0x100:0x104] = (0x0001 | 0x2 << 16 | 0x148 << 20).to_bytes(4, "little")  # AER, next: ACS at 0x148
    c[0x148:0x14C] = (0x000D | 0x1 << 16).to_bytes(4, "little")  # ACS, v1, end of list
    c[0x14C:0x14E] = (0x005F).to_bytes(2, "little")  # capabilities: SV TB RR CR UF EC
    c[0x14E:0x150] = acs_control.to_bytes(2, "little")
    return bytes(c if root else c[:64])


def _link_files(d: Path, current: tuple[float, int], maximum: tuple[float, int] = GEN5) -> None:
    for name, (speed, width) in (("current", current), ("max", maximum)):
        (d / f"{name}_link_speed").write_text(f"{speed:.1f} GT/s PCIe\n")
        (d / f"{name}_link_width").write_text(f"{width}\n")


def _device(root: Path, path: list[str], link: tuple[float, int]) -> Path:
    """sys/devices/pci<dom:bus>/<bridge>/.../<dev>, linked from sys/bus/pci/devices/<dev> as sysfs does."""
    d = root / "sys/devices" / "/".join(path)
    d.mkdir(parents=True, exist_ok=True)
    _link_files(d, link)
    bus_link = root / "sys/bus/pci/devices" / path[-1]
    bus_link.parent.mkdir(parents=True, exist_ok=True)
    if not bus_link.is_symlink():
        os.symlink(os.path.relpath(d, bus_link.parent), bus_link)
    return d


def write_pci_health(root: Path, spec: HostSpec, g: int, bus: int) -> None:
    """GPU g at 0000:<bus>:00.0 behind root port <bus-3>:01.1, switch upstream port <bus-2>:00.0 and
    downstream ports <bus-1>:00.0 (to the GPU) and <bus-1>:01.0 (to NIC g at <bus+1>:00.0)."""
    r = bus - 3
    chain = [f"pci0000:{r:02x}", f"0000:{r:02x}:01.1", f"0000:{r + 1:02x}:00.0"]
    ports = {f"0000:{r + 2:02x}:00.0": spec.acs.get(g, 0), f"0000:{r + 2:02x}:01.0": 0}
    for i, bridge in enumerate(chain[1:] + list(ports)):
        path = chain[:i + 2] if i < 2 else chain + [bridge]
        d = _device(root, path, GEN5)
        (d / "config").write_bytes(bridge_config(ports.get(bridge, 0), spec.config_root))
    gpu = _device(root, chain + [f"0000:{r + 2:02x}:00.0", f"0000:{bus:02x}:00.0"], spec.links.get(g, GEN5))
    if spec.ras_sysfs:
        ras = gpu / "ras"
        ras.mkdir(exist_ok=True)
        counts = spec.ras.get(g, {})
        for block in sorted(set(RAS_BLOCKS) | set(counts)):
            ue, ce = counts.get(block, (0, 0))
            (ras / f"{block}_err_count").write_text(f"ue: {ue}\nce: {ce}\n")
        (ras / "features").write_text("feature mask: 0x3fbf\n")
        pages = "".join(f"0x{0x1000 + i:08x} : 0x00001000 : {flag}\n" for i, flag in enumerate(spec.bad_pages.get(g, "")))
        (ras / "gpu_vram_bad_pages").write_text(pages)
    hw = gpu / "hwmon" / f"hwmon{g + 2}"
    hw.mkdir(parents=True, exist_ok=True)
    for name, watts in (("power1_cap", spec.power_caps.get(g, DEFAULT_CAP_W)), ("power1_cap_max", DEFAULT_CAP_W),
                        ("power1_cap_default", DEFAULT_CAP_W)):
        (hw / name).write_text(f"{watts * 1_000_000}\n")
    if g < spec.rdma_nics:
        nic = _device(root, chain + [f"0000:{r + 2:02x}:01.0", f"0000:{bus + 1:02x}:00.0"], spec.nic_links.get(g, GEN5))
        ib = root / f"sys/class/infiniband/mlx5_{g}"
        ib.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(nic, ib), ib / "device")


def write_kfd_procs(root: Path, spec: HostSpec, first_nodes: dict[int, int]) -> None:
    """sys/class/kfd/kfd/proc/<pid>/vram_<gpu_id>: the doctor's own process (no VRAM) and spec.kfd_procs."""
    procs = {spec.self_pid: {}, **spec.kfd_procs}
    for node in first_nodes.values():  # (a real node of each partition has one; these are the ones named below)
        (root / f"sys/class/kfd/kfd/topology/nodes/{node}/gpu_id").write_text(f"{gpu_id(node)}\n")
    for pid, held in procs.items():
        d = root / f"sys/class/kfd/kfd/proc/{pid}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "pasid").write_text(f"{32768 + pid % 1000}\n")
        for g, node in first_nodes.items():
            (d / f"vram_{gpu_id(node)}").write_text(f"{held.get(g, 0)}\n")
        if pid != spec.self_pid:
            comm = root / f"proc/{pid}/comm"
            comm.parent.mkdir(parents=True, exist_ok=True)
            comm.write_text("python3\n")
