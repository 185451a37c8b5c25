"""What the tests that start Ray on this host share: Ray's head and agent ports are fixed, so two such tests
(runs started side by side) take turns on a lock file; and Ray's daemons, read from /proc (a bare Debian
container has no `ps`), to check none is left."""

from __future__ import annotations

import fcntl
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def one_cluster_at_a_time() -> Iterator[None]:
    with open(Path(tempfile.gettempdir()) / "rocmkit-slurm-ray-test.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def ray_processes() -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # the process ended meanwhile
            continue
        if "raylet" in args or "gcs_server" in args:
            found.append(f"{cmdline.parent.name} {args}")
    return found
