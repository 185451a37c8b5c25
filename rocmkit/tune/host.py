"""The host's memory, which verl's CPU offloads pin: what `rocmkit tune` checks a plan against."""

from __future__ import annotations

import re
from pathlib import Path

from .memory import GIB


def memory(gib: int | None, root: str = "/") -> tuple[int | None, str, bool]:
    """(bytes, where the figure comes from or why there is none, whether the user named it) for the host check."""
    if gib is not None:
        return gib * GIB, f"the host of --host-memory-gib {gib}", True
    path = Path(root) / "proc" / "meminfo"
    try:
        m = re.search(r"^MemTotal:\s+([0-9]+) kB", path.read_text(), re.M)
    except OSError as exc:
        m, why = None, f"{path} cannot be read ({exc.strerror})"
    else:
        why = f"{path} has no MemTotal"
    if m is None:
        return None, f"{why}; --host-memory-gib N checks the plan against a host of N GiB", False
    return int(m.group(1)) * 1024, "this host" if root == "/" else f"the host captured in {root}", False
