"""The collective layer's own record of a hang: PyTorch's flight recorder, a per-process ring buffer of the
collectives each rank issued (op, sequence id per process group, sizes, state), kept by ProcessGroupNCCL (also
over RCCL on ROCm) and, since torch 2.8, by ProcessGroupGloo (TORCH_FR_BUFFER_SIZE).

A dump is torch's own pickle (`torch._C._distributed_c10d._dump_fr_trace()` / `_dump_nccl_trace()`; read by
torch/distributed/flight_recorder/ too): {"version", "pg_config": {name: {"desc", "ranks"}}, "pg_status",
"entries": [{"process_group": (name, desc), "collective_seq_id", "profiling_name" ("gloo:all_reduce",
"nccl:all_gather"), "input_sizes", "state" (scheduled/started/completed), "retired", "is_p2p", "frames"}, ...]}.
rocmkit/stall/frdump.py writes one per process on request, named `fr-pid<PID>-rank<RANK>.pkl`.

`request` and `read` touch files; `analyse` is pure: per process group, the first collective some ranks wait in
and the ranks that never reached it, entered another op under the same number, or left no record."""

from __future__ import annotations

import ast
import pickle
import re
import time
from pathlib import Path

REQUEST = "request"  # the file whose new mtime asks every process's dumper for a dump
NAME = re.compile(r"^fr-pid(\d+)-rank(\d+)\.pkl$")
ANSWER_S = 5.0  # how long the report waits for the dumps: a dumper polls every 0.5 s and a dump takes ms
QUIET_S = 1.5  # no new dump for this long after the first: the others are not coming (not ranks, or held)


def request(folder: Path, deadline: float, expected: int = 0) -> float:
    """Ask the dumpers watching `folder` for a dump (touch REQUEST) and wait for their answers: until `expected`
    came, or none came for QUIET_S after the first, or ANSWER_S, or `deadline` (time.monotonic()). Returns the
    request's time (time.time())."""
    folder.mkdir(parents=True, exist_ok=True)
    asked = time.time()
    (folder / REQUEST).write_text(str(asked))
    end = min(deadline, time.monotonic() + ANSWER_S)
    seen, quiet_since = -1, time.monotonic()
    while time.monotonic() < end:
        n = sum(1 for p in folder.glob("fr-pid*.pkl") if p.stat().st_mtime >= asked - 1)
        if expected and n >= expected:
            break
        if n != seen:
            seen, quiet_since = n, time.monotonic()
        elif n and time.monotonic() - quiet_since >= QUIET_S:
            break
        time.sleep(0.2)
    return asked


def read(folder: Path, since: float = 0.0) -> tuple[dict[tuple[int, int], dict], list[str]]:
    """The dumps in `folder` written at or after `since` (time.time()), by (pid, rank); and notes on files that
    could not be read."""
    dumps, notes = {}, []
    for path in sorted(folder.glob("fr-pid*.pkl")):
        m = NAME.match(path.name)
        if not m or path.stat().st_mtime < since - 1:
            continue
        try:
            dumps[(int(m.group(1)), int(m.group(2)))] = pickle.loads(path.read_bytes())
        except Exception as exc:  # noqa: BLE001 - a torn or foreign file is a note, not a failed report
            notes.append(f"{path.name}: not a flight-recorder dump ({type(exc).__name__})")
    return dumps, notes


def _op(e: dict) -> str:
    return str(e.get("profiling_name") or "?").split(":", 1)[-1]


def _done(e: dict) -> bool:
    # NCCL marks completion in state; gloo leaves "scheduled" and retires the entry once its work is done
    return e.get("state") == "completed" or bool(e.get("retired"))


def _ranks(cfg: dict) -> list[int] | None:
    raw = cfg.get("ranks")
    try:
        ranks = ast.literal_eval(raw) if isinstance(raw, str) else raw
        return sorted(int(r) for r in ranks)
    except (ValueError, SyntaxError, TypeError):
        return None


def _config(cfg: dict, name: str, desc: str) -> tuple[str, tuple[int, ...]]:
    """The group's key in a dump's pg_config and its ranks: by its name, else its description; gloo's default
    group is registered under "" while its entries say ("0", "default_pg"), so a lone entry stands for it."""
    key = name if name in cfg else next((k for k, c in cfg.items() if desc and c.get("desc") == desc), None)
    if key is None and len(cfg) == 1:
        key = next(iter(cfg))
    return (key, tuple(_ranks(cfg[key]) or ())) if key is not None else (name, ())


