"""Whether a silent run is working: the watchdog's second signal beside its output. A run that prints nothing
may be loading weights or compiling (a vLLM engine start on a busy 2-core machine printed nothing for 30 s and
was called a stall), or it may be hung; its processes' counters tell the two apart, read from /proc without
stopping anything.

The rule, thread by thread over each sample window:
- **busy**: the thread wanted a core at least BUSY_SHARE of the window: it ran or waited to run (the kernel's
  run time and run-queue wait, /proc/<pid>/task/<tid>/schedstat). Wanting, not getting: on the 2-core CI
  machine at a load of 23, a thread importing TRL got 8 % of a core, what any thread that always
  wants to run gets there (2 cores among 23);
- **working**: busy AND did something besides computing: it touched new memory (minor or major page faults,
  /proc/<pid>/task/<tid>/stat) or made read/write system calls (syscr/syscw, /proc/<pid>/task/<tid>/io,
  where readable). Loading, importing, compiling, spawning compiler processes and writing caches all do;
- **spinning**: busy without either. That is how a hung collective looks: a rank that waits in an NCCL/RCCL
  collective busy-polls in the runtime's stream synchronize (a core at ~90 % while its peer sleeps at 0 % in
  pthread_cond_wait), a Python loop polls a flag. It proves nothing, so it is not progress;
- not busy: the background chatter a hung job keeps (Ray's heartbeats and metrics). The kept stall reports of
  hung runs show every process of the tree at 2 % of a core or less (tests/data/stall/); a thread that wakes
  ten times a second waited about 11 ms each time to run at a load of 18, so it wants 12 % of a core: half a
  core leaves it four times that margin.
On a GPU the same rule reads the kernel's DRM usage stats (/proc/<pid>/fdinfo: `drm-engine-*` busy time and
`drm-memory-*`/`drm-total-*` memory, Documentation/gpu/drm-usage-stats.rst; amdgpu writes them): a GPU busy
while the memory its processes hold changes is working; busy with nothing changing is a kernel that may be
spinning in a collective, and is not counted. Where no DRM usage stats exist (NVIDIA's driver), the GPU is
"not readable" and the record says so. The stats count what the driver schedules itself: ROCm's user-mode compute
queues (KFD) may never show there, and then the output and CPU rules decide alone, as before.

Work only delays the stop: busy silence counts for at most BUSY_CAP times --stall-timeout, so a spin this rule
takes for work is still stopped (watchdog.Watch). Reading is at the edges (read_threads, read_gpu); deciding
(working) is pure, tested on data.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..host.facts.drm_fdinfo import parse_drm_fdinfo

BUSY_SHARE = 0.5  # of one core wanted (run + run-queue wait), per thread: see the module docstring
BUSY_CAP = 5  # busy silence delays the stop by at most this many stall timeouts
SAMPLE_MAX_S, SAMPLE_MIN_S = 5.0, 0.5  # how often the tree is read: a tenth of the stall timeout, within these
_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass(frozen=True)
class Counters:
    """One thread's counters: CPU seconds, seconds it wanted a core (ran or waited to run; its CPU seconds where
    the kernel keeps no schedstat), page faults, read/write calls (None: /proc/.../io not readable)."""

    cpu_s: float
    wanted_s: float
    faults: int
    calls: int | None


@dataclass(frozen=True)
class Gpu:
    """One process's GPU counters from DRM fdinfo: busy nanoseconds over every engine, memory bytes held."""

    busy_ns: int
    memory: int


@dataclass(frozen=True)
class Sample:
    at: float  # the caller's clock
    threads: dict[tuple[int, int], Counters]  # (pid, tid) ->
    gpu: dict[int, Gpu] | None  # pid -> ; None: no DRM usage stats readable for any process


@dataclass(frozen=True)
class Window:
    """What happened between two samples: the threads that worked and those that spun (pid, tid, share of a core
    wanted)."""

    seconds: float
    working: list[tuple[int, int, float]]
    spinning: list[tuple[int, int, float]]
    gpu_working: list[int]
    gpu_spinning: list[int]

    @property
    def busy(self) -> bool:
        return bool(self.working or self.gpu_working)


