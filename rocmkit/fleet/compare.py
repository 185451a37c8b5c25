"""Nodes compared with each other. Pure: the doctor documents of the nodes in, differences and figures out.

What must be the same on every node of a job is read from each document's fingerprint (host/baseline.py):
kernel, amdgpu driver, ROCm, the GPUs (count, product, partition modes, firmware), the Python stack's versions,
the environment variables ROCm, RCCL, Ray, vLLM and PyTorch read, and the RDMA ports. Each difference names the
nodes on each side; the nodes outside the largest group are the odd ones (none when no group is the largest:
two nodes that disagree cannot say which one is wrong). Probe figures are compared with the fleet's own median
of the same figure (every GPU of every node), so a GPU far below its peers is flagged even when it passes the
absolute floor of its product.
"""

from __future__ import annotations

import json
import statistics
from typing import Any, NamedTuple

from .. import buildid
from ..host.baseline import figures as doc_figures
from ..host.model import Status

TOLERANCE = 0.05  # a figure this far below the fleet's median warns; twice as far fails
MIN_VALUES = 3  # fewer values of a figure than this have no meaningful median
# (what, why it matters, fix) for a fingerprint part; a difference in a FAIL part breaks a job, a WARN one may.
# Set by Slurm for each node's own GPUs (gres/gpu), so they may rightly differ between nodes of one job
PER_NODE_VARS = frozenset({"ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL"})
SOFTWARE_FAIL = ("torch", "torch (HIP)", "ray", "vllm", "verl", "sglang", "transformers", "triton",
                 "pytorch-triton-rocm", "amd-aiter")
FIX = {
    "kernel": "boot the fleet's kernel on these nodes (or drain them: scontrol update nodename=... state=drain)",
    "amdgpu": "install the fleet's amdgpu driver (DKMS) on these nodes",
    "rocm": "install the fleet's ROCm release, or run the job in one image (rocmkit doctor --fleet --image IMAGE)",
    "gpus": "set the fleet's partition modes (amd-smi set --compute-partition / --memory-partition) or drain the node",
    "firmware": "flash the fleet's GPU firmware bundle (PLDM) on these nodes",
    "packages": "run every node from one image, or install the same versions (pip install NAME==VERSION)",
    "env": "set the variable the same way on every node (the job script's environment, not a node's profile)",
    "rdma": "bring up the same RDMA ports on every node (ibstat / rdma link), or give NCCL_IB_HCA the common ones",
}


PLURAL = frozenset({"RDMA ports"})  # what takes "differ", not "differs"


class Difference(NamedTuple):
    """One fingerprint part that is not the same on every node that reported it."""

    id: str  # fleet.differs.kernel, fleet.differs.env.NCCL_IB_HCA, fleet.differs.packages.torch
    what: str  # "kernel", "env NCCL_IB_HCA", "torch"
    status: Status  # FAIL or WARN
    groups: list[tuple[str, list[str]]]  # (value as shown, nodes), largest group first
    odd: list[str]  # the nodes outside the largest group; [] when no group is the largest
    fix: str
    notes: tuple[str, ...] = ()  # why a node lacks the value: "n2 did not report torch: its rocmkit is older"

    def title(self) -> str:
        sides = "; ".join(f"{value} on {_nodes(nodes)}" for value, nodes in self.groups)
        return f"{self.what} {'differ' if self.what in PLURAL else 'differs'}: {sides}" + \
            "".join(f" — {n}" for n in self.notes)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "what": self.what, "status": self.status, "title": self.title(),
                "values": [{"value": v, "nodes": n} for v, n in self.groups], "odd_nodes": self.odd, "fix": self.fix}


def _nodes(nodes: list[str]) -> str:
    return ", ".join(nodes) if len(nodes) <= 6 else f"{', '.join(nodes[:5])} and {len(nodes) - 5} more"


def _show(value: Any) -> str:
    if value is None:
        return "(none)"
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def _gpu_setup(gpus: dict) -> str:
    """"8× MI300X SPX NPS1": what a node's GPUs are, whatever their PCI addresses."""
    kinds: dict[str, int] = {}
    for g in gpus.values():
        k = " ".join(str(g.get(f)) for f in ("product", "mode", "memory_partition") if g.get(f) is not None)
        kinds[k] = kinds.get(k, 0) + 1
    return ", ".join(f"{n}× {k}" for k, n in sorted(kinds.items())) or "no GPU"


