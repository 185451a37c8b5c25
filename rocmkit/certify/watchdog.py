"""The certification's watchdog: it reads the engine's output line by line, names the phase the run is in, keeps
a timeline of phases, and says when the run must be stopped before its --timeout:

- stalled: no new step, no new output and no work for --stall-timeout seconds (a frozen trainer, a deadlock). A
  status line that a waiting job prints on a timer is not new output: a known waiting message (WAITING), or a
  line that says word for word what its process said last (timestamps aside). Work is what activity.py reads
  of the run's processes (threads busy touching memory or files, a GPU busy while its memory changes; a spin in
  a collective is not work); it delays the stop by at most activity.BUSY_CAP stall timeouts;
- engine error: a line that only a dead run prints (a worker traceback, vLLM's "Worker failed", a dead Ray
  actor, RayTaskError, a CUDA/HIP error) with no progress after it (a step, or a new phase) within ERROR_GRACE_S.

A hang is the worst answer a certifier can give (an hour of silence in CI or on a cluster); a fatal error with no
progress after it is a result. Pure apart from the clock, which the caller passes in: tested on data. What feeds it
during a run (the engine's lines, the reads of the run's processes, the display) is follow.py.
"""

from __future__ import annotations

import re
import time
from collections import deque
from dataclasses import dataclass, field

from . import activity, metrics
from .loglines import STAMP_RE, short, source
from .signatures import FATAL, fatal_pattern  # noqa: F401  (the fatal lines live in the failure catalogue)

# Why 600 s: the longest silence a healthy run showed was the engine start of verl on a GPU (five processes each
# importing torch and vLLM, then vLLM's compile: about 60 s without a line, the benchmark records it as
# `longest_silence_s`), and a user's model loading from network storage prints nothing for minutes. Ten minutes
# is several times any healthy silence seen and a sixth of the 3600 s --timeout it cuts short.
STALL_S = 600
# After a fatal line, how long a step may still take to show the run survived it. Engines print tracebacks for
# errors they recover from (a retried request); a dead worker never reaches another step. verl's and TRL's steps
# on the built-in task take seconds; 60 s leaves a large model's step room to finish.
ERROR_GRACE_S = 60
RECENT_LINES = 200  # lines looked back over for a fatal line's traceback (vLLM's run to 60 and more)
CONTEXT_LINES = 40  # the most lines of an error the certificate keeps: its traceback's end, then a few after

# Lines a job prints on a timer while it waits: they say a process is alive, not that the run moves. Counted as
# output they hid a real hang on two H100s (verl 0.9.1, vLLM 0.24.0, a rollout rank stopped in its forward pass):
# a line came at least every 60 s, so neither a 60 s nor the default stall timeout fired. What came:
# - vLLM's "No available shared memory broadcast block found in 60 seconds" (its engine waits on a worker:
#   vllm/distributed/device_communicators/shm_broadcast.py, LONG_WAIT_TIME_LOG_MSG), every minute;
# - TransferQueue's statistics, three lines every 5 minutes (transfer_queue/utils/perf_utils.py);
# - verl's replay buffer, "pending: 0, running: 8, finished: 0, failure: 0" every minute
#   (verl/trainer/ppo/v1/replay_buffer.py): a repeat of its last line, caught by the repeat rule (Watch.line);
# - Ray's raylet, every 10 s while its temp folder's disk is fuller than local_fs_capacity_threshold (95 %):
#   "file_system_monitor.cc:116: /tmp/ray/session_... is over 95% full, available space: 18.6939 GB; ..."
#   (src/ray/common/file_system_monitor.cc). The free space it names moves with whatever else writes to that
#   disk, so the repeat rule missed it: a frozen verl run on a CI machine with a full disk was never stopped.
RAY_DISK_FULL = re.compile(r"file_system_monitor\.cc:\d+: (\S+) is over (\d+)% full, available space: ([\d.]+ ?\w+)")
WAITING = re.compile(r"No available shared memory broadcast block found|\[Performance\] Total success requests"
                     r"|^Time range: last [\d.]+ minutes|^Per-operation statistics: |" + RAY_DISK_FULL.pattern)