def working(before: Sample, after: Sample) -> Window:
    """The threads (and GPU users) that worked between two samples; see the module docstring for the rule."""
    seconds = after.at - before.at
    work, spin = [], []
    if seconds > 0:
        for key, now in after.threads.items():
            then = before.threads.get(key, Counters(0.0, 0.0, 0, 0 if now.calls is not None else None))  # new
            share = (now.wanted_s - then.wanted_s) / seconds
            if share < BUSY_SHARE:
                continue
            did = now.faults > then.faults or (now.calls is not None and then.calls is not None
                                                 and now.calls > then.calls)
            (work if did else spin).append((key[0], key[1], round(share, 2)))
    gpu_work, gpu_spin = [], []
    for pid, now_g in (after.gpu or {}).items():
        then_g = (before.gpu or {}).get(pid)
        if then_g is None or now_g.busy_ns <= then_g.busy_ns:
            continue
        (gpu_work if now_g.memory != then_g.memory else gpu_spin).append(pid)
    return Window(seconds, sorted(work), sorted(spin), sorted(gpu_work), sorted(gpu_spin))


# ---- reading (Linux /proc) ----

def _thread(pid: int, tid: int) -> Counters | None:
    base = f"/proc/{pid}/task/{tid}"
    try:
        with open(f"{base}/stat", "rb") as f:
            stat = f.read().decode(errors="replace")
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 2:].split()  # the name may hold spaces and parentheses; fields from 3 on
    try:
        faults = int(fields[7]) + int(fields[9])  # minflt (10), majflt (12)
        cpu_s = (int(fields[11]) + int(fields[12])) / _TICK  # utime (14), stime (15)
    except (IndexError, ValueError):
        return None
    wanted_s = cpu_s
    try:
        with open(f"{base}/schedstat", "rb") as f:  # ns on the CPU, ns waiting on a run queue, timeslices
            ran, waited = (int(x) for x in f.read().split()[:2])
        cpu_s, wanted_s = ran / 1e9, (ran + waited) / 1e9
    except (OSError, ValueError):
        pass
    calls = None
    try:
        with open(f"{base}/io", "rb") as f:  # another user's process (a container's root): not readable
            io = dict(line.split(b":", 1) for line in f.read().splitlines() if b":" in line)
        calls = int(io[b"syscr"]) + int(io[b"syscw"])
    except (OSError, KeyError, ValueError):
        pass
    return Counters(cpu_s, wanted_s, faults, calls)


def read_threads(pids: list[int]) -> dict[tuple[int, int], Counters]:
    out = {}
    for pid in pids:
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for t in tids:
            if t.isdigit():
                c = _thread(pid, int(t))
                if c is not None:
                    out[(pid, int(t))] = c
    return out


def parse_fdinfo(texts: list[str]) -> Gpu | None:
    """One process's DRM usage stats from its fdinfo texts (one per open DRM file; parsed by the doctor's reader,
    host/facts/drm_fdinfo.py): engine busy time summed, memory summed, each DRM client once (a process may hold
    one client through several fds). None: no stats."""
    seen, busy, memory, found = set(), 0, 0, False
    for text in texts:
        c = parse_drm_fdinfo(text)
        if c is None or c.client_id is None or c.client_id in seen:
            continue
        seen.add(c.client_id)
        if c.engines_ns is not None:
            found = True
            busy += c.engines_ns
        # whether memory changes is all that matters here, so every kind a driver prints is summed
        memory += sum(v for k, v in c.memory.items() if k.partition("-")[0] in ("memory", "total", "resident"))
    return Gpu(busy, memory) if found else None


def read_gpu(pids: list[int]) -> dict[int, Gpu] | None:
    """Each process's DRM usage stats; None when no process has any (no GPU, or a driver that writes none)."""
    out = {}
    for pid in pids:
        texts = []
        try:
            fds = os.listdir(f"/proc/{pid}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if not os.readlink(f"/proc/{pid}/fd/{fd}").startswith("/dev/dri/"):
                    continue
                with open(f"/proc/{pid}/fdinfo/{fd}") as f:
                    texts.append(f.read())
            except OSError:
                continue
        g = parse_fdinfo(texts) if texts else None
        if g is not None:
            out[pid] = g
    return out or None


def sample(pids: list[int], at: float) -> Sample:
    return Sample(at, read_threads(pids), read_gpu(pids))


def sample_every(stall_s: float) -> float:
    return min(SAMPLE_MAX_S, max(SAMPLE_MIN_S, stall_s / 10))
