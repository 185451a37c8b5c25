"""Run a function on a module right after it is first imported: how rocmkit's CPU platform for verl adjusts
vLLM's and verl's modules in every process (Ray workers, vLLM's engine) without importing them where they are
never used."""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
from typing import Callable


class _AfterImport(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Runs a function on a module right after it is first imported (or now, if it already is)."""

    def __init__(self, name: str, fix: Callable):
        self.name, self.fixes, self._spec = name, [fix], None

    def find_spec(self, fullname, path=None, target=None):
        if fullname != self.name or self._spec is not None:
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(fullname)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return None
        self._spec = spec
        self._loader = spec.loader
        spec.loader = self
        return spec

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._loader.exec_module(module)
        module.__spec__.loader = self._loader
        sys.meta_path.remove(self)
        for fix in self.fixes:  # in the order they were asked for
            fix(module)


def after_import(name: str, fix: Callable) -> None:
    """fix(module) once `name` is imported; several fixes of one module run in the order they were asked for
    (the CPU platform's weight-sync fix, then a test's hook around the fixed method)."""
    if name in sys.modules:
        fix(sys.modules[name])
        return
    waiting = next((f for f in sys.meta_path if isinstance(f, _AfterImport) and f.name == name), None)
    if waiting is None:
        sys.meta_path.insert(0, _AfterImport(name, fix))
    elif fix not in waiting.fixes:
        waiting.fixes.append(fix)
