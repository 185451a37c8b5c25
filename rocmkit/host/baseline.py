"""Fleet depth: what identifies a host's setup (its fingerprint), and the comparison of a run against a good
host's saved run. Every `rocmkit doctor --json` document carries the fingerprint, so any two saved runs
compare; `--save-baseline FILE` writes one, `--baseline FILE` compares this run with it, `--compare A B`
compares two files. Pure: documents in, findings out.
"""

from __future__ import annotations

import re
from typing import Any

from .facts import Facts
from .model import Finding, Status

TOLERANCE = 0.10  # a probe figure this much below the baseline warns; twice this much fails
AREA = "baseline"
# The ids compare() produces (`doctor --only` accepts them with --baseline)
# Environment variables whose name looks like a credential never leave the node in a report
SECRET_RE = re.compile(r"TOKEN|SECRET|PASSW|KEY|CREDENTIAL|AUTH", re.I)
IDS = ("baseline.software", "baseline.gpus", "baseline.firmware", "baseline.figures", "baseline.findings")


def fingerprint(facts: Facts) -> dict[str, Any]:
    """The facts a fleet's hosts should share: kernel, driver, ROCm, and per GPU its product, partition mode,
    memory partition, firmware, NUMA node and PCIe link; the Python stack's versions and the environment variables
    ROCm, RCCL, Ray, vLLM and PyTorch read (the process's, when it was read; names that look like a secret left
    out); the RDMA ports (with --multi-node). `rocmkit doctor --fleet` compares them across nodes."""
    gpus = {}
    health = facts.health.gpus if facts.health else {}
    for i, d in enumerate(facts.devices):
        link = (health.get(d.pci_address or "") or None) and health[d.pci_address].link
        gpus[d.pci_address or f"gpu{i}"] = {
            "product": d.product.name if d.product else d.device_id, "gfx": d.gfx, "mode": d.partition_mode,
            "memory_partition": d.memory_partition, "partitions": d.partitions,
            "fw_mec": d.props.get("fw_version"), "fw_sdma": d.props.get("sdma_fw_version"),
            "numa": facts.gpu_numa.get(d.pci_address or ""),
            "pcie": f"{link.current_speed} x{link.current_width}" if link and link.current_speed else None,
        }
    out = {"kernel": facts.kernel_release, "amdgpu": facts.amdgpu_version, "rocm": facts.rocm_version,
           "gpus": gpus}
    if facts.process is not None:  # the process's stack and settings (a tree captured without them has none)
        out["packages"] = {k: v for k, v in sorted((facts.process.get("packages") or {}).items()) if v}
        if facts.process.get("torch_hip"):
            out["packages"]["torch (HIP)"] = facts.process["torch_hip"]
        out["env"] = {k: v for k, v in sorted(facts.env.items()) if not SECRET_RE.search(k)}
    if facts.rdma is not None:  # read only with --multi-node
        out["rdma"] = {p.name: f"{'ACTIVE' if p.active else (p.state or '?')} {p.link_layer or '?'} {p.rate or '?'}"
                       for p in facts.rdma.ports}
    return out


def figures(findings: list[dict]) -> dict[str, dict]:
    """Each probe figure of a run: "probe.hbm GPU 0" → {value, unit}."""
    out = {}
    for f in findings:
        if not str(f.get("id", "")).startswith("probe."):
            continue
        ev = f.get("evidence") or {}
        if isinstance(ev.get("value"), (int, float)):
            out[f["id"]] = {"value": ev["value"], "unit": ev.get("unit", "")}
        for row in ev.get("gpus") or []:
            if isinstance(row, dict) and isinstance(row.get("value"), (int, float)):
                out[f"{f['id']} GPU {row.get('gpu', row.get('index', '?'))}"] = {"value": row["value"],
                                                                                  "unit": row.get("unit", "")}
    return out


def _finding(fid: str, status: Status, title: str, fix: str | None = None, **evidence) -> Finding:
    return Finding(id=fid, area=AREA, status=status, title=title, evidence=evidence, fix=fix)


def _changes(base: dict, now: dict, keys) -> list[str]:
    return [f"{k} {base.get(k)!r} → {now.get(k)!r}" for k in keys if base.get(k) != now.get(k)]


def compare(base: dict, now: dict, *, tolerance: float = TOLERANCE, base_name: str = "the baseline") -> list[Finding]:
    """Findings for `now` against `base` (two doctor documents)."""
    out: list[Finding] = []
    bfp, nfp = base.get("fingerprint"), now.get("fingerprint")
    if isinstance(bfp, dict) and isinstance(nfp, dict):
        changed = _changes(bfp, nfp, ("kernel", "amdgpu", "rocm"))
        out.append(_finding("baseline.software", Status.WARN if changed else Status.PASS,
                            ("kernel, driver or ROCm differ from " + base_name + ": " + "; ".join(changed)) if changed
                            else f"kernel, amdgpu driver and ROCm as in {base_name}",
                            fix="bring the host to the fleet's kernel, amdgpu driver and ROCm" if changed else None,
                            changes=changed))
        out += _gpus(bfp.get("gpus") or {}, nfp.get("gpus") or {}, base_name)
    else:
        out.append(_finding("baseline.software", Status.SKIP, "no fingerprint in one of the runs (saved by an "
                            "older rocmkit): only findings and figures are compared"))
    out.append(_figures(figures(base.get("findings") or []), figures(now.get("findings") or []), tolerance, base_name))
    out.append(_regressions(base.get("findings") or [], now.get("findings") or [], base_name))
    return out


