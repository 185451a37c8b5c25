"""The verdict of a stall report: who the job waits for, first, then one line per group of processes waiting in
the same place, then the run's plumbing folded into one line. Pure: it reads the report's process records
(report.py) and, where the job kept one, the flight recorder's analysis (flightrec.py).

Who is waited for, strongest evidence first:
1. a process of the job that is stopped (SIGSTOP, a debugger), frozen (the cgroup v2 freezer) or stuck in the
   kernel (state D): it cannot answer anyone;
2. the collective layer's own record: a rank that never reached the collective its group's other ranks wait in,
   entered another op under that number, or could not even answer the dump;
3. a peer that is not where its peers are: ranks of one role wait in a collective (or spin in a GPU stream
   synchronize, where a collective kernel that never ends keeps NCCL's host thread busy) and one rank of that
   role is elsewhere. This is the cgroup-freezer case: every process sleeps (state S), the waiting rank burns a
   CPU, the frozen one uses none;
4. the one process of the job that is running (busy on a CPU, or not in any wait) while the others wait.
Otherwise no one is named: the waits are listed and the reader decides (a chain through sockets and queues
does not say on its own which end is stuck)."""

from __future__ import annotations

import re

from .waits import BLOCKED, INFRA, KIND_TEXT

STUCK_STATES = {"stopped": "stopped (SIGSTOP or a debugger): it runs nothing and answers no one",
                "tracing-stop": "stopped under a tracer: it runs nothing and answers no one",
                "disk-sleep": "in uninterruptible sleep (state D) in the kernel: a driver or device call that "
                              "does not return",
                "frozen": "frozen by the cgroup v2 freezer (its cgroup's cgroup.freeze is 1; the kernel shows it "
                          "sleeping): it runs nothing and answers no one"}
BUSY_PCT = 50.0  # CPU use over the report's sample that reads as "working", not waiting
AT_COLLECTIVE = ("collective", "stream sync")
# The run's plumbing: processes that wait by design for the workers (drivers, task runners, data and request
# routers, launchers). Their waits say the run is stuck, not where: one line for all of them.
PLUMBING = re.compile(r"^(?:verl driver|TRL launcher|accelerate launcher|Ray actor (?:TaskRunner\w*|TransferQueue\w*|"
                      r"\w*StorageUnit|RewardLoopWorker|GlobalRequestLoadBalancer|AgentLoopWorker\w*|DashboardAgent|"
                      r"RuntimeEnvAgent))$")


def name(p: dict) -> str:
    """"rank 1 (pid 812, Ray actor WorkerDict)" or "pid 812 (TRL trainer)"."""
    rank = f"rank {p['rank']} " if p.get("rank") is not None else ""
    return f"{rank}(pid {p['pid']}, {p['role']})" if rank else f"pid {p['pid']} ({p['role']})"


def _job(procs: list[dict]) -> list[dict]:
    return [p for p in procs if p["role"] not in INFRA]


def _kind(p: dict) -> str:
    return (p.get("wait") or {}).get("kind") or ""


def _cpu(p: dict) -> float:
    return p.get("cpu_pct") or 0.0


def _named(p: dict, why: str, **extra) -> dict:
    return {"pid": p["pid"], "role": p["role"], "rank": p.get("rank"), "why": why, **extra}


def _from_record(job: list[dict], record: dict | None) -> list[dict]:
    """Rule 2: the flight recorder's culprits, matched to the job's processes (by pid, or for a rank that left
    no record, by its RANK among the processes that did not answer)."""
    from .flightrec import culprits

    if not record or not record.get("groups"):
        return []
    by_pid = {p["pid"]: p for p in job}
    answered = _in_collective(record)
    out = []
    for c in culprits(record):
        # by pid; else by RANK (a rank that left no record, or a container's own pid namespace), preferring a
        # process that is not itself waiting in a collective
        same_rank = sorted((q for q in job if q.get("rank") == str(c["rank"]) and q["pid"] not in answered
                            and q.get("python")), key=lambda q: _kind(q) in AT_COLLECTIVE)
        p = by_pid.get(c["pid"]) or (same_rank[0] if same_rank else None)
        where = f"; it is in {_where(p)}" if p else ""
        entry = _named(p, c["why"] + where) if p else {"pid": None, "role": "?", "rank": str(c["rank"]),
                                                         "why": c["why"] + " (no process of this node has that rank)"}
        out.append({**entry, "source": "flight recorder"})
    return out


