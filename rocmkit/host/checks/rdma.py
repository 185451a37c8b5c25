"""The multi-node RDMA preflight (`rocmkit doctor --multi-node`): an ACTIVE port, a RoCE v2 GID with an IPv4
address for RCCL, and the devices to name in NCCL_IB_HCA. Without them RCCL falls back to TCP sockets or
hangs at its first inter-node collective (verl-project/verl#1516)."""

from __future__ import annotations

from ..facts import Facts
from ..model import Status
from . import Context, documents, finding

NCCL_ENV = "https://docs.nvidia.com/deeplearning/nccl/user-guide/docs/env.html (RCCL reads the same variables)"
SYSFS_IB = "Documentation/ABI/stable/sysfs-class-infiniband"
VERL_1516 = "verl-project/verl#1516"


def hca_selection(value: str, names: list[tuple[str, int]]) -> list[tuple[str, int]]:
    """The (device, port)s NCCL_IB_HCA selects: comma-separated name[:port], a prefix unless the list starts
    with '=', everything but the listed ones when it starts with '^'."""
    value = value.strip()
    exclude = value.startswith("^")
    value = value.lstrip("^")
    exact = value.startswith("=")
    value = value.lstrip("=")
    wanted = []
    for item in filter(None, (v.strip() for v in value.split(","))):
        name, _, port = item.partition(":")
        wanted.append((name, int(port) if port.isdigit() else None))

    def hit(dev: str, port: int) -> bool:
        return any((dev == n if exact else dev.startswith(n)) and (p is None or p == port) for n, p in wanted)

    return [(d, p) for d, p in names if hit(d, p) != exclude]


@documents("rdma", "rdma.port", "rdma.hca", "rdma.gid",
           what="with `--multi-node`: RDMA ports in /sys/class/infiniband (fail when none is ACTIVE, warn for "
                "ports down), the devices for NCCL_IB_HCA (warn when the set variable selects no active port), "
                "and on RoCE a `RoCE v2` GID with an IPv4-mapped address (warn when none; the index for "
                "NCCL_IB_GID_INDEX, warn when the set variable differs); with NCCL_IB_DISABLE set, pass when "
                "no port is ACTIVE (a TCP cluster) and warn when one is (RDMA left unused)")
def check_rdma(f: Facts, ctx: Context):
    rdma = getattr(f, "rdma", None)
    if not getattr(ctx, "multi_node", False) or rdma is None:
        yield finding("rdma", "rdma", Status.SKIP, "RDMA preflight not run (give --multi-node for a multi-node job)")
        return
    ports = rdma.ports
    active = [p for p in ports if p.active]
    ib_disable = (f.env.get("NCCL_IB_DISABLE") or "").strip()
    if ib_disable not in ("", "0"):
        # A TCP cluster says so to RCCL with NCCL_IB_DISABLE; the Slurm preflight passes the job's environment,
        # so it judges by that instead of failing every node for the RDMA it was told not to use.
        if active:
            names = [p.name for p in active]
            yield finding("rdma.port", "rdma", Status.WARN,
                          f"NCCL_IB_DISABLE={ib_disable}, but {len(active)} RDMA port(s) are ACTIVE "
                          f"({', '.join(names)}): RCCL will send inter-node traffic over TCP sockets, far slower",
                          fix="unset NCCL_IB_DISABLE to let RCCL use RDMA", ref=NCCL_ENV, active=names)
        else:
            yield finding("rdma.port", "rdma", Status.PASS,
                          f"NCCL_IB_DISABLE={ib_disable}: RCCL uses TCP sockets between nodes, no RDMA needed",
                          ref=NCCL_ENV)
        return
    if not ports:
        where = "/sys/class/infiniband is empty" if rdma.found else "no /sys/class/infiniband"
        yield finding("rdma.port", "rdma", Status.FAIL,
                      f"no RDMA devices ({where}): multi-node RCCL would fall back to TCP sockets",
                      fix="load the NIC's RDMA driver (mlx5_ib, bnxt_re, ionic_rdma) and install rdma-core; in a "
                          "container pass --device=/dev/infiniband and --network=host; if this cluster is meant "
                          "to use TCP, set NCCL_IB_DISABLE=1 (the preflight then passes this check)", ref=SYSFS_IB)
        return
    down = {p.name: f"{p.state or 'state unknown'}, {p.phys_state or 'phys_state unknown'}" for p in ports
            if not p.active}
    layers = sorted({p.link_layer or "unknown" for p in active})
    if not active:
        yield finding("rdma.port", "rdma", Status.FAIL,
                      f"no RDMA port is ACTIVE ({len(ports)} port(s), all down): RCCL cannot use RDMA",
                      fix="check cables and the switch ports (`ibstat`, `ibv_devinfo`); on RoCE the net device must "
                          "be up (`ip link set DEV up`) with its IP address; a port in state INIT (2) waits for "
                          "the InfiniBand subnet manager (opensm)", ref=SYSFS_IB, down=down)
        return
    if down:
        yield finding("rdma.port", "rdma", Status.WARN,
                      f"{len(active)} of {len(ports)} RDMA ports ACTIVE; down: {', '.join(down)}",
                      fix="bring the down ports up (cable, switch port, `ip link set DEV up`), or leave their "
                          "devices out of NCCL_IB_HCA so that no rank is bound to them", ref=SYSFS_IB,
                      down=down, active=[p.name for p in active], link_layers=layers)
    else:
        yield finding("rdma.port", "rdma", Status.PASS,
                      f"{len(active)} RDMA port(s) ACTIVE ({', '.join(layers)}), "
                      f"{', '.join(sorted({p.rate for p in active if p.rate}))}",
                      active=[p.name for p in active], link_layers=layers)
    yield from _hca(f, active, ports)
    yield from _gid(f, active)