def _grouped(changes: list[tuple[str, str]]) -> str:
    """"mode 'SPX' → 'CPX' on 8 GPUs; fw_mec 177 → 178 on 0000:15:00.0": one change, the GPUs it is on."""
    by: dict[str, list[str]] = {}
    for pci, change in changes:
        by.setdefault(change, []).append(pci)
    return "; ".join(f"{c} on " + (pcis[0] if len(pcis) == 1 else f"{len(pcis)} GPUs") for c, pcis in by.items())


def _gpus(base: dict, now: dict, base_name: str) -> list[Finding]:
    missing = sorted(set(base) - set(now))
    added = sorted(set(now) - set(base))
    setup, firmware = [], []
    for pci in sorted(set(base) & set(now)):
        setup += [(pci, c) for c in _changes(base[pci], now[pci], ("product", "gfx", "mode", "memory_partition",
                                                                    "partitions", "numa", "pcie"))]
        firmware += [(pci, c) for c in _changes(base[pci], now[pci], ("fw_mec", "fw_sdma"))]
    status = Status.FAIL if missing else (Status.WARN if setup or added else Status.PASS)
    title = (f"GPUs {', '.join(missing)} of {base_name} are missing" if missing else
             f"GPU setup differs from {base_name}: " + _grouped(setup + [(a, "new") for a in added]) if status is Status.WARN
             else f"{len(now)} GPUs, products, partition modes and NUMA nodes as in {base_name}")
    return [
        _finding("baseline.gpus", status, title, fix="reseat or re-enable the missing GPUs; set the fleet's partition "
                 "modes (amd-smi set --compute-partition / --memory-partition)" if status is not Status.PASS else None,
                 missing=missing, added=added, changes=[f"{pci}: {c}" for pci, c in setup]),
        _finding("baseline.firmware", Status.WARN if firmware else Status.PASS,
                 f"GPU firmware differs from {base_name}: " + _grouped(firmware) if firmware
                 else f"GPU firmware (MEC, SDMA) as in {base_name}",
                 fix="flash the fleet's firmware bundle (PLDM) on this host" if firmware else None,
                 changes=[f"{pci}: {c}" for pci, c in firmware]),
    ]


def _figures(base: dict, now: dict, tolerance: float, base_name: str) -> Finding:
    if not base or not now:
        return _finding("baseline.figures", Status.SKIP, "probe figures not compared: "
                        + ("the baseline has none" if not base else "this run has none (level 2 measures them)"))
    rows, worst = [], Status.PASS
    for key in sorted(set(base) & set(now)):
        b, n = base[key]["value"], now[key]["value"]
        if not b:
            continue
        ratio = n / b
        status = Status.FAIL if ratio < 1 - 2 * tolerance else Status.WARN if ratio < 1 - tolerance else Status.PASS
        rows.append({"figure": key, "baseline": b, "now": n, "unit": now[key]["unit"], "ratio": round(ratio, 3),
                     "status": status.value})
        if status is Status.FAIL or (status is Status.WARN and worst is Status.PASS):
            worst = status
    low = [r for r in rows if r["status"] != Status.PASS.value]
    low.sort(key=lambda r: r["ratio"])
    title = (f"{len(low)} probe figure(s) below {base_name}: " + "; ".join(
        f"{r['figure']} {r['now']:g} vs {r['baseline']:g} {r['unit']} ({r['ratio'] - 1:+.0%})" for r in low[:3])
        if low else f"{len(rows)} probe figures within {tolerance:.0%} of {base_name}")
    return _finding("baseline.figures", worst, title, fix="look at this GPU's clocks, power cap, PCIe/xGMI links and "
                    "ECC counters (rocmkit doctor), then RVS or rccl-tests" if low else None,
                    tolerance=tolerance, figures=rows)


def _regressions(base: list[dict], now: list[dict], base_name: str) -> Finding:
    # Every check whose status is worse now (pass → warn, pass → fail, warn → fail), failures first, each named in
    # the title: a list cut at five would hide the sixth, and a failure sorted after warnings is the one missed.
    rank = {Status.PASS.value: 0, Status.WARN.value: 1, Status.FAIL.value: 2}
    before = {f.get("id"): f.get("status") for f in base}
    worse = [f for f in now if not str(f.get("id")).startswith("probe.") and f.get("status") in rank
             and before.get(f.get("id")) in rank and rank[f["status"]] > rank[before[f.get("id")]]]
    worse.sort(key=lambda f: -rank[f["status"]])  # stable: the checks' own order within fails and within warns
    status = Status.FAIL if any(f["status"] == Status.FAIL.value for f in worse) else \
        Status.WARN if worse else Status.PASS
    return _finding("baseline.findings", status,
                    f"{len(worse)} check(s) are worse than on {base_name}: "
                    + ", ".join(f"{f['id']} ({before[f['id']]} → {f['status']})" for f in worse) if worse
                    else f"no check is worse now than on {base_name}",
                    fix="see those checks' own fixes above" if worse else None,
                    regressed=[{"id": f["id"], "status": f["status"], "was": before[f["id"]], "title": f.get("title")}
                               for f in worse])
