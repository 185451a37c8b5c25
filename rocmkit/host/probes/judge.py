"""Judge level-2 figures against the arch table: pure, so it is tested on recorded measurements.

Input is the plain figures document that run.run_probes measures (run.measure); output is
one Finding per measure, worst GPU first. A figure is compared with what a healthy GPU of its product
delivers: datasheet peak x the arch table's expected fraction. It passes at >= PASS_AT of that, warns from
WARN_AT, fails below (verdict.py, shared with the other probes' judges). No product, no peak or no fraction: skip, saying which, never a made-up verdict.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ... import archs
from ..model import Finding, Status
from .megatron import judge_megatron
from .p2p import judge_p2p
from .verdict import AREA, PASS_AT, WARN_AT, fmt, link_budget, verdict
from .vram import judge_vram

_ORDER = {Status.FAIL: 0, Status.WARN: 1, Status.PASS: 2, Status.SKIP: 3}

RVS = "https://github.com/ROCm/ROCmValidationSuite (GST, BABEL, PEBB, PBQT modules; conf/<GPU>/levels)"
SMI_CLOCKS = ("check clocks, power cap and throttling: `amd-smi metric --clock --power` and `amd-smi monitor` "
              "(NVIDIA: `nvidia-smi -q -d CLOCK,POWER,PERFORMANCE`), and that no other process uses the GPU "
              "(`amd-smi process`, `nvidia-smi`)")

PCIE_FIX = ("compare the link's trained speed and width with what it is capable of: `sudo lspci -vv -s <pci> | "
            "grep -E 'LnkCap|LnkSta'` (x8 or a lower generation halves it); reseat the GPU or fix the slot's BIOS "
            "setting; keep the process on the GPU's NUMA node; then run RVS PEBB (level 2)")


@dataclass(frozen=True)
class Measure:
    key: str  # key in a GPU's "figures"
    label: str
    expect_key: str  # key of the arch table's [expect]
    peak_of: Callable[[archs.Product], float | None]  # datasheet peak, in the figure's unit
    peak_name: str
    splits_by_partition: bool  # compute divides evenly across CPX/DPX/QPX partitions; bandwidths have no such figure
    error_status: Status  # when the measurement itself failed
    fix: str
    reference: str


def _times(factor: float, attr: str) -> Callable[[archs.Product], float | None]:
    return lambda p: getattr(p, attr) * factor if getattr(p, attr) is not None else None


MEASURES: tuple[Measure, ...] = (
    Measure("gemm.bf16", "bf16 GEMM", "gemm_bf16", _times(1, "peak_bf16_tflops"), "dense bf16 peak", True, Status.FAIL,
            SMI_CLOCKS + "; then run RVS GST: `rvs -c /opt/rocm/share/rocm-validation-suite/conf/<GPU>/levels/"
            "rvs_level_3.conf`", RVS),
    Measure("gemm.fp8", "fp8 GEMM", "gemm_fp8", _times(1, "peak_fp8_tflops"), "dense fp8 peak", True, Status.WARN,
            SMI_CLOCKS + "; an error here usually means this PyTorch/hipBLASLt build cannot run fp8 GEMMs on "
            "this arch (fp8 training and fp8 inference then fail too)", RVS),
    Measure("hbm", "HBM copy", "hbm", _times(1000, "hbm_tbps"), "HBM peak", False, Status.FAIL,
            "look for memory errors and retired pages: `amd-smi metric --ecc` and `amd-smi bad-pages` "
            "(NVIDIA: `nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER`), check memory clocks "
            "(`amd-smi metric --clock`), then run RVS BABEL (level 3)", RVS),
    Measure("h2d", "host-to-device copy", "pcie", _times(1, "pcie_gbps"), "PCIe peak", False, Status.FAIL,
            PCIE_FIX, RVS),
    Measure("d2h", "device-to-host copy", "pcie", _times(1, "pcie_gbps"), "PCIe peak", False, Status.FAIL,
            PCIE_FIX, RVS),
)

ALLREDUCE_FIX = ("check that every GPU pair is linked by xGMI/NVLink (`amd-smi topology`, `rocm-smi --showtopo`; "
                 "NVIDIA: `nvidia-smi topo -m`, `nvidia-smi nvlink -s`), that no NCCL_/RCCL_ variable disables "
                 "peer access (NCCL_P2P_DISABLE, NCCL_SHM_DISABLE) and that NCCL_MIN_NCHANNELS is not throttling; "
                 "then run rccl-tests/nccl-tests `all_reduce_perf -b 8M -e 2G -f 2 -g <n>`")
ALLREDUCE_REF = ("https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md (busbw); "
                 "https://rocm.blogs.amd.com/software-tools-optimization/mi300x-rccl-xgmi/README.html")


def _product(gpu: dict[str, Any]) -> archs.Product | None:
    return archs.product_named(gpu["product"]) if gpu.get("product") else None


def _arch(gpu: dict[str, Any]) -> archs.Arch | None:
    return archs.all_archs().get(gpu.get("arch") or "")


def expectation(measure: Measure, gpu: dict[str, Any]) -> tuple[float, float, float] | str:
    """(peak, fraction, expected) for this GPU, or why it cannot be judged."""
    product = _product(gpu)
    if product is None:
        return f"unknown product ({gpu.get('name') or 'no name'}): not in rocmkit's arch table"
    if measure.key == "gemm.fp8":
        arch = _arch(gpu) or archs.all_archs().get(product.arch)
        if arch is not None and arch.fp8 == "none":
            return f"{arch.name} has no fp8 matrix cores"
    peak = measure.peak_of(product)
    if peak is None:
        return f"no {measure.peak_name} for {product.name} in the arch table"
    fraction = product.expected_fraction(measure.expect_key)
    if fraction is None:
        return f"no expected fraction '{measure.expect_key}' for {product.name} ({product.arch}) in the arch table"
    parts = int(gpu.get("partitions") or 1)
    if parts > 1:
        if not measure.splits_by_partition:
            return f"GPU runs as {parts} partitions: the data sheet gives no per-partition {measure.peak_name}"
        peak /= parts
    return peak, fraction, peak * fraction


def _judge_one(measure: Measure, gpu: dict[str, Any]) -> dict[str, Any]:
    row: dict[str, Any] = {"gpu": gpu.get("index"), "name": gpu.get("name"), "product": gpu.get("product"),
                           "arch": gpu.get("arch"), "pci": gpu.get("pci"), "partitions": gpu.get("partitions")}
    fig = (gpu.get("figures") or {}).get(measure.key)
    err = (gpu.get("errors") or {}).get(measure.key)
    if fig is None:
        row.update(status=(measure.error_status if err else Status.SKIP),
                   reason=err or "not measured")
        row["error"] = bool(err)
        return row
    row.update(value=fig["value"], unit=fig["unit"], spread=fig.get("spread"), stable=fig.get("stable"),
               seconds=fig.get("seconds"), figure=fig)
    exp = expectation(measure, gpu)
    if isinstance(exp, str):
        row.update(status=Status.SKIP, reason=exp)
        return row
    peak, fraction, expected = exp
    if measure.expect_key == "pcie" and _link_degraded(gpu):
        row["note"] = f"link {_link(gpu)}"
    row.update(status=verdict(fig["value"], expected), peak=round(peak, 2), fraction=fraction,
               expected=round(expected, 2), pass_at=round(expected * PASS_AT, 2),
               fail_below=round(expected * WARN_AT, 2), of_peak=round(fig["value"] / peak, 3),
               of_expected=round(fig["value"] / expected, 3))
    return row


def _unsteady(row: dict[str, Any]) -> str:
    notes = [row["note"]] if row.get("note") else []
    if row.get("stable") is False and row.get("spread"):
        notes.append(f"unsteady: spread {row['spread']:.0%}")
    return f" ({'; '.join(notes)})" if notes else ""


def _span(values: list[float]) -> str:
    return fmt(min(values)) if fmt(min(values)) == fmt(max(values)) else f"{fmt(min(values))}–{fmt(max(values))}"


def _title(label: str, rows: list[dict[str, Any]], status: Status) -> str:
    judged = [r for r in rows if "expected" in r]
    measured = [r for r in rows if "value" in r]
    unit = measured[0]["unit"] if measured else ""
    if not judged:
        if not measured:
            return f"{label}: {rows[0]['reason']}" if rows else f"{label}: no GPU"
        return f"{label} {_span([r['value'] for r in measured])} {unit}, not judged: {measured[0].get('reason', '')}"
    worst = judged[0]
    what = worst["product"]
    if len(rows) == 1:
        head = (f"{label} {fmt(worst['value'])} {unit}: {worst['of_peak']:.0%} of {what} peak {fmt(worst['peak'])}")
        if status is Status.PASS:
            return head + f", healthy ≥ {fmt(worst['pass_at'])}" + _unsteady(worst)
        return head + f", below the healthy {fmt(worst['pass_at'])}" + _unsteady(worst)
    if status is Status.PASS:
        return (f"{label} on {len(rows)} GPUs: {_span([r['value'] for r in judged])} {unit}, healthy ≥ "
                f"{fmt(min(r['pass_at'] for r in judged))} ({what})")
    bad = [r for r in rows if r["status"] is status]
    others = [r["value"] for r in judged if r["status"] is Status.PASS]
    names = ", ".join(f"GPU {r['gpu']}" for r in bad[:4]) + (f" and {len(bad) - 4} more" if len(bad) > 4 else "")
    tail = f"; the healthy {'ones' if len(others) > 1 else 'one'} {_span(others)}" if others else ""
    return (f"{label}: {names} at {fmt(worst['value'])} {unit}" + (" (slowest)" if len(bad) > 1 else "")
            + _unsteady(worst) + f", below the healthy {fmt(worst['pass_at'])} ({what}){tail}")


def _finding(fid: str, label: str, rows: list[dict[str, Any]], fix: str, reference: str,
             extra: dict[str, Any] | None = None) -> Finding:
    rows.sort(key=lambda r: (_ORDER[r["status"]], r.get("of_expected", 9)))
    judged = [r for r in rows if r["status"] is not Status.SKIP]
    status = judged[0]["status"] if judged else Status.SKIP
    errors = [r for r in rows if r.get("error")]
    if errors and errors[0]["status"] is status:
        title = f"{label}: GPU {errors[0]['gpu']}: {errors[0]['reason']}"
    else:
        title = _title(label, rows, status)
    evidence: dict[str, Any] = {"gpus": [{**r, "status": r["status"].value} for r in rows],
                                "pass_at_fraction_of_expected": PASS_AT, "fail_below_fraction_of_expected": WARN_AT}
    evidence.update(extra or {})
    flagged = status in (Status.WARN, Status.FAIL)
    return Finding(id=fid, area=AREA, status=status, title=title, evidence=evidence,
                   fix=fix if flagged else None, reference=reference)


def judge_gpus(gpus: list[dict[str, Any]], context: dict[str, Any] | None = None) -> list[Finding]:
    out = []
    for m in MEASURES:
        rows = [_judge_one(m, g) for g in gpus]
        if not rows:
            continue
        link_notes = [f"GPU {g.get('index')} ({g.get('pci')}) link {_link(g)}" for g in gpus
                      if m.key in ("h2d", "d2h") and _link(g)]
        extra = {**(context or {}), **({"links": link_notes} if link_notes else {})}
        out.append(_finding(f"probe.{m.key}", m.label, rows, m.fix, m.reference, extra))
    return out


def _link_degraded(gpu: dict[str, Any]) -> bool:
    link = gpu.get("link") or {}
    return bool(link.get("max_width")) and (str(link.get("current_width")) != str(link.get("max_width"))
                                             or link.get("current_speed") != link.get("max_speed"))


def _link(gpu: dict[str, Any]) -> str | None:
    link = gpu.get("link") or {}
    if not link.get("current_width"):
        return None
    s = f"x{link['current_width']} {link.get('current_speed', '?')}"
    if link.get("max_width"):
        s += f" of x{link['max_width']} {link.get('max_speed', '?')}"
    return s


def allreduce_peak(product: archs.Product, ranks: int) -> float | None:
    """Bus-bandwidth peak for `ranks` GPUs of this product: a mesh gives n-1 links, a switch all of them."""
    if not (product.link_gbps and product.link_count and product.link_topology):
        return None
    links = product.link_count if product.link_topology == "switch" else min(ranks - 1, product.link_count)
    return links * product.link_gbps


def judge_allreduce(ar: dict[str, Any] | None, gpus: list[dict[str, Any]],
                    context: dict[str, Any] | None = None) -> Finding:
    label = "all-reduce bus bandwidth"
    fid = "probe.allreduce"
    if not ar:
        n = len(gpus)
        return Finding(fid, AREA, Status.SKIP, f"{label}: {n} GPU{'s' if n != 1 else ''} visible, nothing to "
                       "all-reduce across" if n < 2 else f"{label}: not measured")
    by_index = {g.get("index"): g for g in gpus}
    members = [by_index.get(i, {"index": i}) for i in ar.get("gpus", [])]
    evidence: dict[str, Any] = {"gpus": ar.get("gpus"), "busbw": "algbw * 2(n-1)/n (nccl-tests)", **(context or {})}
    if ar.get("error"):
        evidence["error"] = ar["error"]
        return Finding(fid, AREA, Status.FAIL, f"all-reduce across {len(members)} GPUs failed: {ar['error']}",
                       evidence, ALLREDUCE_FIX, ALLREDUCE_REF)
    fig = ar["figure"]
    ranks = int(fig["params"]["ranks"])
    evidence.update(value=fig["value"], unit=fig["unit"], spread=fig.get("spread"), stable=fig.get("stable"),
                    seconds=fig.get("seconds"), figure=fig)
    if fig["params"].get("correct_sum") is False:
        return Finding(fid, AREA, Status.FAIL, f"all-reduce across {ranks} GPUs returned a wrong sum",
                       evidence, ALLREDUCE_FIX, ALLREDUCE_REF)
    head = f"{label} across {ranks} GPUs {fmt(fig['value'])} GB/s"
    product, peak, fraction, reason = link_budget(members, "allreduce", lambda p: allreduce_peak(p, ranks))
    if reason:
        evidence["reason"] = reason
        return Finding(fid, AREA, Status.SKIP, f"{head}, not judged: {reason}", evidence, None, ALLREDUCE_REF)
    expected = peak * fraction
    status = verdict(fig["value"], expected)
    evidence.update(product=product.name, topology=product.link_topology, peak=round(peak, 2), fraction=fraction,
                    expected=round(expected, 2), pass_at=round(expected * PASS_AT, 2),
                    fail_below=round(expected * WARN_AT, 2), of_peak=round(fig["value"] / peak, 3))
    where = f"{fig['value'] / peak:.0%} of {product.name} link peak {fmt(peak)}"
    title = f"{head}: {where}, " + (f"healthy ≥ {fmt(expected * PASS_AT)}" if status is Status.PASS
                                     else f"below the healthy {fmt(expected * PASS_AT)}")
    if fig.get("stable") is False and fig.get("spread"):
        title += f" (unsteady: spread {fig['spread']:.0%})"
    return Finding(fid, AREA, status, title, evidence, ALLREDUCE_FIX if status is not Status.PASS else None,
                   ALLREDUCE_REF)


def judge(doc: dict[str, Any]) -> list[Finding]:
    """Findings for a figures document (see run.measure)."""
    gpus = doc.get("gpus") or []
    context = {k: doc[k] for k in ("torch", "runtime", "budget_s") if k in doc}
    findings = judge_gpus(gpus, context)
    if "allreduce" in doc:
        findings.append(judge_allreduce(doc.get("allreduce"), gpus, context))
    if "p2p" in doc:  # documents recorded before these probes have neither key
        findings.append(judge_p2p(doc.get("p2p"), gpus, context))
    if "megatron" in doc:
        findings.append(judge_megatron(doc.get("megatron"), context))
    if "vram_release" in doc:
        findings.append(judge_vram(doc.get("vram_release"), context))
    return findings