def _firmware(gpus: dict) -> str:
    fws = sorted({f"MEC {g.get('fw_mec')} SDMA {g.get('fw_sdma')}" for g in gpus.values()})
    return " / ".join(fws) or "(none)"


def _rdma(ports: dict) -> str:
    return ", ".join(f"{name} {state}" for name, state in sorted(ports.items())) or "no RDMA port"


def parts(doc: dict) -> dict[str, tuple[str, str, Status, str]]:
    """A node's fingerprint as comparable parts: id → (what, value as shown, status if it differs, fix area).
    A part the document lacks (an older rocmkit, a tree captured without its process) is left out here;
    differences() then says the node did not report it."""
    fp = doc.get("fingerprint")
    if not isinstance(fp, dict):
        return {}
    out = {
        "kernel": ("kernel", _show(fp.get("kernel")), Status.WARN, "kernel"),
        "amdgpu": ("amdgpu driver", _show(fp.get("amdgpu")), Status.WARN, "amdgpu"),
        "rocm": ("ROCm", _show(fp.get("rocm")), Status.FAIL, "rocm"),
    }
    gpus = fp.get("gpus") if isinstance(fp.get("gpus"), dict) else {}
    out["gpus"] = ("GPU setup", _gpu_setup(gpus), Status.FAIL, "gpus")
    out["firmware"] = ("GPU firmware", _firmware(gpus), Status.WARN, "firmware")
    for name, version in (fp.get("packages") or {}).items() if isinstance(fp.get("packages"), dict) else ():
        status = Status.FAIL if name in SOFTWARE_FAIL else Status.WARN
        out[f"packages.{name}"] = (name, _show(version), status, "packages")
    if isinstance(fp.get("rdma"), dict):
        out["rdma"] = ("RDMA ports", _rdma(fp["rdma"]), Status.WARN, "rdma")
    return out


NOT_REPORTED, NOT_INSTALLED = "(not reported)", "(not installed)"


def _section(pid: str) -> str:
    """Which part of a document a part id comes from: a node that lacks the section did not report the part; one
    that has it and lacks the part reports its absence (a package not installed)."""
    return "packages" if pid.startswith("packages.") else "rdma" if pid == "rdma" else "fingerprint"


def _has(doc: dict, section: str) -> bool:
    fp = doc.get("fingerprint")
    return isinstance(fp, dict) and (section == "fingerprint" or isinstance(fp.get(section), dict))


def differences(docs: dict[str, dict], own: dict | None = None) -> list[Difference]:
    """Every part that differs between the nodes, the rocmkit each runs first; fail before warn, then by id. A
    part one node reports and another does not is a difference too, the silent node the odd one (nothing says it
    matches), with why it is silent; `own` is the identity of the rocmkit running the fleet (fix lines)."""
    tool = _tool_difference(docs, own)
    node_parts = {node: parts(doc) for node, doc in docs.items()}
    ids = sorted({i for p in node_parts.values() for i in p})
    out = [tool] if tool else []
    for pid in ids:
        seen = {}
        for node, p in node_parts.items():
            if pid in p:
                seen[node] = p[pid]
            else:
                what, _, status, area = next(q[pid] for q in node_parts.values() if pid in q)
                value = NOT_INSTALLED if _has(docs[node], _section(pid)) else NOT_REPORTED
                seen[node] = (what, value, status, area)
        out += _difference(f"fleet.differs.{pid}", seen, tool)
    out += _env_differences(docs, tool)
    return sorted(out, key=lambda d: (d.status != Status.FAIL, d.id != "fleet.differs.rocmkit", d.id))


def _env_differences(docs: dict[str, dict], tool: Difference | None = None) -> list[Difference]:
    """The variables: unset on a node where others set it is a difference too, and so is a node that reported no
    environment at all (an older rocmkit). The visible-devices variables Slurm sets per node take no part."""
    envs = {n: {k: v for k, v in d["fingerprint"]["env"].items() if k not in PER_NODE_VARS} for n, d in docs.items()
            if _has(d, "env")}
    out = []
    for var in sorted({v for e in envs.values() for v in e}):
        # ranks with other RCCL settings can hang
        status = Status.FAIL if var.startswith(("NCCL_", "RCCL_")) else Status.WARN
        seen = {n: (f"env {var}", NOT_REPORTED if n not in envs else _show(envs[n][var]) if var in envs[n]
                    else "(unset)", status, "env") for n in docs}
        out += _difference(f"fleet.differs.env.{var}", seen, tool)
    return out


