"""Findings → a table grouped by area, a summary line, a JSON document, an exit code."""

from __future__ import annotations

from collections import Counter

from ..output import document
from .baseline import fingerprint
from .facts import Facts
from .model import Finding, Status

AREA_ORDER = ("gpu", "kernel", "container", "env", "software", "probe", "doctor")
MARK = {Status.PASS: "PASS", Status.WARN: "WARN", Status.FAIL: "FAIL", Status.SKIP: "skip"}


def counts(findings: list[Finding]) -> dict[str, int]:
    c = Counter(f.status.value for f in findings)
    return {s.value: c.get(s.value, 0) for s in Status}


def exit_code(findings: list[Finding], strict: bool) -> int:
    bad = {Status.FAIL, Status.WARN} if strict else {Status.FAIL}
    return 1 if any(f.status in bad for f in findings) else 0


def summary_line(findings: list[Finding]) -> str:
    c = counts(findings)
    verdict = "FAILED" if c["fail"] else ("passed with warnings" if c["warn"] else "passed")
    return f"doctor {verdict}: {c['pass']} pass, {c['warn']} warn, {c['fail']} fail, {c['skip']} skipped"


def heading(facts: Facts) -> str:
    where = "this host" if facts.live else f"captured tree {facts.root}"
    return f"rocmkit doctor — {where}" + (f" (container: {facts.container})" if facts.container else "")


def table(findings: list[Finding], title: str, *, color: bool = False) -> str:
    import click

    colors = {Status.PASS: "green", Status.WARN: "yellow", Status.FAIL: "red", Status.SKIP: None}
    lines = [title]
    areas = sorted({f.area for f in findings}, key=lambda a: (AREA_ORDER.index(a) if a in AREA_ORDER else 99, a))
    for area in areas:
        lines.append("")
        lines.append(area.upper())
        for f in (x for x in findings if x.area == area):
            mark = MARK[f.status]
            if color and colors[f.status]:
                mark = click.style(mark, fg=colors[f.status], bold=True)
            lines.append(f"  {mark}  {f.id:<28} {f.title}")
            if f.fix and f.status in (Status.FAIL, Status.WARN):
                lines.append(f"        fix: {f.fix}")
            if f.reference and f.status in (Status.FAIL, Status.WARN):
                lines.append(f"        ref: {f.reference}")
    lines += ["", summary_line(findings)]
    return "\n".join(lines) + "\n"


def doctor_document(findings: list[Finding], facts: Facts, *, level: int, strict: bool, extra: dict | None = None) -> dict:
    from ..buildid import identity

    body = {
        "rocmkit": identity(),  # which rocmkit decided: a fleet fails nodes whose rocmkits differ (fleet/compare.py)
        "level": level,
        "target": {"live": facts.live, "root": facts.root, "container": facts.container},
        "host": {
            "gpus": [{"pci": d.pci_address, "device_id": d.device_id, "product": d.product.name if d.product else None,
                      "gfx": d.gfx, "partitions": d.partitions, "mode": d.partition_mode,
                      "render_minors": list(d.render_minors)} for d in facts.devices],
            "rocm": facts.rocm_version,
            "cmdline": facts.cmdline,
        },
        "fingerprint": fingerprint(facts),
        "findings": [f.to_json() for f in findings],
        "summary": counts(findings),
        "exit_code": exit_code(findings, strict),
    }
    if extra:
        body.update(extra)
    return document("doctor", body)
