"""Moved to rocmkit.runtime.engine; this name stays for code not yet moved over (the same module object, so a
monkeypatch through either name reaches it)."""

import sys

from .runtime import engine as _moved

sys.modules[__name__] = _moved
