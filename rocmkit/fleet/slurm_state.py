"""Slurm's own word about each node of the fleet, read before any node is asked: drained, down, not responding,
reserved, in maintenance, busy with another job, powered down, each with Slurm's reason.

srun cannot start a task on such a node: outside an allocation it waits for the node, and with --immediate gives
up with "Requested nodes are busy" for the whole step, so the nodes that could run lose their result too, and
the node Slurm has a word about is never named. Read first, those nodes are left out of the step and reported
with Slurm's state and reason; the others are checked. Parsing is pure (parse, verdict); reading runs
`scontrol -o show node` (and `squeue` for the jobs on a busy node), bounded, and says so when Slurm does not
answer (the fleet then goes on as before: srun has the last word).
"""

from __future__ import annotations

import re
import shutil
import subprocess
from typing import NamedTuple

from .nodes import compress, expand

TIMEOUT_S = 15  # a controller that does not answer scontrol in this long will not start a step either
# one line of `scontrol -o show node`: Key=value pairs, and a value may hold spaces (Reason=, OS=)
_KEY_RE = re.compile(r" (?=[A-Z][A-Za-z_]*=)")
_REASON_RE = re.compile(r"^(.*?)\s*\[([^@\]]+)@([^\]]+)\]\s*$")


class NodeState(NamedTuple):
    """A node as Slurm sees it: State=IDLE+DRAIN → base IDLE, flags {DRAIN}; the reason with who set it, when."""

    node: str
    state: str  # as Slurm writes it: IDLE+DRAIN, DOWN*+NOT_RESPONDING
    base: str
    flags: frozenset[str]
    reason: str | None = None
    reason_by: str | None = None
    reason_at: str | None = None
    jobs: tuple[str, ...] = ()  # the jobs running there (squeue), for a busy node
    reservation: str | None = None  # the active reservation holding it: "rk-x (for root until 2026-12-07T03:17)"


class Unavailable(NamedTuple):
    """Why a node is not asked: `kind` (drained, down, …), the sentence the report shows, and whether the node
    itself is to blame (down, drained: it goes to --exclude) or only taken now (busy, reserved: it does not)."""

    node: str
    kind: str
    text: str
    blames: bool


def parse(text: str) -> dict[str, NodeState]:
    """`scontrol -o show node` (one node a line) → each node's state. Pure."""
    out = {}
    for line in text.splitlines():
        if not line.startswith("NodeName="):
            continue
        fields = dict(part.split("=", 1) for part in _KEY_RE.split(line.strip()) if "=" in part)
        name, state = fields.get("NodeName", ""), fields.get("State", "UNKNOWN")
        words = state.split("+")
        base = words[0]
        flags = {w.upper() for w in words[1:]}
        if base.endswith("*"):  # the compact form of NOT_RESPONDING
            base = base.rstrip("*")
            flags.add("NOT_RESPONDING")
        base = {"DRAINED": "IDLE", "DRAINING": "ALLOCATED", "DRAIN": "IDLE"}.get(base.upper(), base.upper())
        if words[0].upper().startswith("DRAIN"):
            flags.add("DRAIN")
        reason = fields.get("Reason")
        by = at = None
        if reason and reason not in ("(null)", "none", "None"):
            m = _REASON_RE.match(reason)
            if m:
                reason, by, at = m.group(1).strip(), m.group(2), m.group(3)
        else:
            reason = None
        out[name] = NodeState(name, state, base, frozenset(flags), reason, by, at)
    return out


def reservations(text: str) -> dict[str, tuple[str, bool]]:
    """`scontrol -o show reservation` → node → (the active reservation that holds it, as said; whether it is a
    maintenance one). Slurm 22.05's node state does not say RESERVED for such a node, so this is where it shows.
    Pure."""
    out: dict[str, tuple[str, bool]] = {}
    for line in text.splitlines():
        if not line.startswith("ReservationName="):
            continue
        f = dict(part.split("=", 1) for part in _KEY_RE.split(line.strip()) if "=" in part)
        if f.get("State") != "ACTIVE" or not f.get("Nodes") or f["Nodes"] == "(null)":
            continue
        who = ", ".join(v for k in ("Users", "Accounts", "Groups") if (v := f.get(k)) and v != "(null)")
        said = f"{f['ReservationName']}" + (f", for {who}" if who else "") + \
            (f", until {f['EndTime']}" if f.get("EndTime") else "")
        try:
            nodes = expand(f["Nodes"])
        except Exception:  # noqa: BLE001 - Slurm's own list in a form this reader does not know: no node named
            continue
        for n in nodes:
            out[n] = (said, "MAINT" in f.get("Flags", "").split(","))
    return out


def _why(s: NodeState) -> str:
    if not s.reason:
        return ""
    return f" (Slurm's reason: {s.reason}" + (f", set by {s.reason_by} at {s.reason_at}" if s.reason_by else "") + ")"


