"""Stacks: the schema of a stack file (model, fields, parse) and loading, built-in or a user's own.

Every value that will reach a Dockerfile is checked against a narrow pattern, so that nothing a stack file
says can smuggle a newline, quote or shell metacharacter into a RUN line. The built-in stack files live in
rocmkit/resources/stacks/ and are found through importlib.resources.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from ..errors import UsageError
from ..tomlread import load_toml_file, load_toml_text
from .fields import IMAGE_RE, NAME_RE, SCHEMA
from .lock import LOCK_SUFFIX, attach, lock_path, parse_lock
from .model import AmdgpuIds, Asset, Base, BuildKind, Component, ComponentKind, EnvVar, Patch, PostStep, PythonFrom, Stack
from .parse import parse_stack

__all__ = ["SCHEMA", "IMAGE_RE", "NAME_RE", "AmdgpuIds", "Asset", "Patch", "Base", "BuildKind", "Component", "ComponentKind",
           "EnvVar", "PostStep", "PythonFrom", "Stack", "parse_stack", "builtin_names", "builtin_lock_path",
           "load_builtin", "load_file", "load", "all_builtin"]


def builtin_names() -> list[str]:
    return sorted(p.name[:-5] for p in resources.files("rocmkit.resources.stacks").iterdir() if p.name.endswith(".toml"))


def load_builtin(name: str) -> Stack:
    if name not in builtin_names():
        raise UsageError(f"unknown stack {name!r}", hint=f"built-in stacks: {', '.join(builtin_names())}; "
                                                          "or pass --stack-file PATH")
    res = resources.files("rocmkit.resources.stacks").joinpath(f"{name}.toml")
    origin = f"rocmkit/resources/stacks/{name}.toml"
    stack = parse_stack(load_toml_text(res.read_text(encoding="utf-8"), origin), origin,
                        resources.files("rocmkit.resources.stacks"))
    locked = resources.files("rocmkit.resources.stacks").joinpath(f"{name}{LOCK_SUFFIX}")
    if locked.is_file():
        origin = f"rocmkit/resources/stacks/{name}{LOCK_SUFFIX}"
        stack = attach(stack, parse_lock(locked.read_text(encoding="utf-8"), origin))
    return stack


def load_file(path: str | Path) -> Stack:
    stack = parse_stack(load_toml_file(path), str(path))
    locked = lock_path(path)
    if locked.is_file():
        stack = attach(stack, parse_lock(locked.read_text(encoding="utf-8"), str(locked)))
    return stack


def builtin_lock_path(name: str) -> Path:
    """Where `rocmkit lock` writes a built-in stack's lock: beside its TOML in the package (a checkout or
    an editable install; an installed wheel's folder is not meant to be written)."""
    return Path(str(resources.files("rocmkit.resources.stacks"))) / f"{name}{LOCK_SUFFIX}"


def load(stack: str | None = None, stack_file: str | Path | None = None, default: str = "verl-vllm") -> Stack:
    """The stack named by --stack or --stack-file (not both), else the default."""
    if stack and stack_file:
        raise UsageError("--stack and --stack-file are alternatives; give one")
    if stack_file:
        return load_file(stack_file)
    return load_builtin(stack or default)


def all_builtin() -> list[Stack]:
    return [load_builtin(n) for n in builtin_names()]
