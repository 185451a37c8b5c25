"""The stall report (`rocmkit.stall-report/v1`): where every process of a run stood, taken within a budget
(BUDGET_S whatever happens) and without stopping anything. `take` reads the world; the rest is pure.

It holds each process's role, state, CPU time and use over the report's own sample, rank and GPU memory, what
its stack waits in, the kernel-log faults since the run began (the doctor's patterns), and the verdict. The full
stacks go beside it: `stacks.txt` to read, `stacks.json` as py-spy gave them."""

from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path

from ..fileio import write_atomic
from ..output import document, dumps
from . import flightrec, stacks, tree
from .frdump import VAR as FR_VAR
from .verdict import judge
from .waits import process_wait

BUDGET_S = 30.0  # the whole report, whatever the processes do: a hung run must not hang its reporter
MIN_SAMPLE_S = 1.0  # the least time between the two CPU readings that tell busy from waiting
WORKERS = 8  # py-spy dumps at once (each is one process reading another's memory; most time is symbol loading)


def take(pids: list[int], *, out_dir: Path | None, since: float | None = None, budget_s: float = BUDGET_S,
         label: str = "") -> dict:
    """The report on pids and their descendants. `since`: the run's start (time.monotonic()), for the kernel
    log; `out_dir`: where the full stacks go (None: nowhere)."""
    started = time.monotonic()
    deadline = started + budget_s
    notes: list[str] = []
    procs = tree.with_descendants(pids)
    recs = {p.pid: r for p in procs if (r := tree.record(p)) is not None}
    by_pid = {p.pid: p for p in procs}
    py_spy, missing = stacks.find_py_spy()
    if not py_spy:
        notes.append(f"no stacks: {missing}")
    elif (why := stacks.ptrace_note()) is not None:
        notes.append(why)
    targets = [r for r in recs.values() if r["python"] and r["state"] != "zombie"] if py_spy else []
    if recs and not any(r["python"] for r in recs.values()):
        notes.append("no Python process in the tree: no stacks to take")
    dumps_by_pid: dict[int, stacks.Dump] = {}
    fr_dirs: dict[tuple, dict] = {}  # each folder the job's processes name: where it is from here, who may answer
    for p in procs:
        if p.pid in recs and (named := tree.env_value(p, FR_VAR)) and (seen := tree.seen_folder(p.pid, named)):
            f = fr_dirs.setdefault(seen[0], {"path": seen[1], "named": named, "pids": {}})
            f["pids"][seen[2]] = p.pid  # its pid in its namespace (the dump's name) -> here
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        fr = pool.submit(collective_record, fr_dirs, deadline - 2.0) if fr_dirs else None
        gpu = pool.submit(tree.gpu_memory, set(recs))
        futures = {pool.submit(stacks.dump, py_spy, r["pid"], stopped=r["state"] in ("stopped", "tracing-stop"),
                               deadline=deadline - 1.0): r["pid"] for r in targets}
        done, _ = wait([*futures, gpu, *([fr] if fr else [])], timeout=max(0.0, deadline - time.monotonic()))
        for f, pid in futures.items():
            dumps_by_pid[pid] = f.result() if f in done else stacks.Dump([], False, "no time left in the report's budget")
        held, gpu_source = gpu.result() if gpu in done else ({}, "")
        folders = [f["named"] for f in fr_dirs.values()]
        record = (fr.result() if fr in done else {"groups": [], "lines": [], "folders": folders,
                                                   "note": "no time left in the report's budget"}) if fr else {
            "groups": [], "lines": [], "folders": [],
            "note": f"not kept: no process of the job runs rocmkit's dumper ({FR_VAR} unset)"}
    time.sleep(max(0.0, min(MIN_SAMPLE_S - (time.monotonic() - started), deadline - time.monotonic())))
    for pid, r in recs.items():
        tree.cpu_since(r, by_pid[pid])
        if pid in held:
            r["gpu_mib"] = held[pid]
        d = dumps_by_pid.get(pid)
        if d is not None:
            if d.threads:
                w, thread = process_wait(d.threads)
                r["wait"] = {"kind": w.kind, "at": w.at, "caller": w.caller, "thread": thread}
            r["stack"] = "native + Python" if d.native else ("Python" if d.threads else "none")
            if d.note:
                r["note"] = d.note
        elif not r["python"]:
            r["stack"], r["note"] = "none", "not a Python process"
    kernel = kernel_faults(since)
    doc = document("stall-report", {
        "label": label,
        "took_s": round(time.monotonic() - started, 1),
        "budget_s": budget_s,
        "tool": py_spy,
        "verdict": judge(list(recs.values()), record),
        "flight_recorder": record,
        "processes": list(recs.values()),
        "gpu_memory_source": gpu_source or None,
        "kernel_log": kernel,
        "notes": notes,
        "files": {},
    })
    if out_dir is not None:
        out_dir.mkdir(parents=True, exist_ok=True)
        headers = {pid: f"pid {pid} {recs[pid]['role']} [{recs[pid]['state']}]: {recs[pid]['cmdline'][:200]}"
                   for pid in dumps_by_pid}
        stacks.write_text(dumps_by_pid, out_dir / "stacks.txt", headers)
        write_atomic(out_dir / "stacks.json", json.dumps({str(k): v.threads for k, v in dumps_by_pid.items()}))
        doc["files"] = {"stacks": str(out_dir / "stacks.txt"), "stacks_json": str(out_dir / "stacks.json"),
                        "report": str(out_dir / "report.json")}
        write_atomic(out_dir / "report.json", dumps(doc))
    return doc


