"""The short verdict of a stall report: the processes that wait, what they wait in, and the process they all
wait for, when the evidence shows one. Pure: it reads the report's process records (report.py).

Who is waited for, strongest evidence first:
1. a process of the job that is stopped (SIGSTOP, a debugger) or stuck in the kernel (state D): it cannot
   answer anyone;
2. a peer that is not where its peers are: ranks of one role wait in a collective and one rank of that role
   is elsewhere (the straggler a collective waits for);
3. the one process of the job that is running (busy on a CPU, or not in any wait) while the others wait.
Otherwise no one is named: the waits are listed and the reader decides (a chain through sockets and queues
does not say on its own which end is stuck)."""

from __future__ import annotations

from .waits import BLOCKED, INFRA, KIND_TEXT

STUCK_STATES = {"stopped": "stopped (SIGSTOP or a debugger): it runs nothing and answers no one",
                "tracing-stop": "stopped under a tracer: it runs nothing and answers no one",
                "disk-sleep": "in uninterruptible sleep (state D) in the kernel: a driver or device call that "
                              "does not return"}
BUSY_PCT = 50.0  # CPU use over the report's sample that reads as "working", not waiting


def name(p: dict) -> str:
    """"rank 1 (pid 812, Ray actor WorkerDict)" or "pid 812 (TRL trainer)"."""
    rank = f"rank {p['rank']} " if p.get("rank") is not None else ""
    return f"{rank}(pid {p['pid']}, {p['role']})" if rank else f"pid {p['pid']} ({p['role']})"


def _job(procs: list[dict]) -> list[dict]:
    return [p for p in procs if p["role"] not in INFRA]


def judge(procs: list[dict]) -> dict:
    job = _job(procs)
    waiting = [p for p in job if (p.get("wait") or {}).get("kind") in BLOCKED and p["state"] not in STUCK_STATES]
    waits_for: list[dict] = []
    stuck = [p for p in job if p["state"] in STUCK_STATES]
    if stuck:
        waits_for = [{"pid": p["pid"], "role": p["role"], "rank": p.get("rank"), "why": STUCK_STATES[p["state"]]}
                     for p in stuck]
    else:
        in_collective = [p for p in waiting if p["wait"]["kind"] == "collective"]
        roles = {p["role"] for p in in_collective}
        stragglers = [p for p in job if p["role"] in roles and p not in in_collective]
        if in_collective and stragglers:
            waits_for = [{"pid": p["pid"], "role": p["role"], "rank": p.get("rank"),
                          "why": "its peers wait in a collective and it is not in one: it is in "
                                 + _where(p)} for p in stragglers]
        else:
            busy = [p for p in job if p not in waiting and ((p.get("cpu_pct") or 0) >= BUSY_PCT
                                                            or (p.get("wait") or {}).get("kind") == "running")]
            if waiting and len(busy) == 1:
                p = busy[0]
                waits_for = [{"pid": p["pid"], "role": p["role"], "rank": p.get("rank"),
                              "why": f"the one process of the job at work ({p.get('cpu_pct') or 0:.0f} % CPU) while "
                                     f"the others wait: {_where(p)}"}]
    busy = [p for p in job if p not in waiting and p["state"] not in STUCK_STATES
            and ((p.get("cpu_pct") or 0) >= BUSY_PCT or (p.get("wait") or {}).get("kind") == "running")]
    health = ("stuck" if stuck else "working" if busy else "waiting" if waiting else "idle" if job else "empty")
    text = summary(waiting, waits_for, job)
    if health == "working":
        at_work = "; ".join(f"{name(p)} ({p.get('cpu_pct') or 0:.0f} % CPU)" for p in busy[:6])
        text = f"at work: {at_work}" + (f". {text}" if waiting else "")
    return {"health": health,
            "waiting": [{"pid": p["pid"], "role": p["role"], "rank": p.get("rank"), "kind": p["wait"]["kind"],
                         "at": p["wait"]["at"], "caller": p["wait"].get("caller", "")} for p in waiting],
            "waits_for": waits_for, "summary": text}


def _where(p: dict) -> str:
    w = p.get("wait") or {}
    if not w.get("kind") or w["kind"] == "unknown":
        return "a place its stack does not show" if not p.get("python") else "a frame rocmkit cannot name"
    at = w.get("caller") or w.get("at")
    return f"{KIND_TEXT.get(w['kind'], w['kind'])}" + (f" at {at}" if at else "")


def summary(waiting: list[dict], waits_for: list[dict], job: list[dict]) -> str:
    if not job:
        return "no process of the job was found (only Ray's or rocmkit's own)"
    if not waiting and not waits_for:
        return f"no process of the job waits on another ({len(job)} looked at)"
    parts = []
    if waiting:
        parts.append(f"{len(waiting)} process(es) wait: " + "; ".join(
            f"{name(p)} in {KIND_TEXT.get(p['wait']['kind'], p['wait']['kind'])}"
            + (f" at {p['wait'].get('caller') or p['wait']['at']}" if p['wait'].get('caller') or p['wait']['at'] else "")
            for p in waiting[:6]) + ("; ..." if len(waiting) > 6 else ""))
    if waits_for:
        parts.append("they wait for " + "; ".join(f"{name(w)}, {w['why']}" for w in waits_for))
    else:
        parts.append("the stacks show no single process they wait for")
    return ". ".join(parts)
