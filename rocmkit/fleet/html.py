"""The fleet report as one self-contained HTML page: inline CSS, an inline SVG chart, no script and nothing
fetched, so it opens from a mail attachment or a cluster's scratch folder without a network. Pure: the fleet
document in, the page out.

Every finding the JSON lists (`findings`) appears in the page as an element carrying data-id, data-status and
data-nodes (the same finding on several nodes once, naming them all: grouped()), so a test (or a person with the
DOM) can check that the page says what the JSON says."""

from __future__ import annotations

import json
from html import escape

STATUS_MARK = {"pass": "✓", "warn": "!", "fail": "✗", "skip": "–"}
CSS = """
body{font:14px/1.4 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:24px;color:#1d2330;background:#fff}
h1{font-size:22px;margin:0 0 4px} h2{font-size:17px;margin:28px 0 8px;border-bottom:1px solid #dde2ea;padding-bottom:4px}
.sub{color:#5b6475} code,pre{font:12px/1.35 ui-monospace,SFMono-Regular,Menlo,monospace}
.banner{display:inline-block;padding:6px 12px;border-radius:6px;font-weight:600;margin:10px 0}
.banner.fail{background:#fde8e8;color:#9b1c1c} .banner.pass{background:#e3f6e8;color:#1e6b34}
.banner.warn{background:#fff4d6;color:#7a5200}
.next{background:#f4f6fa;border:1px solid #dde2ea;border-radius:6px;padding:8px 12px;margin:8px 0}
table{border-collapse:collapse} th,td{padding:3px 6px;text-align:left;vertical-align:top}
table.list td,table.list th{border-bottom:1px solid #eef1f5}
.grid th.check{height:150px;white-space:nowrap;vertical-align:bottom;padding:0 1px}
.grid th.check div{writing-mode:vertical-rl;transform:rotate(180deg);font-weight:400;font-size:12px;color:#3a4252}
.grid td.cell{width:18px;height:18px;padding:0;text-align:center;font-size:12px;border:1px solid #fff}
.grid td.node{font-weight:600;white-space:nowrap;padding-right:10px}
.cell.pass{background:#cfeed7;color:#1e6b34} .cell.warn{background:#ffe29a;color:#7a5200}
.cell.fail{background:#f5a3a3;color:#7f1010;font-weight:700} .cell.skip{background:#eceff3;color:#8a93a3}
.cell.none{background:#fafbfc} .cell a{color:inherit;text-decoration:none;display:block}
.verdict{font-weight:700} .verdict.fail,.st.fail{color:#b42318} .verdict.pass,.st.pass{color:#1e6b34}
.st.warn{color:#8a5a00} .finding{border-left:4px solid #ccc;padding:6px 10px;margin:8px 0;background:#fafbfc}
.finding.fail{border-color:#d92d20} .finding.warn{border-color:#f0a000}
.finding .nodes{font-weight:600} .finding .fix{margin-top:4px} .finding .fix b{color:#3a4252}
details pre{max-height:260px;overflow:auto;background:#f4f6fa;padding:6px;margin:4px 0 0}
.legend span{display:inline-block;margin-right:14px} .dot{display:inline-block;width:10px;height:10px;border-radius:5px}
"""
COLORS = {"pass": "#2f9e55", "warn": "#e0a100", "fail": "#d92d20"}


def render(doc: dict) -> str:
    s = doc["summary"]
    verdict = "pass" if doc["exit_code"] == 0 else "fail"
    banner = (f"{s['passing']} of {s['nodes']} node(s) pass" + (f" — failing: {' '.join(doc['failing_nodes'])}"
                                                                 if doc["failing_nodes"] else "")
              + "".join(f" — {'the fleet fails' if doc['exit_code'] else 'note'}: {why}"
                        for why in doc.get("why") or ()))
    parts = [
        "<!DOCTYPE html><html lang=en><head><meta charset=utf-8>",
        "<meta name=viewport content='width=device-width,initial-scale=1'>",
        f"<title>rocmkit fleet report — {s['nodes']} nodes</title><style>{CSS}</style></head><body>",
        "<h1>rocmkit doctor --fleet</h1>",
        f"<div class=sub>{s['nodes']} node(s), level {doc['level']}, deadline {doc['deadline_s']} s a node, "
        f"figures judged against the fleet median at {doc['tolerance']:.0%}"
        + (f", created {escape(str(doc['created']))}" if doc.get("created") else "") + "</div>",
        f"<div class='banner {verdict}' id=verdict data-exit-code={doc['exit_code']}>{escape(banner)}</div>",
        _next(doc), _grid(doc), _differences(doc), _chart(doc), _findings(doc), _nodes(doc),
        "</body></html>\n",
    ]
    return "\n".join(parts)


