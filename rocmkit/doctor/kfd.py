"""KFD topology (`/sys/class/kfd/kfd/topology/nodes/N/properties`): nodes → GPUs → physical devices.

Facts the parsing rests on (kernel amdkfd/kfd_topology.c and real captures): `properties` is one `key value`
per line, decimal, and keys come and go with kernel releases; CPU nodes have `simd_count 0`; in CPX/DPX/QPX
one physical GPU is several nodes that differ only in the PCI function bits of `location_id` (bus<<8 | dev<<3
| fn) and share `unique_id`; render minors are reserved 8 per physical GPU, so GPUs are never counted by
/dev/dri; a node of a GPU not granted to this container fails to read with EPERM.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import archs


@dataclass(frozen=True)
class Node:
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


@dataclass(frozen=True)
class Device:
    """One physical GPU and the KFD nodes (partitions) it shows as."""

    key: str
    nodes: tuple[Node, ...]

    @property
    def props(self) -> dict[str, int]:
        return self.nodes[0].props

    @property
    def partitions(self) -> int:
        return len(self.nodes)

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
        """SPX when one node; CPX when every node holds one XCC; else DPX/QPX by count."""
        n = len(self.nodes)
        if n == 1:
            return "SPX"
        if all(node.props.get("num_xcc") == 1 for node in self.nodes):
            return "CPX"
        return {2: "DPX", 4: "QPX"}.get(n, f"{n} partitions")


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
