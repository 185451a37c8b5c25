"""What the tests that start Ray on this host share: Ray's head and agent ports are fixed, so two such tests
(runs started side by side, and the `engines` xdist group of tests/xdistgroups.py) take turns on a lock file; and
Ray's daemons on this host, read from /proc (a bare Debian container has no `ps`), to check none is left."""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def one_cluster_at_a_time() -> Iterator[None]:
    with open(Path(tempfile.gettempdir()) / "rocmkit-slurm-ray-test.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _pid_namespace(proc: Path) -> str | None:
    try:
        return os.readlink(proc / "ns" / "pid")
    except OSError:  # ended meanwhile, or not ours to read
        return None


def in_this_pid_namespace(pid: int) -> bool:
    """Whether the process runs beside the tests, not inside a container (its own pid namespace): unreadable
    counts as beside."""
    theirs = _pid_namespace(Path(f"/proc/{pid}"))
    return theirs is None or theirs == _pid_namespace(Path("/proc/self"))


def ray_processes() -> list[str]:
    """Ray's daemons in this process's pid namespace: a certify run in a container (a test of the `docker` xdist
    group, beside this one) has Ray of its own in its own namespace, which /proc shows too."""
    ours = _pid_namespace(Path("/proc/self"))
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # the process ended meanwhile
            continue
        if ours is not None and _pid_namespace(cmdline.parent) not in (ours, None):
            continue
        if "raylet" in args or "gcs_server" in args:
            found.append(f"{cmdline.parent.name} {args}")
    return found


def ray_processes_left(within_s: float = 30) -> list[str]:
    """Ray's daemons still up after up to `within_s` seconds (a job's teardown stops them; on a loaded machine that
    takes seconds, and `sbatch --wait` returns within 2 s of the job's end): [] as soon as none is left."""
    deadline = time.monotonic() + within_s
    while (left := ray_processes()) and time.monotonic() < deadline:
        time.sleep(0.5)
    return left
