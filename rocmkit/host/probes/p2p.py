"""`probe.p2p`: a device-to-device copy over every ordered GPU pair, so one slow xGMI/NVLink link shows by
name instead of hiding inside an all-reduce mean.

Each pair copies a P2P_BYTES buffer from GPU a to GPU b (`dst.copy_(src)`: peer-to-peer where the driver
allows it, through host memory where not), timed with events on a's stream like the other probes, stopped
once steady, within its share of the budget. GB/s counts bytes moved once (one direction).

A pair is judged against its link budget from the arch table: "mesh" (AMD xGMI) gives one link per peer, so
a pair's peak is link_gbps; "switch" (NVSwitch) gives every pair all links, link_count x link_gbps; times
the arch's expected fraction `p2p`. Pass/warn/fail lines are verdict.py's (85 % / 60 % of expected).

    measure_p2p(devices, nbytes=..., budget_s=...) -> plain dict (figures document's "p2p")
    judge_p2p(doc, gpus) -> Finding               pure: tested on recorded documents
"""

from __future__ import annotations

import itertools
import time
from typing import Any

from ... import archs
from ..model import Finding, Status
from .measure import GB, ProbeError, _first_line, _measure
from .verdict import AREA, PASS_AT, WARN_AT, fmt, link_budget, verdict

P2P_BYTES = 256 << 20
PAIR_BUDGET_S = 0.4  # per ordered pair; 8 GPUs (56 pairs) are capped by TOTAL_BUDGET_S
TOTAL_BUDGET_S = 16.0
MIN_PAIR_S = 0.15

FIX = ("a slow pair is a slow or missing GPU-to-GPU link: check the topology (`amd-smi topology`, `rocm-smi "
       "--showtopo`; NVIDIA: `nvidia-smi topo -m`, `nvidia-smi nvlink -s`), that peer access is allowed (ACS "
       "off on the bridges above the GPUs, IOMMU in passthrough: `sudo lspci -vvv | grep ACSCtl`), and that no "
       "other process loads the link; then run TransferBench `p2p` (ROCm/cvs runs it with its thresholds) or "
       "nvbandwidth, and have the node's xGMI/NVLink cabling or baseboard checked if one pair stays slow")
REFERENCE = ("https://rocm.blogs.amd.com/software-tools-optimization/mi300x-rccl-xgmi/README.html (usable xGMI "
             "bandwidth per link); https://github.com/ROCm/cvs (TransferBench P2P thresholds); "
             "https://github.com/ROCm/TransferBench")


def _index(device: str) -> int:
    return int(device.split(":")[1])