def verdict(s: NodeState, *, in_allocation: bool, reservation: bool) -> Unavailable | None:
    """Whether srun can start the fleet's task on a node in state `s` now; None when it can. Inside an
    allocation the job's own nodes are allocated to it (not busy) and a reservation it runs in is its own;
    `reservation`: srun is given --reservation. Pure."""
    f, n = s.flags, s.node
    say = f"Slurm's state {s.state}"
    if s.base == "DOWN":
        return Unavailable(n, "down", f"{n} is down in Slurm{_why(s)}: {say}", True)
    if "NOT_RESPONDING" in f:
        return Unavailable(n, "not responding", f"{n} is not responding to Slurm (its slurmd){_why(s)}: {say}", True)
    if "FAIL" in f:
        return Unavailable(n, "failing", f"{n} is failing in Slurm{_why(s)}: {say}", True)
    if "DRAIN" in f:
        kind = "drained" if s.base in ("IDLE", "DOWN", "UNKNOWN") else "draining"
        return Unavailable(n, kind, f"{n} is {kind} in Slurm{_why(s)}: {say}", True)
    if s.base in ("FUTURE", "UNKNOWN", "ERROR") or "INVALID_REG" in f:
        return Unavailable(n, "not in service", f"{n} is not in service in Slurm{_why(s)}: {say}", True)
    if not in_allocation and not reservation and ({"RESERVED", "MAINTENANCE", "MAINT"} & f or s.reservation):
        kind = "in maintenance" if {"MAINTENANCE", "MAINT"} & f else "reserved"
        held = f" (reservation {s.reservation})" if s.reservation else ""
        return Unavailable(n, kind, f"{n} is {kind} in Slurm{held}{_why(s)}: {say}; a job outside the reservation "
                                    "cannot run there (give --srun-arg=--reservation=NAME if it is yours)", False)
    if not in_allocation and ({"POWERED_DOWN", "POWERING_DOWN", "POWER_DOWN", "POWERING_UP"} & f):
        return Unavailable(n, "powered down", f"{n} is powered down by Slurm's power saving: {say}; it takes longer "
                                              "to boot than the fleet waits", False)
    if not in_allocation and s.base == "ALLOCATED":
        jobs = f" by job {', '.join(s.jobs)}" if s.jobs else ""
        return Unavailable(n, "busy", f"{n} is busy: all its CPUs are allocated{jobs} ({say})", False)
    return None


def read(nodes: list[str]) -> tuple[dict[str, NodeState], str | None]:
    """The states of `nodes` that Slurm knows (a name it does not know is left to srun's own refusal), and why
    they could not be read (None when they were): no scontrol, no controller, a deadline."""
    scontrol = shutil.which("scontrol")
    if not scontrol:
        return {}, "scontrol is not on PATH"
    listed = compress(nodes)
    out, err = _run([scontrol, "-o", "show", "node", listed])
    timed_out = err is not None and "did not answer" in err
    if not timed_out and (out is None or not parse(out)):  # a name Slurm does not know fails the list: read all
        out, err = _run([scontrol, "-o", "show", "node"])
    if out is None:
        return {}, err
    wanted = set(nodes)
    states = {n: s for n, s in parse(out).items() if n in wanted}
    held, _ = _run([scontrol, "-o", "show", "reservation"])
    for n, (said, maint) in reservations(held or "").items():
        if n in states:
            states[n] = states[n]._replace(reservation=said,
                                           flags=states[n].flags | {"MAINT" if maint else "RESERVED"})
    busy = [n for n, s in states.items() if s.base in ("ALLOCATED", "MIXED")]
    if busy:
        jobs = _jobs(busy)
        states = {n: s._replace(jobs=tuple(jobs.get(n, ()))) for n, s in states.items()}
    return states, None


def _run(argv: list[str]) -> tuple[str | None, str | None]:
    what = " ".join([argv[0].rsplit("/", 1)[-1], *argv[1:4]])  # "scontrol -o show node"
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None, f"{what} did not answer within {TIMEOUT_S} s"
    except OSError as exc:
        return None, f"{what}: {exc.strerror}"
    if r.returncode != 0 and not r.stdout.strip():
        return None, (r.stderr.strip().splitlines() or [f"exit {r.returncode}"])[-1]
    return r.stdout, None


def _jobs(nodes: list[str]) -> dict[str, list[str]]:
    """The jobs running on `nodes`: "4711 (train, alice)" per node, from squeue."""
    squeue = shutil.which("squeue")
    if not squeue:
        return {}
    out, _ = _run([squeue, "-h", "-t", "R,CG", "-w", compress(nodes), "-o", "%i|%j|%u|%N"])
    by: dict[str, list[str]] = {}
    for line in (out or "").splitlines():
        parts = line.split("|")
        if len(parts) != 4:
            continue
        try:
            where = expand(parts[3])
        except Exception:  # noqa: BLE001 - squeue's own list; a form this reader does not know names no node
            continue
        for n in where:
            by.setdefault(n, []).append(f"{parts[0]} ({parts[1]}, {parts[2]})")
    return by


def busy_text(nodes: list[str], states: dict[str, NodeState]) -> str:
    """For srun's refusal "Requested nodes are busy": which of the nodes are taken, by which jobs."""
    said = []
    for n in nodes:
        s = states.get(n)
        if s and (s.jobs or s.base in ("ALLOCATED", "MIXED")):
            said.append(f"{n} {s.state.lower()}" + (f", job {', '.join(s.jobs)}" if s.jobs else ""))
    return "; ".join(said)
