"""Atomic file writes: a reader never sees half a file, and user files are kept unless forced."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path

from .errors import UsageError


def write_atomic(path: str | os.PathLike, text: str | bytes, *, force: bool = True, mode: int | None = None,
                 what: str | None = None) -> Path:
    """Write `text` to `path` through a temporary file in the same folder and `os.replace`.

    With force=False an existing file is an error, so a user's file is never overwritten by surprise. A path that
    cannot be written (a folder, /proc or /sys, a full device, no permission) is a UsageError naming `what` (the
    option, e.g. "--output") and the path, never an OSError's traceback. A character device or FIFO that exists
    (/dev/stdout, a pipe) is written in place: replacing it would put a regular file where the device was (as root,
    `-o /dev/null` would have replaced the system's /dev/null).
    """
    target = Path(path)
    label = f"{what} {target}" if what else str(target)
    try:
        st = os.stat(target)
    except (OSError, ValueError):
        st = None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise UsageError(f"{label}: is a folder, not a file", hint="give a file's path")
    data = text.encode() if isinstance(text, str) else text
    if st is not None and (stat.S_ISCHR(st.st_mode) or stat.S_ISFIFO(st.st_mode)):
        try:
            with open(target, "wb") as handle:
                handle.write(data)
        except OSError as exc:
            raise UsageError(f"{label}: cannot write it ({exc.strerror})") from None
        return target
    if not force and st is not None:
        raise UsageError(f"{label} already exists", hint="pass --force to overwrite it, or choose another path")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise UsageError(f"{label}: cannot write there ({exc.strerror}: {exc.filename or target.parent})",
                         hint="choose a path in a folder you can write to") from None
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
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise UsageError(f"{label}: cannot write it ({exc.strerror})", hint="choose a path you can write to") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def check_writable(path: str | os.PathLike, *, hint: str = "choose a path in a folder you can write to",
                   what: str | None = None) -> None:
    """Refuse, before any slow work, a file `write_atomic` could not write: a folder in its place, or a folder it
    cannot make a file in (read-only, /proc, no permission). Asks the file system itself, by making and removing
    a temporary file there: os.access answers for root as if everything were writable."""
    target = Path(path)
    label = f"{what} {target}" if what else str(target)  # the option that named it, as write_atomic says it
    if target.is_dir():
        raise UsageError(f"{label}: is a folder, not a file", hint=hint)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as exc:
        raise UsageError(f"{label}: cannot write it: {target.parent} takes no new file ({exc.strerror})",
                         hint=hint) from None
    os.close(fd)
    Path(tmp).unlink(missing_ok=True)
