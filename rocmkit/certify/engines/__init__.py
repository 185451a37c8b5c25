"""certify's engines: one folder each (trl/, verl/, miles/), each with an `engine` module defining ENGINE, a
CertifyEngine (base.py). The registry is read from the folders of this package, so a new engine is one new folder
(and its tests): `--engine` offers it, the flow runs it through the shared steps, and `rocmkit slurm` offers it
when it has a cluster job. Nothing outside this package compares engine names. This module imports no engine
and no host-side code until asked (an engine folder's module may run in a target)."""

from __future__ import annotations

import importlib
import pkgutil
from typing import TYPE_CHECKING

from ...errors import UsageError

if TYPE_CHECKING:
    from .base import CertifyEngine

_REGISTRY: dict[str, CertifyEngine] = {}


def registry() -> dict[str, CertifyEngine]:
    """Every engine by name, in the order --help lists them (TRL first: the default)."""
    if not _REGISTRY:
        found = []
        for info in pkgutil.iter_modules(__path__):
            if not info.ispkg:  # base.py: the interface, no engine
                continue
            engine = getattr(importlib.import_module(f"{__name__}.{info.name}.engine"), "ENGINE", None)
            if engine is not None:
                found.append(engine())
        from ..settings import Settings

        default = Settings().engine
        for e in sorted(found, key=lambda e: (e.name != default, e.name)):  # the default first, then by name
            _REGISTRY[e.name] = e
    return _REGISTRY


def names() -> list[str]:
    return list(registry())


def get(name: str) -> CertifyEngine:
    try:
        return registry()[name]
    except KeyError:
        raise UsageError(f"--engine {name!r}", hint=f"one of: {', '.join(names())}") from None


def of(s) -> CertifyEngine:
    return get(s.engine)


def cluster_engines() -> dict[str, CertifyEngine]:
    """The engines `rocmkit slurm` can start on a Ray cluster."""
    return {n: e for n, e in registry().items() if e.cluster is not None}
