"""Python stacks of running processes, through py-spy (https://github.com/benfred/py-spy): every thread, with the
native frames where py-spy can unwind them. It reads another process's memory, so it needs ptrace permission
over it: root, or the same user where kernel.yama.ptrace_scope is 0 (in a container: CAP_SYS_PTRACE). rocmkit
runs it from outside the job's containers, so no container is granted anything for it.

Every dump is bounded: a deadline per process, and the caller's budget over all of them. A process that cannot
be read gives a note saying why (exited, not permitted, not Python), never an exception."""

from __future__ import annotations

import json
import importlib.metadata
import os
import shutil
import sys
import time
from pathlib import Path
from typing import NamedTuple

from ..runtime import proc

PER_PROCESS_S = 10.0  # one py-spy dump; a native unwind of a process with torch loaded takes about 1 s
INSTALL_HINT = "pip install py-spy (a wheel for Linux x86_64 and aarch64; no compiler needed)"


class Dump(NamedTuple):
    threads: list[dict]  # py-spy's JSON: thread_name, active, owns_gil, frames (innermost first)
    native: bool  # the native frames are in it
    note: str | None  # why the dump is missing or has no native frames


ENV_VAR = "ROCMKIT_PY_SPY"  # a py-spy of the user's choosing (one not on PATH)


def find_py_spy() -> tuple[str | None, str]:
    """The py-spy to run, or None and why not: $ROCMKIT_PY_SPY, else on PATH, else beside this Python (a
    venv's bin/ that is not on PATH)."""
    chosen = os.environ.get(ENV_VAR)
    if chosen:
        found = shutil.which(chosen)
        return (found, "") if found else (None, f"{ENV_VAR}={chosen} is not an executable")
    found = (shutil.which("py-spy") or shutil.which("py-spy", path=str(Path(sys.executable).parent))
             or _installed_script())
    return (found, "") if found else (None, f"py-spy is not installed here ({INSTALL_HINT})")


def _installed_script() -> str | None:
    """The py-spy program its wheel installed where this Python's path finds the package but PATH does not (a
    `pip install --target DIR` puts it in DIR/bin)."""
    try:
        dist = importlib.metadata.distribution("py-spy")
    except importlib.metadata.PackageNotFoundError:
        return None
    # where its RECORD says (written for a site-packages under a prefix), then DIR/bin beside the package
    places = [Path(dist.locate_file(f)) for f in dist.files or () if f.name == "py-spy"]
    places.append(Path(dist.locate_file("")) / "bin" / "py-spy")
    return next((str(p.resolve()) for p in places if p.is_file() and os.access(p, os.X_OK)), None)


def ptrace_note() -> str | None:
    """Why this process may be refused (None when nothing says so): yama's ptrace_scope for a non-root user."""
    if os.geteuid() == 0:
        return None
    try:
        scope = Path("/proc/sys/kernel/yama/ptrace_scope").read_text().strip()
    except OSError:
        return None
    return None if scope == "0" else (f"kernel.yama.ptrace_scope is {scope}: only root may read other processes' "
                                       "stacks (run as root, or sysctl kernel.yama.ptrace_scope=0)")


def _why(lines: list[str], pid: int) -> str:
    text = " ".join(lines)
    if "Permission Denied" in text or "Operation not permitted" in text:
        return ("not permitted to read it (ptrace): run as root or as its user with kernel.yama.ptrace_scope=0; "
                "in a container, with --cap-add SYS_PTRACE")
    if not os.path.exists(f"/proc/{pid}"):
        return "it exited while being dumped"
    if "Failed to find python version" in text or "Failed to get process executable" in text:
        return "py-spy found no Python interpreter in it"
    said = [ln.strip() for ln in lines if ln.strip() and not ln.startswith((" ", "Stack backtrace"))]
    return "py-spy failed: " + (" | ".join(said[:3])[:300] if said else "no output")


def dump(py_spy: str, pid: int, *, stopped: bool, deadline: float) -> Dump:
    """One process's threads. Native frames first; py-spy cannot pause a process that is already stopped
    (SIGSTOP) or unwind some native stacks, so then the Python frames alone, read without pausing it."""
    native_note = None
    tries = [["--nonblocking"]] if stopped else [["--native"], ["--nonblocking"]]
    for extra in tries:
        left = deadline - time.monotonic()
        if left < 0.5:
            return Dump([], False, "no time left in the report's budget")
        r = proc.capture([py_spy, "dump", "--pid", str(pid), "--json", *extra], timeout=min(PER_PROCESS_S, left),
                         keep_stdout=True)
        text = "\n".join(r.stdout or [])
        if r.ok and text.lstrip().startswith("["):
            try:
                threads = json.loads(text)
            except ValueError:
                threads = None
            if isinstance(threads, list):
                note = native_note if "--native" not in extra else None
                if stopped:
                    note = "stopped: Python frames only (py-spy cannot pause a stopped process to unwind it)"
                return Dump(threads, "--native" in extra, note)
        why = (f"py-spy did not answer within {min(PER_PROCESS_S, left):.0f} s" if r.timed_out
               else _why(r.tail, pid))
        if why.startswith(("it exited", "not permitted", "py-spy found no Python")):
            return Dump([], False, why)
        native_note = f"native frames not read ({why}); Python frames only"
    return Dump([], False, (native_note or "").replace("; Python frames only", "") or "py-spy failed")


def write_text(dumps: dict[int, Dump], path: Path, headers: dict[int, str]) -> None:
    """The full dumps, as a person reads them: each process's header, then each thread's frames."""
    from .waits import frame_text

    lines = []
    for pid, d in dumps.items():
        lines.append(f"=== {headers.get(pid, f'pid {pid}')}")
        if d.note:
            lines.append(f"  note: {d.note}")
        for t in d.threads:
            flags = ", ".join(x for x, on in (("active", t.get("active")), ("holds the GIL", t.get("owns_gil"))) if on)
            lines.append(f"  Thread {t.get('os_thread_id') or t.get('thread_id')} \"{t.get('thread_name') or ''}\""
                         + (f" ({flags})" if flags else " (idle)"))
            lines += [f"    {frame_text(f)}" for f in t.get("frames") or []]
        lines.append("")
    path.write_text("\n".join(lines))
