"""The fleet's verdict and its files: the JSON document (schema rocmkit.fleet/v1), the node lists a job script
reads, the text summary. Deciding is pure (assess); writing is write_outputs.

Every finding carries the nodes it is about, so the JSON, the HTML page and the node lists say the same thing:
a node fails when a failing finding names it (its own doctor's, a difference where it is the odd one out, a
figure far below the fleet's median, no answer by its deadline); --strict counts warnings too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..host import baseline as host_baseline
from ..host.model import Status
from ..output import document, dumps
from . import compare
from .nodes import compress
from .run import NodeResult

FILES = ("fleet.json", "fleet.html", "passing_nodes.txt", "failing_nodes.txt", "exclude.txt")
UNREACHED = {"deadline": ("fleet.deadline", "did not finish its doctor within the deadline ({s} s): stopped there",
                          "look at the node (a hung GPU or driver, a full disk, a stuck mount): ssh to it and run "
                          "`rocmkit doctor` there; exclude it meanwhile"),
             "no answer": ("fleet.no_answer", "did not answer: {error}",
                           "check the node's slurmd (scontrol show node NODE; sinfo -R); exclude it meanwhile"),
             "not reached": ("fleet.not_reached", "not reached: {error}",
                             "srun's message says why (a node down, drained or not in the allocation: sinfo -R; "
                             "scontrol show node NODE); exclude it meanwhile"),
             "error": ("fleet.error", "{error}",
                       "look at its stderr in the report; rocmkit must be on the node's PATH (or give --image with "
                       "rocmkit in it)"),
             "crashed": ("fleet.crashed", "{error}",
                         "run `python3 -X faulthandler -m rocmkit doctor` on the node: the stack it prints says "
                         "where it crashed; a crash in a native library (a SIGSEGV, a SIGBUS) points at its driver or "
                         "ROCm install; exclude it meanwhile"),
             "invalid": ("fleet.invalid", "{error}",
                         "run `rocmkit doctor --json` on the node and compare its rocmkit with the others' "
                         "(rocmkit --version); exclude it meanwhile"),
             "unavailable": ("fleet.slurm", "{error}; not asked",
                             "Slurm's reason says why; `scontrol update nodename=NODE state=resume` returns a node "
                             "that is fixed, and the next run checks it")}


def _error_fix(r: NodeResult, own: dict | None) -> str | None:
    """The exact fix for a node whose rocmkit could not run the fleet's command: which rocmkit to install there."""
    from ..buildid import describe, install_line

    if r.state == "error" and r.exit_code == 127:
        return f"install rocmkit on {r.node} ({install_line(own)}; the fleet's own is {describe(own)}), or give " \
               "--image with rocmkit in it"
    if r.state in ("error", "invalid") and ("too old" in (r.error or "") or r.state == "invalid"):
        return (f"upgrade rocmkit on {r.node} to the fleet's own, {describe(own)}: {install_line(own)} (on the node: "
                f"rocmkit --version says which it runs); or give --image with rocmkit in it")
    return None


def node_findings(r: NodeResult, deadline_s: int, base: dict | None, base_name: str,
                  own: dict | None = None) -> list[dict[str, Any]]:
    """A node's own findings (its doctor's; or why there are none), each naming the node."""
    if r.state != "answered":
        fid, title, fix = UNREACHED[r.state]
        text = title.format(s=deadline_s, error=r.error)
        evidence = {"exit_code": r.exit_code, "stderr": r.stderr[-2000:] or None,
                    "stdout": r.around[-2000:] or None}
        finding = {"id": fid, "area": "fleet", "status": Status.FAIL, "nodes": [r.node],
                   "title": text if r.node in text.split(":")[0] else f"{r.node} {text}",  # named once
                   "fix": _error_fix(r, own) or fix, "evidence": {k: v for k, v in evidence.items() if v is not None}}
        if r.state == "unavailable":  # Slurm's word: the kind (drained, busy, …) and whether the node is to blame
            kind, blames = r.slurm or ("unavailable", True)
            finding.update(id=f"fleet.slurm.{kind.replace(' ', '_')}", blames=blames)
        return [finding]
    found = list(r.doc.get("findings") or [])
    if base is not None:
        found += [f.to_json() for f in host_baseline.compare(base, r.doc, base_name=base_name)]
    # the keys the fleet itself sets on a finding are never taken from a node's document
    return [{**{k: v for k, v in f.items() if k not in ("blames", "odd_nodes")}, "nodes": [r.node]} for f in found]