def _in_collective(record: dict | None) -> set[int]:
    """The pids the flight recorder shows waiting in a collective."""
    return {int(pid) for g in (record or {}).get("groups", []) for pid in g["waiting"].values()}


def _stragglers(job: list[dict], waiting: list[dict]) -> list[dict]:
    """Rule 3: a rank elsewhere while its role's other ranks wait in a collective or spin in a stream sync."""
    peers = [p for p in waiting if _kind(p) == "collective" or (_kind(p) == "stream sync" and _cpu(p) >= BUSY_PCT)]
    roles = {p["role"] for p in peers}
    found = [p for p in job if p["role"] in roles and _kind(p) not in AT_COLLECTIVE and p not in peers]
    out = []
    for p in found:
        mates = [q for q in peers if q["role"] == p["role"]]
        how = ("its peers wait in a collective" if all(_kind(q) == "collective" for q in mates)
               else f"its peers spin in a collective ({', '.join(f'{_cpu(q):.0f} %' for q in mates)} CPU in "
                    f"{', '.join(sorted({KIND_TEXT[_kind(q)] for q in mates}))})")
        idle = f" idle ({_cpu(p):.0f} % CPU)" if _cpu(p) < BUSY_PCT else f" busy ({_cpu(p):.0f} % CPU)"
        out.append(_named(p, f"{how} and it is not in one: it is{idle} in {_where(p)}"))
    return out


def judge(procs: list[dict], record: dict | None = None) -> dict:
    """The verdict over the report's process records; `record`: flightrec.analyse's result, when the job's ranks
    dumped their flight recorders."""
    job = _job(procs)
    waiting = [p for p in job if _kind(p) in BLOCKED and p["state"] not in STUCK_STATES]
    stuck = [p for p in job if p["state"] in STUCK_STATES]
    waits_for = [_named(p, STUCK_STATES[p["state"]] + (f"; it is in {_where(p)}" if p.get("wait") else ""))
                 for p in stuck]
    if not waits_for:
        waits_for = _from_record(job, record)
    if not waits_for:
        waits_for = _stragglers(job, waiting)
    if not waits_for:
        busy = [p for p in job if p not in waiting and (_cpu(p) >= BUSY_PCT or _kind(p) == "running")]
        if waiting and len(busy) == 1:
            p = busy[0]
            waits_for = [_named(p, f"the one process of the job at work ({_cpu(p):.0f} % CPU) while the others "
                                   f"wait: {_where(p)}")]
    # A rank the flight recorder shows waiting in a collective is waiting, however busy: NCCL and RCCL spin a core
    # while they wait (seen on two H100s: rank 0 at 101 % CPU in all_reduce #44 that rank 1 never reached).
    in_collective = _in_collective(record)
    busy = [p for p in job if p not in waiting and p["state"] not in STUCK_STATES and p["pid"] not in in_collective
            and (_cpu(p) >= BUSY_PCT or _kind(p) == "running")]
    recorded = any(w.get("source") == "flight recorder" for w in waits_for)
    health = ("stuck" if stuck else "waiting" if recorded else "working" if busy
              else "waiting" if waiting or in_collective else "idle" if job else "empty")
    out_lines = verdict_lines(procs, job, waiting, waits_for, record)
    if health == "working":
        at_work = "; ".join(f"{name(p)} ({_cpu(p):.0f} % CPU)" for p in busy[:6])
        out_lines = [f"at work: {at_work}"] + (out_lines if waiting else [])
    return {"health": health,
            "waiting": [{"pid": p["pid"], "role": p["role"], "rank": p.get("rank"), "kind": p["wait"]["kind"],
                         "at": p["wait"]["at"], "caller": p["wait"].get("caller", "")} for p in waiting],
            "waits_for": waits_for, "lines": out_lines, "summary": ". ".join(out_lines)}