def measure_p2p(devices: list[str], *, nbytes: int = P2P_BYTES, budget_s: float | None = None,
                say=None) -> dict[str, Any]:
    """Copy bandwidth for every ordered pair of `devices` ("cuda:N"); needs at least two GPUs."""
    import torch

    started = time.perf_counter()
    if len(devices) < 2 or any(not d.startswith("cuda:") for d in devices):
        return {"available": False, "reason": f"{len(devices)} GPU device(s): no pair to copy between",
                "pairs": []}
    pairs = list(itertools.permutations(devices, 2))
    per = budget_s if budget_s is not None else max(MIN_PAIR_S, min(PAIR_BUDGET_S, TOTAL_BUDGET_S / len(pairs)))
    bufs: dict[str, tuple[Any, Any]] = {}
    doc: dict[str, Any] = {"available": True, "bytes": nbytes, "budget_s_per_pair": round(per, 3), "pairs": []}
    try:
        for d in devices:
            src = torch.empty(nbytes // 4, dtype=torch.int32, device=d).random_()
            bufs[d] = (src, torch.empty_like(src))
        for a, b in pairs:
            ia, ib = _index(a), _index(b)
            row: dict[str, Any] = {"src": ia, "dst": ib, "peer_access": bool(torch.cuda.can_device_access_peer(ia, ib))}
            if say:
                say.stage(f"P2P copy GPU {ia} → GPU {ib}", f"up to {per:.2f} s")
            src, dst = bufs[a][0], bufs[b][1]
            try:
                with torch.cuda.device(ia):  # events on a's stream, where torch runs a cross-device copy
                    fig = _measure(torch.device(a), lambda: dst.copy_(src), float(nbytes), "GB/s", GB,
                                   {"bytes": nbytes}, budget_s=per, warmup_s=0.05, stop_early=True,
                                   started=time.perf_counter())
                row["figure"] = fig.to_json()
                if say:
                    say.note(f"P2P copy GPU {ia} → GPU {ib}: {fig.value:.1f} GB/s in {fig.seconds:.2f} s")
            except ProbeError as exc:
                row["error"] = str(exc)
            doc["pairs"].append(row)
    except RuntimeError as exc:  # the buffers could not be allocated
        doc["error"] = _first_line(exc)
    finally:
        bufs.clear()
        for d in devices:
            with torch.cuda.device(_index(d)):
                torch.cuda.empty_cache()
    doc["seconds"] = round(time.perf_counter() - started, 2)
    return doc


# --- judging: pure ----------------------------------------------------------------------------------------------

def pair_peak(product: archs.Product) -> float | None:
    """GB/s one direction between two GPUs: one xGMI link in a mesh, every NVLink through a switch."""
    if not (product.link_gbps and product.link_count and product.link_topology):
        return None
    return product.link_gbps * (product.link_count if product.link_topology == "switch" else 1)


def _pair(r: dict[str, Any]) -> str:
    return f"GPU {r['src']}→{r['dst']}"


def judge_p2p(doc: dict[str, Any] | None, gpus: list[dict[str, Any]], context: dict[str, Any] | None = None) -> Finding:
    fid, label = "probe.p2p", "P2P copy"
    if not doc or not doc.get("available", True):
        n = len(gpus)
        why = (doc or {}).get("reason") or (f"{n} GPU{'s' if n != 1 else ''} visible, no pair to copy between"
                                            if n < 2 else "not measured")
        return Finding(fid, AREA, Status.SKIP, f"{label}: {why}", {"reason": why})
    evidence: dict[str, Any] = {"bytes": doc.get("bytes"), "pass_at_fraction_of_expected": PASS_AT,
                                "fail_below_fraction_of_expected": WARN_AT, **(context or {})}
    if doc.get("error"):
        evidence["error"] = doc["error"]
        return Finding(fid, AREA, Status.FAIL, f"{label} could not run: {doc['error']}", evidence, FIX, REFERENCE)
    rows = [dict(r) for r in doc.get("pairs") or []]
    evidence["pairs"] = rows
    failed = [r for r in rows if r.get("error")]
    measured = [r for r in rows if r.get("figure")]
    for r in measured:
        r["value"] = r["figure"]["value"]
    by_index = {g.get("index"): g for g in gpus}
    pair_gpus = [by_index.get(i, {}) for r in rows for i in (r["src"], r["dst"])]
    product, peak, fraction, reason = link_budget(pair_gpus or gpus, "p2p", pair_peak)
    if not measured:
        reason = "no pair measured"
    if failed:
        r = failed[0]
        return Finding(fid, AREA, Status.FAIL, f"{label} {_pair(r)} failed: {r['error']}", evidence, FIX, REFERENCE)
    span = _span([r["value"] for r in measured]) if measured else ""
    if reason:
        evidence["reason"] = reason
        head = f"{label} on {len(measured)} pairs {span} GB/s, not judged" if measured else label
        return Finding(fid, AREA, Status.SKIP, f"{head}: {reason}", evidence, None, REFERENCE)
    expected = peak * fraction
    for r in rows:
        r["status"] = verdict(r["value"], expected).value
        r["of_expected"] = round(r["value"] / expected, 3)
    evidence.update(product=product.name, topology=product.link_topology, peak=round(peak, 2), fraction=fraction,
                    expected=round(expected, 2), pass_at=round(expected * PASS_AT, 2),
                    fail_below=round(expected * WARN_AT, 2))
    rows.sort(key=lambda r: r["value"])
    status = min((Status(r["status"]) for r in rows), key=lambda s: {Status.FAIL: 0, Status.WARN: 1}.get(s, 2))
    where = f"{product.name}, {'NVSwitch' if product.link_topology == 'switch' else 'one xGMI link per pair'}"
    if status is Status.PASS:
        title = f"{label} on {len(rows)} GPU pairs: {span} GB/s, healthy ≥ {fmt(expected * PASS_AT)} ({where})"
    else:
        bad = [r for r in rows if r["status"] != Status.PASS.value]
        good = [r["value"] for r in rows if r["status"] == Status.PASS.value]
        links = {frozenset((r["src"], r["dst"])) for r in bad}
        names = ", ".join(f"{_pair(r)} {fmt(r['value'])} GB/s" for r in bad[:4]) + (
            f" and {len(bad) - 4} more" if len(bad) > 4 else "")
        title = f"{label}: {names}, below the healthy {fmt(expected * PASS_AT)} ({where})"
        if good:
            title += f"; the other {len(good)} pair{'s' if len(good) > 1 else ''} {_span(good)} GB/s"
            title += ": one slow link" if len(links) == 1 else f": {len(links)} slow links"
        elif len(rows) > 2:
            title += ": every pair slow"
        if any(not r.get("peer_access", True) for r in bad):
            title += " (no peer access: the copy goes through host memory)"
    return Finding(fid, AREA, status, title, evidence, FIX if status is not Status.PASS else None, REFERENCE)


def _span(values: list[float]) -> str:
    lo, hi = fmt(min(values)), fmt(max(values))
    return lo if lo == hi else f"{lo}–{hi}"
