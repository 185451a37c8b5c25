"""Code run as an unprivileged user, for the tests of what rocmkit does without root's permissions."""

from __future__ import annotations

import ctypes  # noqa: F401 - loaded here: rocmkit's process runner imports it on first use, and the child
import json    # that dropped root cannot read this machine's standard library (it lies under /root)
import os


def as_nobody(fn):
    """fn() in a child that dropped root (uid/gid 65534), its JSON result back through a pipe."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.close(r)
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            os.write(w, json.dumps(fn()).encode())
        except BaseException:  # noqa: BLE001 - the parent shows it
            import traceback

            os.write(w, json.dumps({"child_error": traceback.format_exc()}).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        data = f.read()
    os.waitpid(pid, 0)
    result = json.loads(data)
    assert not (isinstance(result, dict) and "child_error" in result), result.get("child_error")
    return result
