"""Atomic file writes: a reader never sees half a file, and user files are kept unless forced."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from .errors import UsageError


def write_atomic(path: str | os.PathLike, text: str | bytes, *, force: bool = True, mode: int | None = None) -> Path:
    """Write `text` to `path` through a temporary file in the same folder and `os.replace`.

    With force=False an existing file is an error, so a user's file is never overwritten by surprise.
    """
    target = Path(path)
    if not force and target.exists():
        raise UsageError(f"{target} already exists", hint="pass --force to overwrite it, or choose another path")
    target.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode() if isinstance(text, str) else text
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is None:  # mkstemp makes 0600; a written file gets the mode a plain open() would give it
            umask = os.umask(0)
            os.umask(umask)
            mode = 0o666 & ~umask
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target
