"""The files a stack names relative to itself (`patches`, `[amdgpu_ids] file`): the error when one is missing.

A built-in stack copied out for editing keeps its relative paths (`patches/x.patch`), and fails until those
files are copied beside it too. They are not read from rocmkit's own copies instead: a stack's relative path
means "beside this file", and a silent fallback would build the user's stack from whatever the installed
rocmkit ships under that name. The error says which file, where it was looked for, and, when rocmkit's
built-in stacks ship a file at that path, the command that copies it.
"""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from ..errors import InputFileError


def missing(path: str, field: str, rel: str, beside: Any, what: str, allowed: str) -> InputFileError:
    """The InputFileError for `rel` (a `what`: "patch file", "file") not found beside the stack file."""
    looked = beside.joinpath(rel)
    err = InputFileError(path, field, f"no such {what} {rel!r} beside the stack file (looked for {looked})", allowed)
    if _is_builtin_folder(beside):
        # A built-in stack reads its files from rocmkit's own package: one missing there is a broken install,
        # and copying files into the user's folder would not reach it.
        err.hint = ("rocmkit's installed package lacks a file its built-in stack names: reinstall rocmkit "
                    "(`pip install --force-reinstall --no-deps rocmkit`), or from a checkout `pip install -e .`")
        return err
    shipped = _builtin(rel)
    if shipped is not None and Path(str(shipped)) != Path(str(looked)):
        # Every folder of files the built-in stacks name, in one command: one missing file is rarely the last.
        up = len(Path(rel).parts) - 1  # from the file to the folder its relative path starts in
        here, there = Path(str(shipped)).parents[up], Path(str(looked)).parents[up]
        folders = sorted(p for p in here.iterdir() if p.is_dir() and not p.name.startswith(("_", ".")))
        err.hint = (f"rocmkit's built-in stacks ship {rel}: a copy of a built-in stack needs the files it names "
                    f"beside it too: `cp -r {' '.join(shlex.quote(str(p)) for p in folders)} "
                    f"{shlex.quote(str(there))}/`")
    return err


def _is_builtin_folder(beside: Any) -> bool:
    from importlib import resources

    try:
        return str(beside) == str(resources.files("rocmkit.resources.stacks"))
    except (OSError, ValueError):
        return False


def _builtin(rel: str):
    from importlib import resources

    try:
        shipped = resources.files("rocmkit.resources.stacks").joinpath(rel)
        return shipped if shipped.is_file() else None
    except (OSError, ValueError):
        return None