# What each line means for the phase: (pattern, kind, text). kind is one of START_UP, ROLLOUT, UPDATE, SYNC; the
# text is what the terminal shows. Engines share the table: a line names its phase whichever engine prints it.
START_UP, ROLLOUT, UPDATE, SYNC = "start-up", "rollout", "update", "weight sync"
MARKERS = tuple((re.compile(rx), kind, text) for rx, kind, text in (
    # verl 0.9.1's driver and workers (verl/trainer/main_ppo.py, ray_trainer.py), vLLM's and SGLang's engines
    (r"Started a local Ray instance", START_UP, "starting the trainer"),
    (r"create worker group", START_UP, "starting the actor and reference workers"),
    (r"actor and ref model engine initialized", START_UP, "starting the rollout engine"),
    (r"Initializing a V1 LLM engine", START_UP, "starting the vLLM engine"),
    # verl's SGLang server (verl/workers/rollout/sglang_rollout/async_sglang_server.py, SGLangHttpServer.__init__)
    (r"SGLang http server: rollout_mode=", START_UP, "starting the SGLang engine"),
    (r"torch\.compile (?:takes|.* took)|Compiling a graph", START_UP, "the rollout compiling"),
    (r"Capturing CUDA graphs?|Capturing cudagraph", START_UP, "vLLM capturing CUDA/HIP graphs"),
    # SGLang's (model_executor/piecewise_cuda_graph_runner.py, cuda_graph_runner.py)
    (r"Capture (?:piecewise )?(?i:cuda) graph begin", START_UP, "SGLang capturing CUDA graphs"),
    (r"all initialize finished, ready to fit", SYNC, "first weight sync"),
    (r"Sleep mode freed", UPDATE, "log-probs and update"),
    (r"wake up tags \['weights'\]|to wake up tags", SYNC, "weight sync"),
    # rocmkit's own TRL runner and launcher (trl_run.py, trl_launch.py)
    (r"rocmkit: starting .* on http", START_UP, "starting the vLLM server"),
    (r"rocmkit: .* healthy after", START_UP, "starting the trainer"),
))
# The markers each rollout worker prints for itself (vLLM's sleep and wake-up): a replica's own timeline.
PER_WORKER = {rx for rx, _, text in MARKERS if text in ("log-probs and update", "weight sync")}


