"""Who the run's processes were: each one's role (verl's driver, Ray actor WorkerDict, vLLM EngineCore), rank,
command line and pid inside its container, noted while it lived, and when it was gone. A process that dies takes
its /proc entry with it, so the cause of a crash (cause.py) can name the process only from what was noted before:
the watchdog notes the tree every NOTE_EVERY_S, whatever the stall timeout. Reads /proc through psutil; the table
it keeps is plain data."""

from __future__ import annotations

import time

import psutil

from ..stall.tree import RANK_VARS
from ..stall.waits import role

# roles renamed later: Ray names a worker once a task or actor starts in it, vLLM its engine once it is spawned
UNNAMED = ("Ray worker (starting)", "Ray idle worker", "multiprocessing child")
NOTE_EVERY_S = 1.0  # a worker killed at step 2 lived for minutes; one that dies within a second of its start is
# named by its Ray line alone


def _read(p: psutil.Process) -> dict | None:
    try:
        with p.oneshot():
            cmd = p.cmdline()
            name = p.name()
            started = p.create_time()
        try:
            env = p.environ()
        except psutil.Error:
            env = {}
        rank = next((env[v] for v in RANK_VARS if env.get(v, "").isdigit()), None)
        return {"pid": p.pid, "nspid": _nspid(p.pid), "role": role(cmd, name), "rank": rank,
                "cmdline": " ".join(cmd)[:300], "started": started}
    except psutil.Error:
        return None


def _nspid(pid: int) -> int | None:
    """The pid the process has in its own pid namespace (a container's), which its log lines carry."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("NSpid:"):
                    ids = line.split()[1:]
                    return int(ids[-1]) if len(ids) > 1 else None
    except (OSError, ValueError):
        return None
    return None


def _zombie(pid: int) -> bool:
    """Whether the process has ended and waits to be reaped (state Z in /proc/<pid>/stat)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except (OSError, IndexError):
        return False


class Processes:
    """The run's processes, noted as they come and go: pid -> {pid, nspid, role, rank, cmdline, started,
    first_s, gone_s} (seconds into the run; gone_s None while it lives)."""

    def __init__(self, clock=time.monotonic):
        self.clock, self.started = clock, clock()
        self.table: dict[int, dict] = {}
        self._last = None

    @classmethod
    def from_table(cls, rows: list[dict]) -> Processes:
        """The processes a certificate recorded (run.processes), to name a cause again from its kept log."""
        seen = cls()
        seen.table = {r["pid"]: dict(r) for r in rows}
        return seen

    def note(self, pids) -> None:
        """`pids`: a callable listing the run's process ids now (proc.run's stop_when argument)."""
        now = self.clock()
        if self._last is not None and now - self._last < NOTE_EVERY_S:
            return
        self._last = now
        try:
            alive = set(pids())
        except Exception:  # noqa: BLE001 - a failed listing must never stop the run; the next tick tries again
            return
        at = round(now - self.started, 1)
        # new processes, and those Ray had not named yet (a worker becomes ray::WorkerDict once its actor starts)
        for pid in alive - {p for p, r in self.table.items() if not r["role"].startswith(UNNAMED)}:
            try:
                rec = _read(psutil.Process(pid))
            except psutil.Error:
                rec = None
            if rec:
                self.table[pid] = {**rec, "first_s": self.table.get(pid, {}).get("first_s", at), "gone_s": None}
        for pid, rec in self.table.items():
            # a zombie has ended: a killed child stays one until its parent reaps it, and the parent may be busy
            # (SGLang's server reaps its schedulers only when it shuts down)
            if rec["gone_s"] is None and (pid not in alive or _zombie(pid)):
                rec["gone_s"] = at

    def find(self, pid: int) -> dict | None:
        """The process with this pid on this host or in its container (log lines carry the latter)."""
        return self.table.get(pid) or next((r for r in self.table.values() if r.get("nspid") == pid), None)

    def root(self) -> dict | None:
        """The command certify started (the first process noted: the tree's root), or None."""
        return min(self.table.values(), key=lambda r: (r["first_s"], r["pid"]), default=None)

    def gone_early(self, until_s: float) -> list[dict]:
        """Processes that ended before `until_s` (the run's end), the first first: who died while the rest ran."""
        return sorted((r for r in self.table.values() if r["gone_s"] is not None and r["gone_s"] < until_s),
                      key=lambda r: r["gone_s"])
