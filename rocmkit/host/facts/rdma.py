"""RDMA devices as sysfs shows them (Documentation/ABI/stable/sysfs-class-infiniband), read for the
`--multi-node` preflight (checks/rdma.py); the tests' tree generator (tests/treegen.py) writes them the same way.

Per port, /sys/class/infiniband/<dev>/ports/<n>/:
  state "4: ACTIVE", phys_state "5: LinkUp", link_layer "InfiniBand" | "Ethernet", rate "400 Gb/sec (4X NDR)",
  gids/<i> "0000:0000:0000:0000:0000:ffff:0a00:0001" (all zeros: an empty entry),
  gid_attrs/types/<i> "IB/RoCE v1" | "RoCE v2", gid_attrs/ndevs/<i> the net device ("ens1f0np0").
Reading types/ndevs of an empty entry fails (EINVAL), and InfiniBand ports need no GID index, so only the
non-empty entries of Ethernet (RoCE) ports are read further.
"""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass, field

IB_CLASS = "sys/class/infiniband"
ZERO_GID = ":".join(["0000"] * 8)


@dataclass(frozen=True)
class Gid:
    index: int
    gid: str
    type: str | None = None  # "RoCE v2", "IB/RoCE v1"
    ndev: str | None = None

    @property
    def ipv4(self) -> str | None:
        """The IPv4 address of an IPv4-mapped GID (::ffff:a.b.c.d), the kind RCCL needs for routable RoCE."""
        try:
            addr = ipaddress.IPv6Address(self.gid)
        except ValueError:
            return None
        return str(addr.ipv4_mapped) if addr.ipv4_mapped else None


@dataclass(frozen=True)
class Port:
    device: str  # mlx5_0, bnxt_re0, ionic_0, rdma0
    port: int
    state: str | None = "4: ACTIVE"
    phys_state: str | None = "5: LinkUp"
    link_layer: str | None = "Ethernet"
    rate: str | None = "400 Gb/sec (4X NDR)"
    gids: tuple[Gid, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.device}:{self.port}"

    @property
    def active(self) -> bool:
        return (self.state or "").split(":")[-1].strip() == "ACTIVE"

    @property
    def roce(self) -> bool:
        return (self.link_layer or "").lower() == "ethernet"


@dataclass
class RdmaFacts:
    found: bool = False  # /sys/class/infiniband exists
    ports: list[Port] = field(default_factory=list)


def _names(reader, rel: str) -> list[str]:
    try:
        return sorted(os.listdir(reader.path(rel)))
    except OSError:
        return []


def _num(name: str) -> int:
    return int(name) if name.isdigit() else -1


def read_rdma(reader) -> RdmaFacts:
    facts = RdmaFacts(found=reader.path(IB_CLASS).is_dir())
    for dev in _names(reader, IB_CLASS):
        for n in sorted((p for p in _names(reader, f"{IB_CLASS}/{dev}/ports") if p.isdigit()), key=int):
            base = f"{IB_CLASS}/{dev}/ports/{n}"
            link = reader.line(f"{base}/link_layer")
            gids = []
            if (link or "").lower() == "ethernet":
                for i in sorted((g for g in _names(reader, f"{base}/gids") if g.isdigit()), key=int):
                    gid = reader.line(f"{base}/gids/{i}")
                    if not gid or gid == ZERO_GID or not re.fullmatch(r"[0-9a-fA-F:]+", gid):
                        continue
                    gids.append(Gid(index=int(i), gid=gid, type=reader.line(f"{base}/gid_attrs/types/{i}"),
                                    ndev=reader.line(f"{base}/gid_attrs/ndevs/{i}")))
            facts.ports.append(Port(device=dev, port=int(n), state=reader.line(f"{base}/state"),
                                    phys_state=reader.line(f"{base}/phys_state"), link_layer=link,
                                    rate=reader.line(f"{base}/rate"), gids=tuple(gids)))
    return facts