def baseline_for(node: str, base: dict | None) -> tuple[dict | None, str]:
    """The saved run a node is compared with: the same node's in a saved fleet report, else its first passing
    node's; a saved doctor run (one good node) for every node."""
    if base is None:
        return None, ""
    if base.get("schema") != "rocmkit.fleet/v1":
        return base, "the baseline"
    docs = {n["node"]: n.get("doctor") for n in base.get("nodes") or [] if isinstance(n.get("doctor"), dict)}
    if node in docs:
        return docs[node], f"{node} in the baseline"
    for n in base.get("passing_nodes") or []:
        if n in docs:
            return docs[n], f"{n} in the baseline"
    return None, ""


def assess(results: list[NodeResult], *, level: int, strict: bool, tolerance: float, deadline_s: int,
           min_nodes: int | None = None, base: dict | None = None, command: list[str] | None = None,
           extra: dict | None = None) -> dict[str, Any]:
    """The fleet document. Pure.

    The set's verdict: a value that must match (a `fail` difference) and differs fails the odd nodes, those
    outside the largest group; where all nodes tie, the nodes that pass on their own vote; where they tie too,
    no node can be blamed and the fleet fails as a whole: the nodes of the tie pass no more (the banner, the
    exit code and --min-nodes say so), and none goes to --exclude."""
    docs = {r.node: r.doc for r in results if r.state == "answered"}
    order = [r.node for r in results]
    tool = (extra or {}).get("rocmkit")  # the rocmkit running the fleet: what a node's fix line installs
    findings: list[dict[str, Any]] = []
    for r in results:
        ref, ref_name = baseline_for(r.node, base)
        findings += node_findings(r, deadline_s, ref, ref_name, tool)
    diffs = compare.differences(docs, tool)
    rows = compare.figure_rows(docs, tolerance)
    own = findings + [{**f, "area": "fleet"} for f in compare.figure_findings(rows, tolerance)]
    bad = {Status.FAIL, Status.WARN} if strict else {Status.FAIL}
    on_their_own = {n for f in own if f["status"] in bad for n in f["nodes"]}
    voters = set(docs) - on_their_own
    fleet_findings = []
    for d in diffs:
        odd = d.odd or compare.odd_among(d, voters)
        everyone = sorted(n for _, ns in d.groups for n in ns)
        fleet_findings.append({**d.to_json(), "area": "fleet", "odd_nodes": odd, "nodes": odd or everyone,
                               "blames": bool(odd), "evidence": {"values": d.to_json()["values"]}})
    findings = own + fleet_findings
    failing = sorted({n for f in findings if f["status"] in bad for n in f["nodes"]}, key=order.index)
    blamed = [n for n in failing if any(f["status"] in bad and f.get("blames", True) and n in f["nodes"]
                                        for f in findings)]
    passing = [n for n in order if n not in failing]
    # a difference without a majority fails the fleet as a whole; a node Slurm holds for another job (busy,
    # reserved) fails alone and is not to blame for it (not excluded)
    unblamed = [f for f in findings if f["status"] in bad and not f.get("blames", True)
                and f["id"].startswith("fleet.differs.")]
    taken = [n for n in failing if n not in blamed and not any(n in f["nodes"] for f in unblamed)]
    why = []
    if unblamed:
        why.append("no majority: " + "; ".join(f["title"] for f in unblamed))
    unavailable = [r.node for r in results if r.state == "unavailable"]
    if len(unavailable) == len(results):  # Slurm lets no node run: the environment, not a check, is missing
        code = 3
        why.insert(0, "Slurm lets none of the nodes run a job now, so no node was checked")
    elif min_nodes is not None:
        code = 0 if len(passing) >= min_nodes else 1
        if code:
            why.insert(0, f"{len(passing)} of {len(results)} node(s) pass, fewer than --min-nodes {min_nodes}")
    elif not failing:
        code = 0
    elif not unblamed and all(r.state in ("deadline", "no answer") for r in results if r.node in failing):
        code = 124  # the only trouble is nodes that did not answer in time
    else:
        code = 1
    # --exclude: the nodes with a fault of their own or outvoted; never every node (nothing would be left to run)
    exclude = blamed if blamed and len(blamed) < len(results) else []
    no_exclude = None if exclude or not failing else (
        "every node fails on its own: none would be left" if len(blamed) == len(results)
        else "no node is to blame alone: the nodes disagree with no majority" if unblamed
        else f"the failing nodes are taken by Slurm for other work ({', '.join(taken)}), not broken")
    grid = {r.node: _cells(r, findings, rows, fleet_findings) for r in results}
    grid_ids = sorted({c for cells in grid.values() for c in cells}, key=_column)
    nodes = [{**r.to_json(), "verdict": Status.FAIL if r.node in failing else Status.PASS,
              "summary": (r.doc or {}).get("summary"), "doctor": r.doc} for r in results]
    counts = {s: sum(1 for f in findings if f["status"] == s) for s in Status}
    return document("fleet", {
        "level": level, "strict": strict, "tolerance": tolerance, "deadline_s": deadline_s, "min_nodes": min_nodes,
        "command": command, **(extra or {}),
        "nodes": nodes, "checks": grid_ids, "grid": grid,
        "differences": [{**d.to_json(), "odd_nodes": f["odd_nodes"]} for d, f in zip(diffs, fleet_findings)],
        "figures": [r.to_json() for r in rows],
        "findings": [f for f in findings if f["status"] in (Status.FAIL, Status.WARN)],
        "passing_nodes": passing, "failing_nodes": failing,
        # plain names, comma-separated: `--exclude=$(cat exclude.txt)` takes them unquoted (no [ ] for the shell
        # to glob), and so does every Slurm version
        "exclude": f"--exclude={','.join(exclude)}" if exclude else None, "exclude_nodes": exclude,
        "exclude_short": compress(exclude) if exclude else None, "no_exclude": no_exclude,
        "unavailable_nodes": unavailable,
        "verdict": Status.PASS if code == 0 else Status.FAIL, "why": why,
        "summary": {"nodes": len(results), "answered": len(docs), "passing": len(passing), "failing": len(failing),
                    **counts},
        "exit_code": code,
    })