def _python_frame(e: dict) -> str:
    """The caller of the collective: the innermost frame outside torch's own files."""
    for f in e.get("frames") or []:
        path = str(f.get("filename") or "")
        if "/torch/" not in path:
            return f"{f.get('name')} ({path.rsplit('/', 1)[-1]}:{f.get('line')})"
    return ""


def analyse(dumps: dict[tuple[int, int], dict]) -> dict:
    """Per process group: where its ranks stand, and who holds the others up. {"groups": [...], "ranks": [...]}
    where each group has "name", "desc", "ranks", "waiting" (rank -> pid of the ranks waiting in "op" "#seq"),
    "behind" (ranks whose last collective comes before seq), "mismatch" (ranks that entered another op as seq),
    "missing" (members with no dump); and "lines", what a person reads.

    A job may hold several worlds (verl's trainer ranks and each vLLM engine's own): a group is its name with its
    members, so rank 0 of one world is never taken for rank 0 of another."""
    groups: dict[tuple, dict] = {}
    for (pid, rank), d in sorted(dumps.items(), key=lambda x: (x[0][1], x[0][0])):
        cfg = d.get("pg_config") or {}
        for key, c in cfg.items():  # every group this rank belongs to, whether it issued a collective there or not
            g = groups.setdefault((key, tuple(_ranks(c) or ())),
                                  {"desc": c.get("desc") or "", "present": {}, "seen": {}})
            g["present"].setdefault(rank, pid)
        for e in d.get("entries") or []:
            if e.get("is_p2p"):
                continue
            name, desc = (list(e.get("process_group") or ("?", "?")) + ["", ""])[:2]
            g = groups.setdefault(_config(cfg, name, desc), {"desc": "", "present": {}, "seen": {}})
            g["name"], g["desc"] = name, desc or g["desc"]
            g["present"].setdefault(rank, pid)
            if g["present"][rank] == pid:
                g["seen"].setdefault(rank, []).append(e)
    out = []
    for (key, members), g in groups.items():
        seq_of = lambda e: e.get("collective_seq_id") or 0  # noqa: E731
        pending = {r: min((e for e in es if not _done(e)), key=seq_of)
                   for r, es in g["seen"].items() if any(not _done(e) for e in es)}
        if not pending:
            continue
        seq = min(seq_of(e) for e in pending.values())
        first = next(e for e in pending.values() if seq_of(e) == seq)
        op = _op(first)
        last = {r: max(g["seen"][r], key=seq_of) if g["seen"].get(r) else None for r in g["present"]}
        waiting = sorted(r for r, e in pending.items() if seq_of(e) == seq and _op(e) == op)
        mismatch = {r: e for r, e in pending.items() if seq_of(e) == seq and _op(e) != op}
        behind = {r: e for r, e in last.items() if e is None or seq_of(e) < seq}
        diverged = None if behind or mismatch else _divergence(g["seen"], seq_of)
        if diverged:  # every rank went past the collective where their ops parted: name that one instead
            seq, op, odd = diverged
            first = next(e for es in g["seen"].values() for e in es if seq_of(e) == seq and _op(e) == op)
            waiting = sorted(r for r, es in g["seen"].items() if r not in odd
                             and any(seq_of(e) == seq and _op(e) == op for e in es))
            mismatch = odd
        out.append({"name": g.get("name", key), "desc": g["desc"], "ranks": list(members or g["present"]),
                    "op": op, "seq": seq, "sizes": first.get("input_sizes"), "state": first.get("state"),
                    "waiting": {r: g["present"][r] for r in waiting},
                    "behind": {r: {"pid": g["present"][r], "last_op": _op(e) if e else "none",
                                   "last_seq": seq_of(e) if e else 0, "done": _done(e) if e else True}
                               for r, e in sorted(behind.items())},
                    "mismatch": {r: {"pid": g["present"][r], "op": _op(e), "frame": _python_frame(e)}
                                 for r, e in sorted(mismatch.items())},
                    "missing": [r for r in members if r not in g["present"]], "diverged": bool(diverged)})
    return {"groups": out, "ranks": sorted({r for _, r in dumps}), "lines": [group_line(g) for g in out]}


