"""KFD topology (`/sys/class/kfd/kfd/topology/nodes/N/properties`): nodes → GPUs → physical devices.

Facts the parsing rests on (kernel amdkfd/kfd_topology.c and real captures): `properties` is one `key value`
per line, decimal, and keys come and go with kernel releases; CPU nodes have `simd_count 0`; in CPX/DPX/QPX
one physical GPU is several nodes that differ only in the PCI function bits of `location_id` (bus<<8 | dev<<3
| fn) and share `unique_id`; render minors are reserved 8 per physical GPU, so GPUs are never counted by
/dev/dri; a node of a GPU not granted to this container fails to read with EPERM.
"""

from __future__ import annotations

from typing import NamedTuple

from ... import archs

# XCCs (accelerator complex dies) per physical GPU, by product (VFs: their base product). A partition mode
# splits them evenly: SPX one partition of all, DPX two, TPX three, QPX four, CPX one per XCC. Sources:
# AMD CDNA 3 white paper (MI300X/MI325X 8 XCDs of 38 CUs, MI300A 6), CDNA 4 white paper (MI350X/MI355X
# 8 XCDs of 32 CUs); MI308X 4 (its real CPX capture: 4 nodes of num_xcc 1 per GPU).
XCC_PER_GPU = {"MI300X": 8, "MI300X HF": 8, "MI325X": 8, "MI300A": 6, "MI308X": 4, "MI308X HF": 4,
               "MI350X": 8, "MI355X": 8}
# What amdgpu writes to current_compute_partition, and partitions per GPU for each (CPX: one per XCC).
MODES = {"SPX": 1, "DPX": 2, "TPX": 3, "QPX": 4, "CPX": None}


class Node(NamedTuple):
    """One KFD topology node (a CPU, a GPU or a GPU partition) and its properties."""

    index: int
    props: dict[str, int]
    error: str | None = None  # why properties could not be read (e.g. "permission denied")

    @property
    def is_gpu(self) -> bool:
        """A readable GPU node (a node not granted to this container is counted apart: its properties are unknown)."""
        return self.props.get("simd_count", 0) > 0 or self.props.get("gfx_target_version", 0) > 0

    @property
    def not_granted(self) -> bool:
        return self.error == "permission denied"


class Device(NamedTuple):
    """One physical GPU and the KFD nodes (partitions) it shows as."""

    key: str
    nodes: tuple[Node, ...]
    # amdgpu's current_compute_partition / current_memory_partition of the PCI device, when sysfs has them
    compute_partition: str | None = None
    memory_partition: str | None = None

    @property
    def props(self) -> dict[str, int]:
        return self.nodes[0].props

    @property
    def partitions(self) -> int:
        """KFD nodes of this GPU visible here (in a container: the partitions granted)."""
        return len(self.nodes)

    @property
    def xcc_total(self) -> int | None:
        p = self.product
        return XCC_PER_GPU.get(p.vf_of or p.name) if p else None

    @property
    def mode_partitions(self) -> int:
        """Partitions the GPU is split into by its mode, whether or not all are visible here (a container
        granted 2 of a CPX MI300X's 8 partitions shows 2 nodes of a GPU split in 8)."""
        mode, total = self.partition_mode, self.xcc_total
        if mode in MODES:
            n = MODES[mode] or total or self.partitions
            return max(n, self.partitions)
        return self.partitions

    @property
    def gfx(self) -> str | None:
        v = self.props.get("gfx_target_version")
        return archs.gfx_name(v) if v else None

    @property
    def device_id(self) -> str | None:
        d = self.props.get("device_id")
        return f"0x{d:04x}" if d is not None else None

    @property
    def product(self) -> archs.Product | None:
        d = self.props.get("device_id")
        return archs.product_for_pci_id(d) if d is not None else None

    @property
    def pci_address(self) -> str | None:
        loc = self.props.get("location_id")
        if loc is None:
            return None
        return f"{self.props.get('domain', 0):04x}:{loc >> 8:02x}:{(loc >> 3) & 0x1f:02x}.0"

    @property
    def render_minors(self) -> tuple[int, ...]:
        return tuple(n.props["drm_render_minor"] for n in self.nodes if "drm_render_minor" in n.props)

    @property
    def partition_mode(self) -> str:
        """amdgpu's current_compute_partition when sysfs has it; else from the XCCs each node holds out of
        the product's (so one granted CPX partition is still CPX); else from the node count."""
        if self.compute_partition in MODES:
            return self.compute_partition
        xcc = {node.props.get("num_xcc") for node in self.nodes}
        per = xcc.pop() if len(xcc) == 1 else None
        total = self.xcc_total
        if per and total and total % per == 0:
            if per == total:
                return "SPX"
            if per == 1:
                return "CPX"
            k = total // per
            return next((m for m, c in MODES.items() if c == k), f"{k} partitions")
        n = len(self.nodes)
        if n == 1:
            return "SPX"
        if per == 1:
            return "CPX"
        return next((m for m, c in MODES.items() if c == n), f"{n} partitions")


def parse_properties(text: str) -> dict[str, int]:
    """`key value` lines → dict; lines that are not `name integer` are skipped (tolerant by design)."""
    out: dict[str, int] = {}
    for line in text.splitlines():
        parts = line.split()
        # ASCII digits only: str.isdigit() also accepts "²", which int() refuses.
        if len(parts) == 2 and parts[1].isascii() and parts[1].isdigit():
            out[parts[0]] = int(parts[1])
    return out


def group_devices(nodes: list[Node]) -> list[Device]:
    """GPU nodes grouped by physical device: unique_id when present (shared by a device's partitions),
    else location_id without its function bits."""
    groups: dict[str, list[Node]] = {}
    for n in nodes:
        if not n.is_gpu:
            continue
        p = n.props
        if p.get("unique_id"):
            key = f"uid:{p['unique_id']}"
        elif "location_id" in p:
            key = f"pci:{p.get('domain', 0)}:{p['location_id'] >> 3}"
        else:
            key = f"node:{n.index}"
        groups.setdefault(key, []).append(n)
    return [Device(key=k, nodes=tuple(v)) for k, v in groups.items()]