@dataclass(frozen=True)
class Stop:
    reason: str  # "stalled" or "engine error"
    phase: str  # kind: start-up, rollout, update, weight sync
    detail: str  # what the phase was doing ("starting the vLLM engine", "step 3")
    quiet_s: float  # seconds since the last step or line (stalled) or since the fatal line (engine error)
    pattern: str | None  # the fatal pattern's id
    lines: list[str] = field(default_factory=list)  # the error's traceback (or the last lines before the stall)
    fatal: str | None = None  # the fatal line itself
    waiting_lines: int = 0  # stalled: the status lines of waiting processes that came in the quiet time
    # stalled: what the watchdog read beside the output ({"cpu": ..., "gpu": ...}, empty when it read none), the
    # seconds of the quiet time its processes worked, whether that work ran out the cap, and the threads that
    # spun (busy without touching memory or files: [pid, tid, share of a core wanted]) since the last output, and
    # the seconds with neither output nor work
    read: dict = field(default_factory=dict)
    busy_s: float = 0.0
    capped: bool = False
    spinning: list = field(default_factory=list)
    idle_s: float = 0.0
    # stalled: the processes that worked in the quiet time, [pid, seconds of the windows in which it worked], most
    # first: who kept a late stop from coming sooner (the stall report names each pid's role)
    working: list = field(default_factory=list)

    def message(self, stall_s: float) -> str:
        if self.reason == "stalled":
            also = (f"; {self.waiting_lines} status line(s) of waiting processes came meanwhile"
                    if self.waiting_lines else "")
            where = f"the run stalled in {self.phase} ({self.detail})"
            if not self.read:  # the output alone was read
                return (f"{where}: no new step and no new output for {self.quiet_s:.0f} s "
                        f"(--stall-timeout {stall_s:g}){also}")
            read = "; ".join(f"{k}: {v}" for k, v in self.read.items())
            if self.capped:
                who = ("; worked most: " + ", ".join(f"pid {pid} {s:.0f} s" for pid, s in self.working[:3])
                       if self.working else "")
                return (f"{where}: no new step and no new output for {self.quiet_s:.0f} s; its processes worked "
                        f"{self.busy_s:.0f} s of it, but busy silence counts for at most {activity.BUSY_CAP} x "
                        f"--stall-timeout {stall_s:g} (read: {read}{who}){also}")
            spun = ""
            if self.spinning:
                top = max(s[2] for s in self.spinning)
                spun = (f"; {len(self.spinning)} thread(s) kept a core busy (up to {100 * top:.0f} %) without touching "
                        f"memory or files (pids {', '.join(str(p) for p in sorted({s[0] for s in self.spinning}))}:"
                        f" a wait in a collective looks so)")
            return (f"{where}: no new step, no new output and no work for {self.idle_s:.0f} s "
                    f"(--stall-timeout {stall_s:g}; read: output, {read}){also}{spun}")
        return (f"the engine failed in {self.phase} ({self.detail}): {short(self.fatal or '')} — no progress "
                f"followed within {self.quiet_s:.0f} s")

    def to_json(self) -> dict:
        return {"reason": self.reason, "phase": self.phase, "detail": self.detail, "quiet_s": round(self.quiet_s, 1),
                "pattern": self.pattern, "fatal": self.fatal, "lines": self.lines, "waiting_lines": self.waiting_lines,
                "read": {"output": True, **self.read}, "busy_s": round(self.busy_s, 1), "capped": self.capped,
                "spinning": [list(x) for x in self.spinning], "idle_s": round(self.idle_s, 1),
                "working": [[pid, round(s, 1)] for pid, s in self.working]}


REPLICA_EVENTS = 400  # the most events kept per source (a long run's sleeps and syncs, two a step)


def clock_text(seconds: float) -> str:
    s = int(seconds)
    return f"{s // 60}:{s % 60:02d}"