def _divergence(seen: dict[int, list[dict]], seq_of) -> tuple[int, str, dict[int, dict]] | None:
    """The first sequence number at which the ranks' records name different ops, the op most ranks entered there,
    and the ranks that entered another, each by its entry. NCCL and RCCL do not compare ops: a rank that skipped an
    all_reduce runs its next collective against its peers' all_reduce, both may complete, and only the numbering
    shows it (seen on two H200s: rank 1 skipped all_reduce #44 and entered _all_gather_base as #44). Where two
    ranks disagree with no majority, the one whose op at N is the other's op at N + 1 is the one that skipped."""
    by_rank = {r: {seq_of(e): e for e in es} for r, es in seen.items()}
    seqs = sorted({s for ops in by_rank.values() for s in ops})
    for s in seqs:
        at = {r: ops[s] for r, ops in by_rank.items() if s in ops}
        names = sorted({_op(e) for e in at.values()})
        if len(at) < 2 or len(names) < 2:
            continue
        counts = {n: sum(_op(e) == n for e in at.values()) for n in names}
        top = max(counts.values())
        majority = [n for n in names if counts[n] == top]
        if len(majority) > 1:  # a tie: the skipper's op at N is its peers' op at N + 1
            skipped = [r for r, e in at.items()
                       if any(_op(ops.get(s + 1, {})) == _op(e) for q, ops in by_rank.items() if q != r)]
            op = next((_op(e) for r, e in at.items() if r not in skipped), majority[0]) if skipped else majority[0]
        else:
            op = majority[0]
        return s, op, {r: e for r, e in at.items() if _op(e) != op}
    return None


def _ranks_text(ranks) -> str:
    ranks = sorted(ranks)
    return ("rank " if len(ranks) == 1 else "ranks ") + ", ".join(str(r) for r in ranks)


def _wait(ranks) -> str:
    return "waits" if len(ranks) == 1 else "wait"


def group_line(g: dict) -> str:
    """"ranks 0, 2 of group default_pg wait in all_reduce #2 ([[4]]); rank 1 never reached it (its last:
    all_gather #1, completed)"."""
    label = g["desc"] or g["name"]
    verb = "entered" if g.get("diverged") else _wait(g["waiting"]) + " in"
    text = f"{_ranks_text(g['waiting'])} of group {label} {verb} {g['op']} #{g['seq']}"
    if any(g.get("sizes") or []):  # NCCL records [[]] for an op it took no tensor sizes of: say nothing then
        text += f" (sizes {g['sizes']})"
    for r, b in g["behind"].items():
        text += (f"; rank {r} never reached it (its last: {b['last_op']} #{b['last_seq']}, "
                 f"{'completed' if b['done'] else 'not completed'})")
    for r, m in g["mismatch"].items():
        text += f"; rank {r} entered {m['op']} as #{g['seq']} instead: it skipped or reordered a collective"
    if g["missing"]:
        text += (f"; no record from {_ranks_text(g['missing'])} (its process did not answer the dump request: "
                 "stopped, or held in native code)")
    return text


def culprits(analysis: dict) -> list[dict]:
    """The ranks the record says the others wait for: {rank, pid (None when it left no record), group, why}."""
    out = []
    for g in analysis.get("groups", []):
        label = g["desc"] or g["name"]
        where = f"{g['op']} #{g['seq']} of group {label}"
        waiters = _ranks_text(g["waiting"])
        for r, b in g["behind"].items():
            out.append({"rank": r, "pid": b["pid"], "group": label,
                        "why": f"it never reached {where}, where {waiters} {_wait(g['waiting'])} (its last collective: "
                               f"{b['last_op']} #{b['last_seq']})"})
        verb = "entered" if g.get("diverged") else _wait(g["waiting"]) + " in"
        for r, m in g["mismatch"].items():
            out.append({"rank": r, "pid": m["pid"], "group": label,
                        "why": f"it entered {m['op']} as #{g['seq']} where {waiters} {verb} "
                               f"{g['op']} "
                               f"#{g['seq']}: it skipped or reordered a collective"
                               + (f" (called from {m['frame']})" if m["frame"] else "")})
        for r in g["missing"]:
            out.append({"rank": r, "pid": None, "group": label,
                        "why": f"it left no record while {waiters} {_wait(g['waiting'])} in {where}: its process "
                               "did not answer the dump request (stopped, or held in native code)"})
    return out
