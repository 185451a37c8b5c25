"""Stacks: the schema of a stack file (model, fields, parse) and loading, built-in or a user's own.

Every value that will reach a Dockerfile is checked against a narrow pattern, so that nothing a stack file
says can smuggle a newline, quote or shell metacharacter into a RUN line. The built-in stack files live in
rocmkit/resources/stacks/ and are found through importlib.resources.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from ..errors import UsageError
from ..tomlread import load_toml_file, load_toml_text
from .fields import IMAGE_RE, NAME_RE, SCHEMA
from .lock import LOCK_SUFFIX, attach, lock_path, parse_lock
from .model import AmdgpuIds, Asset, Base, BuildKind, Component, ComponentKind, EnvVar, Patch, PostStep, PythonFrom, Stack
from .parse import parse_stack

__all__ = ["SCHEMA", "IMAGE_RE", "NAME_RE", "AmdgpuIds", "Asset", "Patch", "Base", "BuildKind", "Component", "ComponentKind",
           "EnvVar", "PostStep", "PythonFrom", "Stack", "parse_stack", "builtin_names", "builtin_lock_path",
           "load_builtin", "load_file", "load", "all_builtin", "Source", "source"]


def _builtin_folder() -> Any:
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
    res = _builtin_folder().joinpath(f"{name}.toml")
    on_disk = Path(str(res))
    return Source(res.read_text(encoding="utf-8"), f"rocmkit/resources/stacks/{name}.toml",
                  on_disk if on_disk.is_file() else None, _builtin_folder(), True)


def builtin_names() -> list[str]:
    return sorted(p.name[:-5] for p in resources.files("rocmkit.resources.stacks").iterdir() if p.name.endswith(".toml"))


def load_builtin(name: str) -> Stack:
    stack = source(name).parse()
    locked = _builtin_folder().joinpath(f"{name}{LOCK_SUFFIX}")
    if locked.is_file():
        origin = f"rocmkit/resources/stacks/{name}{LOCK_SUFFIX}"
        stack = attach(stack, parse_lock(locked.read_text(encoding="utf-8"), origin))
    return stack


def load_file(path: str | Path) -> Stack:
    stack = parse_stack(load_toml_file(path), str(path), Path(path).parent)
    locked = lock_path(path)
    if locked.is_file():
        stack = attach(stack, parse_lock(locked.read_text(encoding="utf-8"), str(locked)))
    return stack


def builtin_lock_path(name: str) -> Path:
    """Where `rocmkit lock` writes a built-in stack's lock: beside its TOML in the package (a checkout or
    an editable install; an installed wheel's folder is not meant to be written)."""
    return Path(str(_builtin_folder())) / f"{name}{LOCK_SUFFIX}"


def load(stack: str | None = None, stack_file: str | Path | None = None, default: str = "verl-vllm") -> Stack:
    """The stack named by --stack or --stack-file (not both), else the default."""
    if stack and stack_file:
        raise UsageError("--stack and --stack-file are alternatives; give one")
    if stack_file:
        return load_file(stack_file)
    return load_builtin(stack or default)


def all_builtin() -> list[Stack]:
    return [load_builtin(n) for n in builtin_names()]
