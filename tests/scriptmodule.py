"""A script of the repository that is not a package module (benchmarks/, .ci/) imported by its path, for tests."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]


def load(relative: str) -> ModuleType:
    """The script at REPO/relative as a module, named after its file."""
    path = REPO / relative
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