class Watch:
    """Fed every output line (`line`) and asked on every tick (`check`) whether to stop. The phase starts as
    start-up; a step line starts the next step's rollout; the marker table refines both."""

    def __init__(self, total_steps: int, stall_s: float = STALL_S, grace_s: float = ERROR_GRACE_S,
                 clock=time.monotonic, first_phase: str = "starting the engine", fatal: bool = True):
        self.total, self.stall_s, self.grace_s, self.clock = total_steps, stall_s, grace_s, clock
        self.fatal = fatal  # False: the stall rule only (output whose steps rocmkit cannot read: Miles' test)
        self.started = self.last_activity = self.phase_started = clock()
        self.kind, self.detail = START_UP, first_phase
        self.step = 0  # the last step seen
        self.reward: float | None = None
        self.rewards: dict[int, float] = {}  # each step's reward: the early stop's evidence (early.py)
        self.timeline: list[dict] = [{"phase": START_UP, "detail": first_phase, "at_s": 0.0}]
        # each Ray worker's own update and sync events (rollout replicas interleave in the phase timeline)
        self.replicas: dict[str, list[dict]] = {}
        self.longest_silence_s = 0.0
        # the work read of its processes (activity.py): when the last window with work ended, the seconds of
        # work since the last output, the longest time with neither output nor work, and what was read
        self.last_work: float | None = None
        self.busy_s = 0.0
        self.longest_idle_s = 0.0
        self.read: dict[str, str] = {}
        self.samples = 0
        # when the last window of work read ended; None while no window has been read. A run whose processes are
        # read is stopped for its silence only once a window has seen it idle to the end: a watchdog starved of
        # CPU on a loaded machine reads late, and the silence it did not read is no proof that nothing worked
        self.sampling = False
        self.last_window: float | None = None
        self.spinning: list = []
        self.working: dict[int, float] = {}  # pid -> seconds of the windows it worked in, since the last output
        self.waiting_lines = 0  # status lines of waiting processes since the last new output
        self._last_said: dict[str, str] = {}  # each process's last line, timestamps removed (the repeat rule)
        self._recent: deque[str] = deque(maxlen=RECENT_LINES)
        self.disk_full: re.Match | None = None  # Ray's last word that its temporary folder's disk is (nearly) full
        self.error_at: float | None = None
        self.error_pattern: str | None = None
        self.error_line: str | None = None
        self.error_lines: list[str] = []
        self.stopped: Stop | None = None

    def _enter(self, kind: str, detail: str, now: float) -> None:
        if (kind, detail) == (self.kind, self.detail):
            return
        self.error_at, self.error_lines = None, []  # the run moved on past what it printed
        self.kind, self.detail, self.phase_started = kind, detail, now
        self.timeline.append({"phase": kind, "detail": detail, "at_s": round(now - self.started, 2)})

    def _waiting(self, text: str, who: str) -> bool:
        """A status line of a waiting process: a known waiting message, or what the process said last, again."""
        plain = short(text)
        said = STAMP_RE.sub("", plain)
        repeat = self._last_said.get(who) == said
        self._last_said[who] = said
        return repeat or WAITING.search(plain) is not None

    def line(self, text: str) -> None:
        now = self.clock()
        steps = metrics.read_console(text)
        who = source(text)
        if (full := RAY_DISK_FULL.search(text)) is not None:
            self.disk_full = full
        if not steps and self._waiting(text, who):
            self.waiting_lines += 1
        else:
            self.longest_silence_s = max(self.longest_silence_s, now - self.last_activity)
            self.longest_idle_s = max(self.longest_idle_s, now - self._since())
            self.last_activity, self.waiting_lines, self.busy_s, self.spinning = now, 0, 0.0, []
            self.working = {}
        if steps:
            n = max(steps)
            values = steps[n]
            reward = next((values[k] for k in ("critic/score/mean", "reward") if k in values), None)
            if reward is not None:
                self.reward = self.rewards[n] = reward
            if n > self.step:
                self.step = n
                self._enter(ROLLOUT, f"step {n + 1}" if n < self.total else "finishing", now)
            return
        for rx, kind, detail in MARKERS:
            if rx.search(text):
                if kind == START_UP and self.step:
                    break  # a late start-up line (a restarted worker) does not undo the steps
                where = "finishing" if self.total and self.step >= self.total else f"step {self.step + 1}"
                self._enter(kind, detail if kind == START_UP else f"{where}: {detail}", now)
                if rx in PER_WORKER and who != "driver":  # a rollout worker's own sleep or wake-up
                    events = self.replicas.setdefault(who, [])
                    event = {"phase": kind, "detail": f"{where}: {detail}", "at_s": round(now - self.started, 2)}
                    # one event per change: a replica's TP workers each say they slept, and vLLM wakes the
                    # weights and then the KV cache
                    if len(events) < REPLICA_EVENTS and (not events or events[-1]["detail"] != event["detail"]):
                        events.append(event)
                break
        name = fatal_pattern(text) if self.fatal else None
        if name == "python.exception" and not any("Traceback (most recent call last)" in r for r in self._recent):
            name = None  # an error named in passing, not the end of a traceback
        if name and self.error_at is None:
            self.error_at, self.error_pattern, self.error_line = now, name, text
            self.error_lines = (_from_traceback(list(self._recent)) + [text])[-(CONTEXT_LINES - 10):]
        elif self.error_at is not None and len(self.error_lines) < CONTEXT_LINES:
            self.error_lines.append(text)  # what followed: vLLM's "Worker failed", Ray's actor death
        self._recent.append(text)

    def _since(self) -> float:
        """When the run last showed a sign of life: a new line or step, or the end of a window of work."""
        return max(self.last_activity, self.last_work or self.last_activity)

    def worked(self, window: activity.Window, read: dict[str, str]) -> None:
        """What the processes did over the window that ends now (activity.working), and what was read."""
        now = self.clock()
        self.samples += 1
        self.last_window = now
        self.read = read
        self.spinning = window.spinning or self.spinning  # the last spin seen since the last output
        if window.busy:
            self.longest_idle_s = max(self.longest_idle_s, now - window.seconds - self._since())
            self.last_work = now
            self.busy_s += window.seconds
            for pid in {w[0] for w in window.working} | set(window.gpu_working):
                self.working[pid] = self.working.get(pid, 0.0) + window.seconds

    def check(self) -> str | None:
        """A reason to stop now (and self.stopped set), or None."""
        now = self.clock()
        quiet, idle = now - self.last_activity, now - self._since()
        capped = quiet >= activity.BUSY_CAP * self.stall_s
        if self.error_at is not None and now - self.error_at >= self.grace_s:
            self.stopped = Stop("engine error", self.kind, self.detail, now - self.error_at, self.error_pattern,
                                [short(x) for x in self.error_lines], short(self.error_line))
        elif (idle >= self.stall_s and self._idle_read(idle)) or capped:
            self.longest_idle_s = max(self.longest_idle_s, idle)
            self.stopped = Stop("stalled", self.kind, self.detail, quiet, None,
                                [short(x) for x in list(self._recent)[-12:]], waiting_lines=self.waiting_lines,
                                read=dict(self.read), busy_s=self.busy_s, capped=capped and idle < self.stall_s,
                                spinning=list(self.spinning), idle_s=idle,
                                working=sorted(self.working.items(), key=lambda x: -x[1])[:8])
        return self.stopped.reason if self.stopped else None

    def _idle_read(self, idle: float) -> bool:
        """Whether the idle time was read, not assumed: without process reads (a replayed log) the output rule alone
        holds; with them, the last window ended at least the timeout after the last sign of life."""
        if not self.sampling:
            return True
        return self.last_window is not None and self.last_window - self._since() >= self.stall_s

    def status(self) -> str:
        """What the terminal shows: the phase and how long it has lasted ("starting the vLLM engine: 2:10")."""
        now = self.clock()
        if self.step:
            text = f"step {self.step} of {self.total}" + (f", reward {self.reward:.3f}" if self.reward is not None else "")
            if self.kind != ROLLOUT:
                text += f"; {self.detail.split(': ', 1)[-1]}"
            return text
        return f"{self.detail}: {clock_text(now - self.phase_started)}"

    def record(self) -> dict:
        """The certificate's part: the timeline, the longest silence, and the stop if there was one."""
        return {"timeline": self.timeline, "longest_silence_s": round(self.longest_silence_s, 1),
                "stop": self.stopped.to_json() if self.stopped else None,
                "activity": {"read": {"output": True, **self.read}, "samples": self.samples,
                             "longest_idle_s": round(self.longest_idle_s, 1)},
                "replicas": self.replicas if len(self.replicas) > 1 else {}}

    def notes(self) -> list[str]:
        """What the output said that the user should know whatever the verdict."""
        if self.disk_full is None:
            return []
        folder, percent, left = self.disk_full.groups()
        note = (f"Ray warned that the disk holding {folder} is over {percent}% full ({left} free at its last "
                "warning): while it is, objects Ray has to spill to disk cannot be created "
                "(src/ray/common/file_system_monitor.cc). Free space on that disk.")
        return [note]


def _from_traceback(lines: list[str]) -> list[str]:
    """The lines before a fatal line that belong to it: from the last traceback's start, or the last few."""
    for i in range(len(lines) - 1, -1, -1):
        if "Traceback (most recent call last)" in lines[i]:
            return lines[i:]
    return lines[-5:]
