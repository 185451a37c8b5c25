"""The fleet report as one self-contained HTML page: inline CSS, an inline SVG chart, no script and nothing
fetched, so it opens from a mail attachment or a cluster's scratch folder without a network. Pure: the fleet
document in, the page out, rendered from templates/fleet/report.html.j2 with autoescape on (a node name or an
environment value is text, never markup).

This module shapes the document for the template (the findings grouped, the grid's columns in reading order,
the chart's geometry); the template holds the markup and the CSS. Every finding the JSON lists (`findings`)
appears in the page as an element carrying data-id, data-status and data-nodes (the same finding on several
nodes once, naming them all: grouped()), so a test (or a person with the DOM) can check that the page says
what the JSON says."""

from __future__ import annotations

import functools
import json

from ..host.model import Status

STATUS_MARK = {Status.PASS: "✓", Status.WARN: "!", Status.FAIL: "✗", Status.SKIP: "–"}
COLORS = {Status.PASS: "#2f9e55", Status.WARN: "#e0a100", Status.FAIL: "#d92d20"}
RANK = {Status.FAIL: 0, Status.WARN: 1, Status.PASS: 2, Status.SKIP: 2}
EVIDENCE_CHARS = 6000
# The chart's frame, in SVG units; it scales down with the page (viewBox), so it fits a narrow window whole
CHART_LEFT, CHART_WIDTH, CHART_ROW, CHART_TOP = 16, 720, 46, 30


@functools.cache
def _template():
    from ..templating import environment

    env = environment(autoescape=True)  # the page shows what nodes said: escaped
    return env.get_template("fleet/report.html.j2")


def render(doc: dict) -> str:
    s = doc["summary"]
    banner = (f"{s['passing']} of {s['nodes']} node(s) pass" + (f" — failing: {' '.join(doc['failing_nodes'])}"
                                                                 if doc["failing_nodes"] else "")
              + "".join(f" — {'the fleet fails' if doc['exit_code'] else 'note'}: {why}"
                        for why in doc.get("why") or ()))
    return _template().render(
        doc=doc, s=s, banner=banner, verdict=Status.PASS if doc["exit_code"] == 0 else Status.FAIL, grid=_grid(doc),
        differences=_differences(doc), chart=_chart(doc), findings=_findings(doc), mark=STATUS_MARK)


def _anchor(f: dict) -> str:
    """A finding's id in the page: its first node's and its own."""
    return "f-" + "".join(c if c.isalnum() else "-" for c in f"{f['nodes'][0]}-{f['id']}")


def grouped(findings: list[dict]) -> list[dict]:
    """The findings as the page lists them: one entry for the same finding (id, status, title, fix) on several
    nodes, naming them all, so a warning every node gives is one line, not sixty-four."""
    groups: dict[tuple, dict] = {}
    for f in findings:
        key = (f["id"], f["status"], f["title"], f.get("fix"))
        if key in groups:
            groups[key]["nodes"] = groups[key]["nodes"] + [n for n in f["nodes"] if n not in groups[key]["nodes"]]
        else:
            groups[key] = dict(f)
    return list(groups.values())


def _grid(doc: dict) -> dict:
    """The grid's columns and rows. The columns a node fails come first, then those it warns on, each in the
    JSON's order: a window narrower than the grid scrolls it sideways, and what is cut off on the right is then
    never a red cell (the node column stays put, so a row is always named)."""
    cells = doc["grid"]
    worst = {c: min((RANK.get(cells.get(n["node"], {}).get(c), 2) for n in doc["nodes"]), default=2)
             for c in doc["checks"]}
    checks = sorted(doc["checks"], key=lambda c: worst[c])  # sorted() is stable: the JSON's order within a rank
    by_id: dict[tuple[str, str], dict] = {}
    for f in grouped(doc["findings"]):  # fleet.same: the first difference the node is part of
        for n in f["nodes"]:
            by_id.setdefault((n, "fleet.same" if f["id"].startswith("fleet.differs.") else f["id"]), f)
    rows = []
    for n in doc["nodes"]:
        node, row = n["node"], []
        for c in checks:
            status = cells.get(node, {}).get(c)
            f = by_id.get((node, c))
            row.append({"check": c, "status": status, "anchor": _anchor(f) if f else None,
                        "tip": f"{node} · {c}: {f['title'] if f else status}"})
        fails = sum(cell["status"] == Status.FAIL for cell in row)
        rows.append({"node": node, "verdict": n["verdict"], "fails": fails, "cells": row})
    return {"checks": checks, "rows": rows}