WORSE = {Status.FAIL: 3, Status.WARN: 2, Status.PASS: 1, Status.SKIP: 0}


def _worst(statuses) -> str:
    return max(statuses, key=WORSE.__getitem__, default=Status.PASS)


def _cells(r: NodeResult, findings: list[dict], rows: list[compare.FigureRow], diffs: list[dict]) -> dict[str, str]:
    """A node's row of the grid: its own findings, `fleet.same` (whether it is set up as the others: the worst
    difference it is part of), and per probe figure whether it keeps up with the fleet's median."""
    cells = {f["id"]: f["status"] for f in findings if f["nodes"] == [r.node]
             and not f["id"].startswith("fleet.differs.")}  # those are fleet.same's
    if r.state == "answered":
        cells["fleet.same"] = _worst([d["status"] for d in diffs if r.node in d["nodes"]])
        for row in rows:
            if row.node == r.node:
                fid = f"fleet.median.{row.figure.removeprefix('probe.')}"
                cells[fid] = _worst([cells.get(fid, Status.PASS), row.status])
    return cells


def _column(check: str) -> tuple[int, str]:
    """The grid's columns: the doctor's checks, then the baseline's, the probes', the fleet's own."""
    order = ("baseline.", "probe.", "fleet.")
    return next((i + 1 for i, p in enumerate(order) if check.startswith(p)), 0), check