def _where(p: dict) -> str:
    w = p.get("wait") or {}
    if not w.get("kind") or w["kind"] == "unknown":
        if not p.get("python"):
            return "a place its stack does not show"
        at = w.get("at") or ""
        caller = w.get("caller") or ""
        if at or caller:  # a native frame rocmkit has no kind for: say which, and who called it
            return f"a native call at {at}" + (f", called from {caller}" if caller and caller != at else "")
        return "a frame rocmkit cannot name"
    at = w.get("caller") or w.get("at")
    native = w.get("at") if w.get("caller") and w.get("at") != w.get("caller") else ""
    return (f"{KIND_TEXT.get(w['kind'], w['kind'])}" + (f" at {at}" if at else "")
            + (f" (innermost: {native})" if native else ""))


def _ranks(ps: list[dict]) -> str:
    ranks = sorted((p["rank"] for p in ps), key=lambda r: (len(str(r)), str(r)))
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)


def verdict_lines(procs: list[dict], job: list[dict], waiting: list[dict], waits_for: list[dict],
                  record: dict | None) -> list[str]:
    """What a person reads, culprit first: who the job waits for; the flight recorder's line per group; one line
    per group of waiting processes (same role, same kind, same frame); the plumbing and Ray's own in one line."""
    if not job:
        return ["no process of the job was found (only Ray's or rocmkit's own)"]
    out = [f"the job waits for {name(w) if w.get('pid') is not None else 'rank ' + str(w['rank'])}: {w['why']}"
           for w in waits_for]
    if record and record.get("groups"):
        out += [f"flight recorder: {line}" for line in record["lines"]]
    elif record and record.get("note") and any(p.get("rank") is not None or _kind(p) in AT_COLLECTIVE for p in job):
        out.append(f"flight recorder: {record['note']}; the verdict reads the stacks alone")
    named = {w.get("pid") for w in waits_for}
    if record and record.get("groups"):  # the record's line already says where its waiting ranks are
        named |= _in_collective(record)
    groups: dict[tuple, list[dict]] = {}
    folded = [p for p in procs if p["role"] in INFRA or (PLUMBING.match(p["role"]) and p["pid"] not in named)]
    for p in waiting:
        if p in folded or p["pid"] in named:
            continue
        w = p["wait"]
        groups.setdefault((p["role"], w["kind"], w.get("caller") or w["at"]), []).append(p)
    for (role, kind, at), ps in groups.items():
        ranked = all(p.get("rank") is not None for p in ps)
        who = (f"{_ranks(ps)} (pid {', '.join(str(p['pid']) for p in ps)}) of {role}" if ranked
               else f"pid {', '.join(str(p['pid']) for p in ps)} ({role})")
        out.append(f"{who} {'waits' if len(ps) == 1 else 'wait'} in {KIND_TEXT.get(kind, kind)}"
                   + (f" at {at}" if at else ""))
    if not waiting and not waits_for:
        out.append(f"no process of the job waits on another ({len(job)} looked at)")
    elif not waits_for:
        out.insert(0, f"{len(waiting)} process(es) wait and the stacks show no single process they wait for")
    idle = [p for p in job if p not in waiting and p not in folded and p["pid"] not in named
            and _cpu(p) < BUSY_PCT and _kind(p) != "running"]
    rest = folded + idle
    if rest:
        counts: dict[str, int] = {}
        for p in rest:
            counts[p["role"]] = counts.get(p["role"], 0) + 1
        out.append(f"and {len(rest)} more process(es) of the run's plumbing wait or idle by design: "
                   + ", ".join(f"{n} {r}" if n > 1 else r for r, n in counts.items()))
    return out
