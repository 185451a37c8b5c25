"""Moved to rocmkit.runtime.container; this name stays for code not yet moved over (the same module object)."""

import sys

from ..runtime import container as _moved

sys.modules[__name__] = _moved
