"""Stacks: the schema of a stack file (model, fields, parse) and loading, built-in or a user's own.

Every value that will reach a Dockerfile is checked against a narrow pattern, so that nothing a stack file
says can smuggle a newline, quote or shell metacharacter into a RUN line. The built-in stack files live in
rocmkit/resources/stacks/ and are found through importlib.resources.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..tomlread import load_toml_file, load_toml_text
from .fields import IMAGE_RE, NAME_RE, SCHEMA
from .lock import LOCK_SUFFIX, attach, lock_path, parse_lock
from .model import (AmdgpuIds, Asset, Base, BuildKind, Component, ComponentKind, EnvVar, Patch, PostStep, Provided,
                    PythonFrom, Stack)
from .parse import parse_stack

__all__ = ["SCHEMA", "IMAGE_RE", "NAME_RE", "AmdgpuIds", "Asset", "Patch", "Base", "BuildKind", "Component", "ComponentKind",
           "EnvVar", "PostStep", "Provided", "PythonFrom", "Stack", "parse_stack", "builtin_folder", "builtin_names",
           "builtin_lock_path",
           "LockPlace", "lock_place", "load_builtin", "load_file", "load", "all_builtin", "Source", "source"]


def builtin_folder() -> Any:
    """The built-in stacks' folder as importlib.resources finds it wherever rocmkit is installed (a checkout,
    site-packages, a --target folder, a zip): the folder their `patches/` and `files/` paths are relative to."""
    return resources.files("rocmkit.resources.stacks")


@dataclass(frozen=True)
class Source:
    """A stack file's text and where its relative paths (`patches`, `[amdgpu_ids] file`) resolve.

    `origin` names the file in messages only; it is never opened as a path. A built-in stack's `beside` is its
    package folder (so `rocmkit outdated verl-vllm` works from any folder); a user's stack file's is its own
    folder (a relative path means "beside this file")."""

    text: str
    origin: str
    path: Path | None  # the file on disk, when there is one (None: a packaged file inside a zip)
    beside: Any  # a Path or an importlib.resources Traversable
    builtin: bool

    def parse(self, text: str | None = None) -> Stack:
        """The stack this source (or `text`, an edited copy of it) parses to; no lock attached."""
        return parse_stack(load_toml_text(self.text if text is None else text, self.origin), self.origin, self.beside)


def source(name: str | None = None, path: str | Path | None = None, default: str = "verl-vllm") -> Source:
    """The source of the built-in stack `name` or of the stack file `path` (not both), else of the default."""
    if name and path:
        raise UsageError("a built-in stack and a stack file are alternatives; give one")
    if path is not None:
        p = Path(path)
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"{p}: cannot read ({exc.strerror or exc})") from None
        except UnicodeDecodeError:
            raise UsageError(f"{p}: not a UTF-8 text file") from None
        return Source(text, str(p), p, p.parent, False)
    name = name or default
    if name not in builtin_names():
        raise UsageError(f"unknown stack {name!r}", hint=f"built-in stacks: {', '.join(builtin_names())}; "
                                                          "or pass --stack-file PATH")
    res = builtin_folder().joinpath(f"{name}.toml")
    on_disk = Path(str(res))
    return Source(res.read_text(encoding="utf-8"), f"rocmkit/resources/stacks/{name}.toml",
                  on_disk if on_disk.is_file() else None, builtin_folder(), True)


def builtin_names() -> list[str]:
    return sorted(p.name[:-5] for p in resources.files("rocmkit.resources.stacks").iterdir() if p.name.endswith(".toml"))


def load_builtin(name: str) -> Stack:
    return _with_lock(source(name).parse(), lock_place(name=name))


def load_file(path: str | Path) -> Stack:
    return _with_lock(parse_stack(load_toml_file(path), str(path), Path(path).parent), lock_place(path=path))


@dataclass(frozen=True)
class LockPlace:
    """Where one stack's lock lives: the one answer every command uses (lock writes it; render, build, bake,
    slurm, wheelhouse and `lock --check` read it).

    `path` is where `rocmkit lock` writes the lock and where it is read first: a stack file's lock beside the
    file (<stack>.lock.json), a built-in stack's in the current folder (NAME.lock.json). Never rocmkit's
    installed package: it may be read-only or shared, and a pip upgrade deletes what was written there.
    `shipped` is the lock a release of rocmkit carries for a built-in stack (rocmkit/resources/stacks/, made
    by the project's image pipeline), read only where `path` holds none."""

    path: Path
    shipped: Any = None  # an importlib.resources Traversable, or None

    def read(self) -> tuple[str, str] | None:
        """(text, the name messages give it) of the lock in effect, or None where the stack has none."""
        if os.path.isfile(self.path):
            try:
                return self.path.read_text(encoding="utf-8"), str(self.path)
            except (OSError, UnicodeDecodeError) as exc:
                raise UsageError(f"{self.path}: cannot read this lock ({getattr(exc, 'strerror', None) or exc})",
                                 hint="the lock is written by `rocmkit lock`: delete it and run `rocmkit lock` "
                                      "again") from None
        if self.shipped is not None:
            return self.shipped.read_text(encoding="utf-8"), f"rocmkit/resources/stacks/{self.shipped.name}"
        return None


def lock_place(name: str | None = None, path: str | Path | None = None) -> LockPlace:
    """Where the lock of the built-in stack `name`, or of the stack file `path`, lives (see LockPlace)."""
    if path is not None:
        return LockPlace(lock_path(path))
    if name is None:
        raise UsageError("a lock belongs to a built-in stack or a stack file; give one")
    shipped = builtin_folder().joinpath(f"{name}{LOCK_SUFFIX}")
    return LockPlace(builtin_lock_path(name), shipped if shipped.is_file() else None)


def builtin_lock_path(name: str) -> Path:
    """Where `rocmkit lock NAME` writes a built-in stack's lock: NAME.lock.json in the current folder, as uv,
    poetry and pip-compile write theirs in the project being worked on (an absolute path: messages name it)."""
    try:
        here = os.getcwd()
    except OSError as exc:  # the folder was removed under the shell that is still in it
        raise UsageError(f"the current folder is gone ({exc.strerror}): a built-in stack's lock "
                         f"{name}{LOCK_SUFFIX} is read from and written to the current folder",
                         hint="cd into a folder that exists") from None
    return Path(here) / f"{name}{LOCK_SUFFIX}"


def _with_lock(stack: Stack, place: LockPlace) -> Stack:
    found = place.read()
    return attach(stack, parse_lock(*found)) if found else stack


def load(stack: str | None = None, stack_file: str | Path | None = None, default: str = "verl-vllm") -> Stack:
    """The stack named by --stack or --stack-file (not both), else the default."""
    if stack and stack_file:
        raise UsageError("--stack and --stack-file are alternatives; give one")
    if stack_file:
        return load_file(stack_file)
    return load_builtin(stack or default)


def all_builtin() -> list[Stack]:
    return [load_builtin(n) for n in builtin_names()]
