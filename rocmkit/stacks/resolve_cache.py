"""The resolve's memory: a stack that resolved answers again for a day without asking pip, so a second `rocmkit
build` of the same stack does not wait a minute and a half for the same answer. The key is everything the answer
depends on (the stack file's text, the git sources' folders, the local wheel folders, the index, the pip that ran
it, whether a local Python of the stack's version exists); a conflict is never kept, so it is asked of pip each
time. Kept as JSON under $XDG_CACHE_HOME (or ~/.cache)/rocmkit/resolve/."""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path

TTL_S = 24 * 3600  # a stack that resolved resolves again until its index changes: a day, then ask again
FIELDS = ("stack", "python", "status", "mode", "conflicts", "not_checked", "git_requirements", "built_from_sdist",
          "resolved")
# the answers kept: pip resolved everything it was given (an unread git component's requirements are the same
# unread ones until a --source, which changes the key, is given)
KEPT = ("ok", "unread")
# the answers' form: an answer kept before git notes said how to read them (and "unread" was a status) is not reused
FORMAT = "2"


def key(stack_text: str, sources: dict[str, str], find_links: list[str], index_url: str, pip: str,
        local_python: bool) -> str:
    parts = [FORMAT, stack_text, json.dumps(sorted(sources.items())), json.dumps(sorted(find_links)), index_url, pip,
             str(local_python)]
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:32]


def folder() -> Path:
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "rocmkit" / "resolve"


def cached(name: str, result_type):
    """The earlier answer that the stack resolves, as a `result_type` (resolve.Result), if younger than TTL_S."""
    path = folder() / f"{name}.json"
    try:
        age = time.time() - path.stat().st_mtime
        doc = json.loads(path.read_text()) if age < TTL_S else None
    except (OSError, ValueError):
        return None
    if not isinstance(doc, dict) or doc.get("status") not in KEPT:
        return None
    r = result_type(**{k: doc[k] for k in FIELDS if k in doc})
    r.mode = f"{r.mode}; the answer of {age / 60:.0f} min ago (the same stack file, pip and index), kept for a day"
    return r


def keep(name: str, doc: dict) -> None:
    from ..fileio import write_atomic

    try:
        folder().mkdir(parents=True, exist_ok=True)
        write_atomic(folder() / f"{name}.json", json.dumps(doc))
    except OSError:
        pass  # no cache where the home folder is not writable: the next resolve asks pip again