def _next(doc: dict) -> str:
    if not doc["failing_nodes"]:
        return "<div class=next>Every node passes: nothing to exclude.</div>"
    if not doc["exclude"]:
        return f"<div class=next>Nothing to exclude: {escape(str(doc.get('no_exclude')))}. Fix the nodes or make " \
               "them agree (the fixes below), then run it again.</div>"
    ex = escape(doc["exclude"])
    return (f"<div class=next>Next: <code id=exclude>{ex}</code> — e.g. <code>sbatch {ex} job.sbatch</code>; "
            "the lists are in <code>passing_nodes.txt</code> and <code>failing_nodes.txt</code> beside this page."
            "</div>")


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


def _grid(doc: dict) -> str:
    checks = doc["checks"]
    by_id: dict[tuple[str, str], dict] = {}
    for f in grouped(doc["findings"]):  # fleet.same: the first difference the node is part of
        for n in f["nodes"]:
            by_id.setdefault((n, "fleet.same" if f["id"].startswith("fleet.differs.") else f["id"]), f)
    head = "".join(f"<th class=check><div>{escape(c)}</div></th>" for c in checks)
    rows = []
    for n in doc["nodes"]:
        node = n["node"]
        cells = []
        for c in checks:
            status = doc["grid"].get(node, {}).get(c)
            if status is None:
                cells.append("<td class='cell none'></td>")
                continue
            f = by_id.get((node, c))
            tip = escape(f"{node} · {c}: {f['title'] if f else status}", quote=True)
            mark = STATUS_MARK.get(status, "?")
            inner = f"<a href='#{_anchor(f)}'>{mark}</a>" if f else mark
            cells.append(f"<td class='cell {status}' title='{tip}' data-node='{escape(node)}' "
                         f"data-check='{escape(c)}' data-status={status}>{inner}</td>")
        v = n["verdict"]
        rows.append(f"<tr><td class=node>{escape(node)} <span class='verdict {v}'>{v.upper()}</span></td>"
                    + "".join(cells) + "</tr>")
    return ("<h2>Nodes × checks</h2><table class=grid><tr><th></th>" + head + "</tr>" + "".join(rows)
            + "</table><div class='sub legend'><span>✓ pass</span><span>! warn</span><span>✗ fail</span>"
              "<span>– skipped</span><span>blank: not reported by that node (a check that reports only what it "
              "finds, or not run there)</span></div>")


def _findings(doc: dict) -> str:
    items = []
    for f in sorted(grouped(doc["findings"]), key=lambda f: (f["status"] != "fail", f["nodes"], f["id"])):
        nodes = " ".join(f["nodes"])
        anchor = f" id={_anchor(f)}"
        ev = f.get("evidence")
        items.append(
            f"<div class='finding {f['status']}'{anchor} data-id='{escape(f['id'])}' data-status={f['status']} "
            f"data-nodes='{escape(nodes)}'><span class='st {f['status']}'>{f['status'].upper()}</span> "
            f"<span class=nodes>{escape(nodes)}</span> · <code>{escape(f['id'])}</code><div>{escape(f['title'])}</div>"
            + (f"<div class=fix><b>fix:</b> {escape(f['fix'])}</div>" if f.get("fix") else "")
            + (f"<div class=sub>ref: {escape(f['reference'])}</div>" if f.get("reference") else "")
            + (f"<details><summary>evidence</summary><pre>{escape(json.dumps(ev, indent=1, default=str)[:6000])}"
               "</pre></details>" if ev else "") + "</div>")
    return "<h2>Failures and warnings, with evidence and fix</h2>" + ("".join(items) or "<p>None.</p>")


def _differences(doc: dict) -> str:
    answered = doc["summary"].get("answered", sum(n["state"] == "answered" for n in doc["nodes"]))
    if not doc["differences"] and answered < 2:
        return (f"<h2>Differences between nodes</h2><p>Nothing compared: {answered} node(s) answered, and a "
                "comparison takes two.</p>")
    if not doc["differences"]:
        return "<h2>Differences between nodes</h2><p>None: every node reports the same kernel, driver, firmware, " \
               "ROCm, Python stack, RCCL/ROCm variables and RDMA ports.</p>"
    rows = []
    for d in doc["differences"]:
        values = "".join(f"<div><code>{escape(v['value'])}</code> on {escape(', '.join(v['nodes']))}</div>"
                         for v in d["values"])
        odd = ", ".join(d["odd_nodes"]) or "no majority: the fleet fails as a whole" if d["status"] == "fail" \
            else ", ".join(d["odd_nodes"]) or "no majority"
        rows.append(f"<tr data-id='{escape(d['id'])}'><td class='st {d['status']}'>{d['status'].upper()}</td>"
                    f"<td>{escape(d['what'])}</td><td>{values}</td><td>{escape(odd)}</td></tr>")
    return ("<h2>Differences between nodes</h2><table class=list><tr><th></th><th>what</th><th>values</th>"
            "<th>odd one out</th></tr>" + "".join(rows) + "</table>")