def _findings(doc: dict) -> list[dict]:
    out = []
    for f in sorted(grouped(doc["findings"]), key=lambda f: (f["status"] != Status.FAIL, f["nodes"], f["id"])):
        ev = f.get("evidence")
        out.append({**f, "anchor": _anchor(f), "node_list": " ".join(f["nodes"]),
                    "evidence_text": json.dumps(ev, indent=1, default=str)[:EVIDENCE_CHARS] if ev else None})
    return out


def _differences(doc: dict) -> dict:
    answered = doc["summary"].get("answered", sum(n["state"] == "answered" for n in doc["nodes"]))
    rows = []
    for d in doc["differences"]:
        fallback = "no majority: the fleet fails as a whole" if d["status"] == Status.FAIL else "no majority"
        rows.append({**d, "odd": ", ".join(d["odd_nodes"]) or fallback})
    return {"answered": answered, "rows": rows}


def _chart(doc: dict) -> dict | None:
    """A strip chart's geometry: one row a figure, each GPU (or node) a dot at its share of the fleet median,
    the row's name above its line (a long name never pushes the dots off to the right)."""
    rows = doc["figures"]
    if not rows:
        return None
    tol = doc["tolerance"]
    lo = min([1 - 3 * tol] + [r["ratio"] - 0.02 for r in rows])
    hi = max([1 + tol] + [r["ratio"] + 0.02 for r in rows])

    def x(ratio: float) -> float:
        return round(CHART_LEFT + (ratio - lo) / (hi - lo) * CHART_WIDTH, 1)

    kinds = sorted({r["figure"] for r in rows})
    height = CHART_TOP + CHART_ROW * len(kinds) + 30
    lines = [{"x": x(ratio), "label": label, "color": color} for ratio, label, color in (
        (1 - 2 * tol, f"fail < {1 - 2 * tol:.0%}", COLORS[Status.FAIL]),
        (1 - tol, f"warn < {1 - tol:.0%}", COLORS[Status.WARN]), (1.0, "median", "#3a4252"))]
    strips = []
    for i, k in enumerate(kinds):
        mine = [r for r in rows if r["figure"] == k]
        dots = [{"x": x(r["ratio"]), "status": r["status"], "color": COLORS[r["status"]], "node": r["node"],
                 "r": 4 if r["status"] == Status.PASS else 6,
                 "label": f"{r['node']} {r['key']}: {r['value']:.4g} {r['unit']} ({r['ratio']:.1%} of median)"}
                for r in sorted(mine, key=lambda r: r["status"] != Status.PASS)]  # the low ones drawn last, on top
        strips.append({"y": CHART_TOP + CHART_ROW * i + CHART_ROW * 0.6, "figure": k,
                       "median": f"{mine[0]['median']:.4g} {mine[0]['unit']}", "dots": dots})
    return {"width": CHART_LEFT + CHART_WIDTH + 24, "height": height, "left": CHART_LEFT,
            "right": CHART_LEFT + CHART_WIDTH, "top": CHART_TOP, "lines": lines, "strips": strips,
            "ticks": [{"x": x(t), "label": f"{t:.0%}"} for t in _ticks(lo, hi)]}


def _ticks(lo: float, hi: float) -> list[float]:
    step = 0.05 if hi - lo <= 0.6 else 0.1
    t = round(lo / step + 0.5) * step
    out = []
    while t <= hi:
        out.append(round(t, 4))
        t += step
    return out
