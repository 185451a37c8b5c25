"""The opt-in audit of `rocmkit doctor --code-objects` (and of every `doctor --image`): the code objects of
the shared objects in this interpreter's site-packages, and the JIT caches it would load from. Recorded in the
process facts, so `--capture` carries them to `--root`."""

from __future__ import annotations

import site
import sysconfig


def site_dirs() -> list[str]:
    dirs = [sysconfig.get_paths().get(k) for k in ("purelib", "platlib")]
    try:
        dirs += site.getsitepackages()
    except AttributeError:  # some virtualenv site modules lack it
        pass
    out: list[str] = []
    for d in dirs:
        if d and d not in out:
            out.append(d)
    return out


def audit_environment() -> dict:
    from .codeobjects import audit_dirs
    from .envaudit import jit_caches

    return {"code_objects": audit_dirs(site_dirs()), "jit_caches": jit_caches()}