def _difference(did: str, seen: dict[str, tuple[str, str, Status, str]],
                tool: Difference | None = None) -> list[Difference]:
    values: dict[str, list[str]] = {}
    for node, (_, value, _, _) in seen.items():
        values.setdefault(value, []).append(node)
    if len(values) < 2:
        return []
    # the values said, largest first, then the nodes that said nothing (never "the largest group")
    groups = sorted(((v, sorted(n)) for v, n in values.items()),
                    key=lambda g: (g[0] == NOT_REPORTED, -len(g[1]), g[0]))
    what, _, status, area = next(iter(seen.values()))
    silent = values.get(NOT_REPORTED, [])
    said = [g for g in groups if g[0] != NOT_REPORTED]
    if silent and said and (len(said) == 1 or len(said[0][1]) > len(said[1][1])):
        # the nodes that said nothing are odd whatever their number, and the outvoted among those that said
        odd = sorted(silent + [n for _, ns in said[1:] for n in ns])
    else:
        odd = [] if len(groups[0][1]) == len(groups[1][1]) else sorted(n for _, ns in groups[1:] for n in ns)
    reporters = [n for _, ns in said for n in ns]
    notes = (f"{_nodes(sorted(silent))} did not report {what}: {_why_silent(silent, reporters, tool)}",) \
        if silent else ()
    fix = FIX[area]
    if silent and tool is not None and set(silent) & set(tool.odd or [n for _, ns in tool.groups for n in ns]):
        fix = tool.fix  # an older rocmkit reports less: upgrading it is the fix
    return [Difference(did, what, status, groups, odd, fix, notes)]


def _why_silent(silent: list[str], said: list[str], tool: Difference | None) -> str:
    """Why a node did not report a value others did: its rocmkit (older, another build), else its doctor."""
    mine = next((value for value, ns in tool.groups if silent[0] in ns), None) if tool else None
    theirs = {value for value, ns in tool.groups for n in said if n in ns} if tool else set()
    if mine is None or mine in theirs:  # the same rocmkit as nodes that did report it: its doctor read less there
        return "its doctor did not read it (a captured tree without its process, or the doctor run without " \
               "--multi-node)"
    if mine == buildid.describe(None):
        return "its rocmkit is older (it reports no build identity)"
    return f"its rocmkit is another build ({mine})"


def _tool_difference(docs: dict[str, dict], own: dict | None) -> Difference | None:
    """The rocmkit each node runs (version and build): nodes that differ in it compare different facts, so it
    fails like a value that must match. A node without a build identity runs an older rocmkit than any node with
    one, so it is the odd one whatever the count."""
    idents = {n: d.get("rocmkit") if isinstance(d.get("rocmkit"), dict) else None for n, d in docs.items()}
    by: dict[str, list[str]] = {}
    for n, ident in idents.items():
        by.setdefault(buildid.describe(ident), []).append(n)
    if len(by) < 2:
        return None
    groups = sorted(((v, sorted(ns)) for v, ns in by.items()), key=lambda g: (-len(g[1]), g[0]))
    old = by.get(buildid.describe(None), [])
    newer = [g for g in groups if g[0] != buildid.describe(None)]
    if old and len(newer) == 1:
        odd = sorted(old)
    else:
        odd = [] if len(groups[0][1]) == len(groups[1][1]) else sorted(n for _, ns in groups[1:] for n in ns)
    # the build to install: the majority's; on a tie, the one running the fleet if a node runs it, else the first
    candidates = [idents[ns[0]] for v, ns in newer if len(ns) == len(newer[0][1])] if newer else []
    target = next((c for c in candidates if own and c.get("build") == own.get("build")),
                  candidates[0] if candidates else own)
    runs = "; ".join(f"{_nodes(ns)} run{'s' if len(ns) == 1 else ''} {v}" for v, ns in groups)
    where = _nodes(odd) if odd else "the nodes that run another"
    line = buildid.install_line(target)
    if isinstance(target, dict) and not target.get("source") and any(
            isinstance(idents[n], dict) and idents[n].get("version") == target.get("version") for n in odd):
        # one version, two builds, no recorded source: the version cannot tell pip which build to install
        line = f"pip install --force-reinstall from the source {_nodes(by[buildid.describe(target)])} installed " \
               "from (`pip inspect` there says which)"
    fix = (f"install one rocmkit on every node ({runs}); on {where}: {line} (to get {buildid.describe(target)}), "
           "or run every node from one image (--image)")
    return Difference("fleet.differs.rocmkit", "rocmkit", Status.FAIL, groups, odd, fix)