def _chart(doc: dict) -> str:
    """A strip chart: one row a figure, each GPU (or node) a dot at its share of the fleet median."""
    rows = doc["figures"]
    if not rows:
        return "<h2>Probe figures against the fleet median</h2><p>No figures: level 2 (--level 2) measures them.</p>"
    kinds = sorted({r["figure"] for r in rows})
    tol = doc["tolerance"]
    lo = min([1 - 3 * tol] + [r["ratio"] - 0.02 for r in rows])
    hi = max([1 + tol] + [r["ratio"] + 0.02 for r in rows])
    left, width, row_h, top = 330, 700, 34, 26
    height = top + row_h * len(kinds) + 30

    def x(ratio: float) -> float:
        return left + (ratio - lo) / (hi - lo) * width

    out = [f"<svg xmlns='http://www.w3.org/2000/svg' width={left + width + 20} height={height} "
           "role=img aria-label='probe figures as a share of the fleet median' font-family='system-ui,sans-serif' "
           "font-size=12>"]
    for ratio, label, color in ((1 - 2 * tol, f"fail < {1 - 2 * tol:.0%}", COLORS["fail"]),
                                (1 - tol, f"warn < {1 - tol:.0%}", COLORS["warn"]), (1.0, "median", "#3a4252")):
        out.append(f"<line x1={x(ratio):.1f} x2={x(ratio):.1f} y1={top - 6} y2={height - 24} stroke='{color}' "
                   f"stroke-dasharray='4 3'/><text x={x(ratio):.1f} y={top - 10} text-anchor=middle "
                   f"fill='{color}'>{escape(label)}</text>")
    for i, k in enumerate(kinds):
        y = top + row_h * i + row_h / 2
        mine = [r for r in rows if r["figure"] == k]
        med = mine[0]["median"]
        out.append(f"<text x={left - 10} y={y + 4:.1f} text-anchor=end>{escape(k)} "
                   f"<tspan fill='#5b6475'>(median {med:.4g} {escape(mine[0]['unit'])})</tspan></text>")
        out.append(f"<line x1={left} x2={left + width} y1={y:.1f} y2={y:.1f} stroke='#eef1f5'/>")
        for r in sorted(mine, key=lambda r: r["status"] != "pass"):  # the low ones drawn last, on top
            label = escape(f"{r['node']} {r['key']}: {r['value']:.4g} {r['unit']} ({r['ratio']:.1%} of median)")
            out.append(f"<circle cx={x(r['ratio']):.1f} cy={y:.1f} r={6 if r['status'] != 'pass' else 4} "
                       f"fill='{COLORS[r['status']]}' fill-opacity=0.8><title>{label}</title></circle>")
            if r["status"] != "pass":
                out.append(f"<text x={x(r['ratio']):.1f} y={y - 9:.1f} text-anchor=middle font-size=11 "
                           f"fill='{COLORS[r['status']]}'>{escape(r['node'])}</text>")
    for t in _ticks(lo, hi):
        out.append(f"<text x={x(t):.1f} y={height - 8} text-anchor=middle fill='#5b6475'>{t:.0%}</text>")
    out.append("</svg>")
    return ("<h2>Probe figures against the fleet median</h2><div class=sub>Each dot is one GPU's figure (or one "
            "node's, for the all-reduce) as a share of the median of that figure over every GPU of every node."
            "</div>" + "".join(out))


def _ticks(lo: float, hi: float) -> list[float]:
    step = 0.05 if hi - lo <= 0.6 else 0.1
    t = round(lo / step + 0.5) * step
    out = []
    while t <= hi:
        out.append(round(t, 4))
        t += step
    return out


def _nodes(doc: dict) -> str:
    rows = []
    for n in doc["nodes"]:
        s = n.get("summary") or {}
        counts = f"{s.get('pass', 0)} pass, {s.get('warn', 0)} warn, {s.get('fail', 0)} fail" if s else ""
        secs = f"{n['seconds']:g} s" if n.get("seconds") is not None else ""
        rows.append(f"<tr><td>{escape(n['node'])}</td><td class='verdict {n['verdict']}'>{n['verdict'].upper()}</td>"
                    f"<td>{escape(n['state'])}</td><td>{'' if n['exit_code'] is None else n['exit_code']}</td>"
                    f"<td>{secs}</td><td>{counts}</td><td>{escape(n.get('error') or '')}</td></tr>")
    return ("<h2>Nodes</h2><table class=list><tr><th>node</th><th>verdict</th><th>state</th><th>doctor exit</th>"
            "<th>time</th><th>its checks</th><th>why</th></tr>" + "".join(rows) + "</table>")
