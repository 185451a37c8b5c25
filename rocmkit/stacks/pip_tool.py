"""The pip and Python the resolve runs: which pip this is (a fresh venv brings the one its Python shipped), whether
it can run the resolve at all, and a local Python of a stack's version (so pip may build sdists' metadata)."""

from __future__ import annotations

import re
from pathlib import Path

from ..runtime import proc

OLDEST_PIP = (22, 2)  # --report, which the resolve reads, came in pip 22.2


def pip_version(python: str) -> tuple[str, tuple[int, int] | None]:
    """What `python -m pip --version` says ("pip 23.2.1"), and its (major, minor); None where no pip answers."""
    r = proc.capture([python, "-m", "pip", "--version"], timeout=60)
    said = r.tail[-1].split(" from ")[0] if r.ok and r.tail else " ".join(r.tail[-2:])[:200]
    m = re.match(r"pip (\d+)\.(\d+)", said)
    return said, (int(m.group(1)), int(m.group(2))) if m else None


def pip_too_old(python: str) -> str | None:
    """Why this Python's pip cannot run the resolve (too old for --report), or None: a tool's limit, said as one,
    never as a conflict in the user's pins."""
    said, version = pip_version(python)
    if version is None:
        return f"{python} has no pip that answers (`{python} -m pip --version`: {said})"
    if version < OLDEST_PIP:
        return (f"pip {version[0]}.{version[1]} in {python} is too old for the resolve (it needs pip "
                f"{'.'.join(map(str, OLDEST_PIP))} or later, for --report)")
    return None


def find_interpreter(version: str) -> str | None:
    """A Python X.Y on this machine (PATH, then pyenv's versions), checked by running it."""
    import glob
    import shutil
    candidates = [shutil.which(f"python{version}")] + sorted(
        glob.glob(str(Path.home() / f".pyenv/versions/{version}.*/bin/python{version}")), reverse=True)
    for c in candidates:
        if not c:
            continue
        r = proc.capture([c, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], timeout=20)
        if r.ok and r.tail and r.tail[-1].strip() == version:
            return c
    return None