def _hca(f: Facts, active, ports):
    devices = sorted({p.device for p in active})
    suggested = ",".join(devices)
    current = f.env.get("NCCL_IB_HCA")
    if current:
        chosen = hca_selection(current, [(p.device, p.port) for p in ports])
        chosen_active = [f"{d}:{n}" for d, n in chosen if any(p.device == d and p.port == n for p in active)]
        if not chosen_active:
            yield finding("rdma.hca", "rdma", Status.WARN,
                          f"NCCL_IB_HCA={current} selects no ACTIVE port (active: {suggested})",
                          fix=f"export NCCL_IB_HCA={suggested}", ref=NCCL_ENV, nccl_ib_hca=current, devices=devices)
        else:
            yield finding("rdma.hca", "rdma", Status.PASS, f"NCCL_IB_HCA={current} selects {', '.join(chosen_active)}",
                          nccl_ib_hca=current, selected=chosen_active)
    else:
        yield finding("rdma.hca", "rdma", Status.PASS, f"RDMA devices with an ACTIVE port: NCCL_IB_HCA={suggested}",
                      fix=None, devices=devices, nccl_ib_hca=suggested)


def _gid(f: Facts, active):
    roce = [p for p in active if p.roce]
    if not roce:
        yield finding("rdma.gid", "rdma", Status.PASS, "InfiniBand link layer: no GID index to choose")
        return
    index: dict[str, int | None] = {}
    for p in roce:
        v2 = [g for g in p.gids if (g.type or "").strip().lower() == "roce v2" and g.ipv4]
        index[p.name] = v2[0].index if v2 else None
    missing = [name for name, i in index.items() if i is None]
    found = {name: i for name, i in index.items() if i is not None}
    if not found:
        yield finding("rdma.gid", "rdma", Status.WARN,
                      f"no RoCE v2 GID with an IPv4 address on {len(roce)} active RoCE port(s): RCCL cannot route "
                      "between subnets, and with the wrong index it hangs at the first inter-node collective",
                      fix="give each RoCE net device its IPv4 address (the kernel then adds ::ffff:a.b.c.d GIDs); "
                          "check with `show_gids`", ref=VERL_1516, ports=sorted(index))
        return
    indexes = sorted(set(found.values()))
    current = f.env.get("NCCL_IB_GID_INDEX")
    ev = dict(gid_index=found, **({"without_ipv4_v2_gid": missing} if missing else {}))
    if current is not None and (not current.strip().lstrip("-").isdigit() or int(current) not in found.values()):
        yield finding("rdma.gid", "rdma", Status.WARN,
                      f"NCCL_IB_GID_INDEX={current}, but the RoCE v2 IPv4 GID is at index "
                      f"{', '.join(map(str, indexes))}", fix=f"export NCCL_IB_GID_INDEX={indexes[0]}",
                      ref=NCCL_ENV, nccl_ib_gid_index=current, **ev)
    elif missing or len(indexes) > 1:
        why = (f"no RoCE v2 IPv4 GID on {', '.join(missing)}" if missing
               else f"the index differs between ports ({found})")
        yield finding("rdma.gid", "rdma", Status.WARN, f"RoCE v2 GID: {why}",
                      fix="give every RoCE net device its IPv4 address, and leave ports without one out of "
                          "NCCL_IB_HCA (NCCL_IB_GID_INDEX is one index for all ports)", ref=VERL_1516, **ev)
    else:
        yield finding("rdma.gid", "rdma", Status.PASS,
                      f"RoCE v2 GID with an IPv4 address at index {indexes[0]} on {len(roce)} port(s): "
                      f"NCCL_IB_GID_INDEX={indexes[0]}", **ev)


CHECKS = [check_rdma]