def write_outputs(doc: dict, out_dir: Path) -> list[Path]:
    """fleet.json, fleet.html, passing_nodes.txt, failing_nodes.txt (one node a line) and exclude.txt (the nodes
    to leave out, comma-separated on one line, as `sbatch --exclude=$(cat exclude.txt)` takes them; or empty)."""
    from ..fileio import write_atomic
    from .html import render

    out_dir.mkdir(parents=True, exist_ok=True)
    written = [write_atomic(out_dir / "fleet.json", dumps(doc)),
               write_atomic(out_dir / "fleet.html", render(doc)),
               write_atomic(out_dir / "passing_nodes.txt", "".join(f"{n}\n" for n in doc["passing_nodes"])),
               write_atomic(out_dir / "failing_nodes.txt", "".join(f"{n}\n" for n in doc["failing_nodes"])),
               write_atomic(out_dir / "exclude.txt", f"{','.join(doc['exclude_nodes'])}\n" if doc["exclude"] else "")]
    return written


def text(doc: dict, out_dir: Path | None) -> str:
    """What a person reads on the terminal: one line a node, the differences, the figures far below, what next."""
    lines = [f"rocmkit doctor --fleet — {doc['summary']['nodes']} node(s), level {doc['level']}"]
    width = max([len(n["node"]) for n in doc["nodes"]] + [4])
    for n in doc["nodes"]:
        mine = [f for f in doc["findings"] if n["node"] in f["nodes"]]
        fails = [f["id"] for f in mine if f["status"] == Status.FAIL]
        warns = [f["id"] for f in mine if f["status"] == Status.WARN]
        state = n.get("slurm") or n["state"] if n["state"] != "answered" else \
            ("FAIL" if n["verdict"] == Status.FAIL else "ok")
        shown = fails[:3] + [f"{w} (warn)" for w in warns[:max(0, 3 - len(fails))]]
        more = len(fails) + len(warns) - len(shown)
        detail = ", ".join(shown) + (f" and {more} more" if more else "")
        lines.append(f"  {n['node']:<{width}}  {state:<9} {detail}")
    unchecked = [n["node"] for n in doc["nodes"] if n["state"] != "answered"]
    if unchecked:  # why a node has no result (Slurm's word, a crash, a malformed document) is said here, whole
        lines += ["", "nodes not checked:"]
        for f in doc["findings"]:
            if f["status"] == Status.FAIL and len(f["nodes"]) == 1 and f["nodes"][0] in unchecked:
                lines += [f"  FAIL  {f['title']}", f"        fix: {f['fix']}"]
    if doc["differences"]:
        lines += ["", "differences between nodes:"]
        for d in doc["differences"]:
            lines.append(f"  {d['status'].upper():4}  {d['title']}" + ("" if d["odd_nodes"] else " (no majority)"))
            if d["status"] == Status.FAIL:
                lines.append(f"        fix: {d['fix']}")
    low = [f for f in doc["findings"] if f["id"].startswith("fleet.median.")]
    if low:
        lines += ["", f"probe figures below the fleet's median (tolerance {doc['tolerance']:.0%}):"]
        lines += [f"  {f['status'].upper():4}  {f['title']}" for f in low]
    lines.append("")
    s = doc["summary"]
    lines.append(f"fleet: {s['passing']} of {s['nodes']} node(s) pass"
                 + (f"; failing: {' '.join(doc['failing_nodes'])}" if doc["failing_nodes"] else ""))
    lines += [f"{'fleet FAILS' if doc['exit_code'] else 'note'}: {why}" for why in doc.get("why") or ()]
    if doc["exclude"]:
        file = f"{out_dir / 'exclude.txt'}" if out_dir is not None else "exclude.txt"
        lines.append(f"next: sbatch {doc['exclude']} ... (or srun --exclude=$(cat {file}) ...)")
    elif doc["failing_nodes"] and "taken by Slurm" in (doc.get("no_exclude") or ""):
        lines.append(f"next: nothing to exclude ({doc['no_exclude']}); run it again when they are free, or inside "
                     "the job's own allocation")
    elif doc["failing_nodes"]:
        lines.append(f"next: nothing to exclude ({doc.get('no_exclude')}); fix the nodes or make them agree (the "
                     "fixes above), then run it again")
    if out_dir is not None:
        lines.append(f"report: {out_dir / 'fleet.html'} (and fleet.json, passing_nodes.txt, failing_nodes.txt, "
                     "exclude.txt)")
    return "\n".join(lines) + "\n"
