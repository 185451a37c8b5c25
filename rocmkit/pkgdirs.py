"""Where an installed package lies, found without importing it (the doctor and certify's setup read files in
packages they must not import: a broken or heavy package would fail or slow the check)."""

from __future__ import annotations

import importlib.util


def package_dirs(package: str) -> list[str]:
    """The folders of a top-level package (a namespace package, such as megatron, may lie in several), or [].
    Only a top-level name: find_spec of a submodule imports its parents (megatron.core's __init__ alone imports
    most of megatron-core)."""
    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return []
    return list(spec.submodule_search_locations or []) if spec else []


def package_dir(package: str) -> str | None:
    """The first folder of a package, or None where it is not installed."""
    return next(iter(package_dirs(package)), None)