def collective_record(folders: dict[tuple, dict], deadline: float) -> dict:
    """The flight recorder's dumps of the job's ranks, asked for now in each folder the job's processes name
    (frdump.py), and what they say (flightrec.analyse). A dump named by a container's own pid is renamed to the
    pid seen here."""
    dumps: dict = {}
    notes: list[str] = []
    for f in folders.values():
        path = Path(f["path"])
        try:
            asked = flightrec.request(path, deadline, expected=len(f["pids"]))
        except OSError as exc:
            notes.append(f"{f['named']}: cannot ask for a dump ({exc.strerror or exc})")
            continue
        found, bad = flightrec.read(path, since=asked)
        dumps.update({(f["pids"].get(pid, pid), rank): d for (pid, rank), d in found.items()})
        notes += bad
    record = {**flightrec.analyse(dumps), "folders": [f["named"] for f in folders.values()], "dumps": len(dumps),
              "notes": notes}
    if not dumps:
        record["note"] = ("no rank answered the dump request: no torch.distributed process group in the job, a "
                          "backend without a recorder (gloo before torch 2.8), or every rank held in native code")
    elif not record["groups"]:
        record["note"] = f"{len(dumps)} rank(s) dumped and no collective is pending in their record"
    return record


def kernel_records(since: float | None) -> tuple[list | None, str | None]:
    """The kernel log's records written since `since` (time.monotonic(), the clock the kernel stamps its records
    with), or since boot; (None, why) where the log cannot be read (a container, dmesg_restrict without root)."""
    from ..host.facts.kernlog import read_live

    log = read_live()
    if log.text is None:
        return None, log.error
    return [r for r in log.records() if since is None or r.usec >= int(since * 1e6)], None


def faults_of(records: list) -> list[dict]:
    """The doctor's kernel-log patterns over these records: each fault's id, title, what to do, count, lines."""
    from ..host.checks.kernel_log import scan
    from ..host.checks.kernel_patterns import PATTERNS

    known = {p.id: p for p in PATTERNS}
    return [{"id": pid, "title": known[pid].title if pid in known else pid,
             "fix": known[pid].fix if pid in known else None,
             "status": known[pid].status.value if pid in known else None, "count": len(incidents),
             "lines": [r.line() for r in incidents[0].lines[:10]]} for pid, incidents in scan(records).items()]


def kernel_faults(since: float | None) -> dict:
    records, error = kernel_records(since)
    if records is None:
        return {"read": False, "error": error, "faults": []}
    return {"read": True, "records": len(records), "faults": faults_of(records)}


# ---- what a person reads

def lines(doc: dict) -> list[str]:
    """The report as short lines: the verdict, then one line per process of the job."""
    v = doc["verdict"]
    vl = v.get("lines") or [v["summary"]]
    out = [f"stall report ({doc['took_s']} s): {vl[0]}"] + [f"  {line}" for line in vl[1:]]
    for p in doc["processes"]:
        w = p.get("wait") or {}
        where = f"{w['kind']} at {w.get('caller') or w['at']}" if w else p.get("note", "")
        rank = f" rank {p['rank']}" if p.get("rank") is not None else ""
        gpu = f", GPU {p['gpu_mib']:.0f} MiB" if p.get("gpu_mib") is not None else ""
        out.append(f"  pid {p['pid']:>7} {p['role']}{rank} [{p['state']}, {p.get('cpu_pct', '?')} % CPU, "
                   f"{p['cpu_s']} s CPU{gpu}]: {where}")
    k = doc["kernel_log"]
    if not k["read"]:
        out.append(f"  kernel log not read: {k['error']}")
    for f in k["faults"]:
        out.append(f"  kernel log: {f['title']} ({f['count']}x): {f['lines'][0]}")
    out += [f"  note: {n}" for n in doc["notes"]]
    if doc["files"]:
        out.append(f"  full stacks: {doc['files']['stacks']}")
    return out


def markdown(doc: dict) -> list[str]:
    """The certificate's section."""
    v = doc["verdict"]
    vl = v.get("lines") or [v["summary"]]
    out = ["", "## Where the processes stood (stall report)", "", f"**{vl[0]}**", "",
           *[f"- {line}" for line in vl[1:]], "",
           "| pid | role | rank | state | CPU % | waits in | at |", "|---|---|---|---|---|---|---|"]
    for p in doc["processes"]:
        w = p.get("wait") or {}
        out.append(f"| {p['pid']} | {p['role']} | {p.get('rank') or ''} | {p['state']} | {p.get('cpu_pct', '')} | "
                   f"{w.get('kind') or p.get('note', '')} | {(w.get('caller') or w.get('at') or '').replace('|', '/')} |")
    for f in doc["kernel_log"]["faults"]:
        out.append(f"- kernel log: {f['title']} ({f['count']}x): `{f['lines'][0]}`")
    out += [f"- note: {n}" for n in doc["notes"]]
    if doc["files"]:
        out.append(f"- full stacks: `{doc['files']['stacks']}`")
    return out
