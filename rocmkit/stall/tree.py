"""The processes of a run, read live: each one's command line, role, state, CPU time, rank and GPU memory.
Everything here reads the world (psutil, /proc, sysfs, nvidia-smi); what it means is waits.py and verdict.py."""

from __future__ import annotations

import os
import re
import time

import psutil

from .waits import role

STATES = {psutil.STATUS_STOPPED: "stopped", psutil.STATUS_TRACING_STOP: "tracing-stop",
          psutil.STATUS_DISK_SLEEP: "disk-sleep", psutil.STATUS_ZOMBIE: "zombie",
          psutil.STATUS_RUNNING: "running", psutil.STATUS_SLEEPING: "sleeping", psutil.STATUS_IDLE: "idle"}
RANK_VARS = ("RANK", "LOCAL_RANK")  # torch.distributed's, set by torchrun, accelerate, verl's workers
NVIDIA_SMI_S = 5.0


def select(selectors) -> list[int]:
    """The pids the user named: numbers, or `ray` for every Ray raylet of this node (its workers are its
    children). UsageError for a pid that is not there or a word that is not `ray`."""
    from ..errors import UsageError

    pids = []
    for sel in selectors:
        if sel == "ray":
            raylets = [p.pid for p in psutil.process_iter(["name"]) if p.info["name"] == "raylet"]
            if not raylets:
                raise UsageError("--stalled ray: no Ray raylet runs on this node", hint="give the job's PID instead")
            pids += raylets
        elif sel.isdigit() and psutil.pid_exists(int(sel)):
            pids.append(int(sel))
        else:
            raise UsageError(f"--stalled {sel}: " + ("no such process on this node" if sel.isdigit()
                                                      else "a process id or `ray`"),
                             hint="the job's process id (its driver, its launcher), e.g. from `pgrep -f main_ppo`")
    return pids


def with_descendants(pids: list[int]) -> list[psutil.Process]:
    """The processes and every descendant, once each, in pid order; those gone already are left out."""
    seen: dict[int, psutil.Process] = {}
    for pid in pids:
        try:
            p = psutil.Process(pid)
            seen[p.pid] = p
            for c in p.children(recursive=True):
                seen[c.pid] = c
        except psutil.Error:
            continue
    return [seen[k] for k in sorted(seen)]


def is_python(p: psutil.Process) -> bool:
    """Its executable is a Python interpreter (Ray and vLLM rename their processes, not the executable)."""
    try:
        return bool(re.match(r"python", os.path.basename(p.exe())))
    except psutil.Error:
        try:
            return bool(re.match(r"python", os.path.basename((p.cmdline() or [""])[0])))
        except psutil.Error:
            return False


def _rank(p: psutil.Process) -> str | None:
    try:
        env = p.environ()
    except psutil.Error:
        return None
    for var in RANK_VARS:
        if env.get(var, "").isdigit():
            return env[var]
    return None


def env_value(p: psutil.Process, var: str) -> str | None:
    """One variable of a process's environment (None when unset or not readable)."""
    try:
        return p.environ().get(var) or None
    except psutil.Error:
        return None


def seen_folder(pid: int, path: str) -> tuple[tuple, str, int] | None:
    """A folder named in a process's environment as rocmkit reaches it from here, through the process's own root
    (/proc/PID/root: a container's files, without a bind mount): (a key equal for every process that sees the same
    folder, the path from here, the process's pid in its own namespace). None when it cannot be reached."""
    root = f"/proc/{pid}/root"
    try:
        st = os.stat(root)
        ns_pid = pid
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("NSpid:"):
                ns_pid = int(line.split()[-1])
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino, path), root + path, ns_pid


def frozen(pid: int, proc: str = "/proc", cgroupfs: str = "/sys/fs/cgroup") -> bool:
    """Whether the cgroup v2 freezer holds pid: the kernel shows a frozen process as sleeping (state S), so only
    its cgroup says it (cgroup.events: "frozen 1"). False where there is no cgroup v2 hierarchy to read."""
    try:
        with open(f"{proc}/{pid}/cgroup") as f:
            path = next((line[3:].strip() for line in f if line.startswith("0::")), None)
        if path is None:
            return False
        with open(os.path.join(cgroupfs, path.lstrip("/"), "cgroup.events")) as f:
            return any(line.split() == ["frozen", "1"] for line in f)
    except OSError:
        return False


def _state(p: psutil.Process) -> str:
    state = STATES.get(p.status(), p.status())
    return "frozen" if state == "sleeping" and frozen(p.pid) else state


def record(p: psutil.Process) -> dict | None:
    """What the report says of one process before its stack (None if it is gone)."""
    try:
        with p.oneshot():
            cmd = p.cmdline()
            cpu = p.cpu_times()
            return {"pid": p.pid, "ppid": p.ppid(), "role": role(cmd, p.name()), "rank": _rank(p),
                    "state": _state(p), "python": is_python(p),
                    "cpu_s": round(cpu.user + cpu.system, 2), "threads": p.num_threads(),
                    "rss_mib": round(p.memory_info().rss / 2**20, 1), "cmdline": " ".join(cmd)[:400],
                    "_cpu": (time.monotonic(), cpu.user + cpu.system)}
    except psutil.Error:
        return None


def cpu_since(rec: dict, p: psutil.Process) -> None:
    """rec's CPU use (%) between its record and now: busy, or waiting."""
    then, used = rec.pop("_cpu")
    try:
        cpu = p.cpu_times()
    except psutil.Error:
        return
    took = time.monotonic() - then
    if took > 0.2:
        rec["cpu_pct"] = round(100 * (cpu.user + cpu.system - used) / took, 1)
        rec["cpu_sample_s"] = round(took, 1)


def gpu_memory(pids: set[int]) -> tuple[dict[int, float], str]:
    """MiB of GPU memory each process holds, where the driver says: amdgpu's KFD per process, else nvidia-smi.
    And where it was read from ("" when nowhere)."""
    from ..host.facts.gpu_holders import KFD_PROC, kfd_processes
    from ..host.facts.reader import Reader

    held: dict[int, float] = {}
    kfd = kfd_processes(Reader("/", live=True), [])
    if kfd is not None:
        held = {p.pid: round(sum(p.vram.values()) / 2**20, 1) for p in kfd if p.pid in pids and p.vram}
        return held, f"amdgpu KFD (/{KFD_PROC})"
    import shutil

    smi = shutil.which("nvidia-smi")
    if not smi:
        return {}, ""
    from ..runtime import proc

    r = proc.capture([smi, "--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"],
                     timeout=NVIDIA_SMI_S)
    for line in r.tail if r.ok else []:
        parts = [x.strip() for x in line.split(",")]
        if len(parts) == 2 and parts[0].isdigit() and int(parts[0]) in pids:
            try:
                held[int(parts[0])] = held.get(int(parts[0]), 0.0) + float(parts[1])
            except ValueError:
                continue
    return held, "nvidia-smi" if r.ok else f"nvidia-smi failed: {' '.join(r.tail[-2:])[:200]}"