def odd_among(d: Difference, voters: set[str]) -> list[str]:
    """The odd nodes of a difference without a majority over all nodes, when only `voters` (the nodes that pass on
    their own) vote: those outside the voters' largest group; [] when the voters tie too (or none voted)."""
    votes = sorted((sum(n in voters for n in ns) for _, ns in d.groups), reverse=True)
    if not votes or votes[0] == 0 or (len(votes) > 1 and votes[0] == votes[1]):
        return []
    top = max(d.groups, key=lambda g: sum(n in voters for n in g[1]))[0]
    return sorted(n for value, ns in d.groups if value != top for n in ns)


class FigureRow(NamedTuple):
    """One figure of one node (a GPU's, or the node's own like the all-reduce) against the fleet's median."""

    figure: str  # probe.hbm
    key: str  # probe.hbm GPU 3
    node: str
    value: float
    unit: str
    median: float
    ratio: float
    status: Status

    def to_json(self) -> dict[str, Any]:
        return self._asdict()


def kind(key: str) -> str:
    """"probe.hbm GPU 3" → "probe.hbm": the figure a key measures, whichever GPU."""
    return key.split(" GPU ")[0]


def figure_rows(docs: dict[str, dict], tolerance: float = TOLERANCE) -> list[FigureRow]:
    """Every probe figure of every node with the median of its kind over the fleet (all GPUs of all nodes);
    a kind with fewer than MIN_VALUES values is left out."""
    per_node = {node: doc_figures(doc.get("findings") or []) for node, doc in docs.items()}
    by_kind: dict[str, list[float]] = {}
    for figs in per_node.values():
        for key, f in figs.items():
            by_kind.setdefault(kind(key), []).append(float(f["value"]))
    rows = []
    for node, figs in per_node.items():
        for key, f in sorted(figs.items()):
            values = by_kind[kind(key)]
            median = statistics.median(values)
            if len(values) < MIN_VALUES or median <= 0:
                continue
            ratio = float(f["value"]) / median
            status = (Status.FAIL if ratio < 1 - 2 * tolerance else Status.WARN if ratio < 1 - tolerance
                      else Status.PASS)
            rows.append(FigureRow(kind(key), key, node, float(f["value"]), f.get("unit") or "", median,
                                  round(ratio, 4), status))
    return sorted(rows, key=lambda r: (r.figure, r.node, r.key))


def figure_findings(rows: list[FigureRow], tolerance: float) -> list[dict[str, Any]]:
    """One finding per node and figure below the fleet's median (its lowest GPU in the title)."""
    worst: dict[tuple[str, str], list[FigureRow]] = {}
    for r in rows:
        if r.status != Status.PASS:
            worst.setdefault((r.node, r.figure), []).append(r)
    out = []
    for (node, figure), low in sorted(worst.items()):
        low.sort(key=lambda r: r.ratio)
        r = low[0]
        status = Status.FAIL if any(x.status == Status.FAIL for x in low) else Status.WARN
        out.append({"id": f"fleet.median.{figure.removeprefix('probe.')}", "status": status, "nodes": [node],
                    "title": f"{r.key} on {node}: {r.value:.4g} {r.unit}, {r.ratio:.0%} of the fleet median "
                             f"{r.median:.4g}" + (f" ({len(low)} figures low)" if len(low) > 1 else ""),
                    "fix": "compare this node's clocks, power cap, PCIe/xGMI links and ECC counters with a good "
                           "node's (rocmkit doctor --compare), then RVS or rccl-tests; exclude it meanwhile",
                    "evidence": {"tolerance": tolerance, "figures": [x.to_json() for x in low]}})
    return out
