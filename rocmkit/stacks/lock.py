"""A stack's lock: the digest each base image tag resolved to, and the git pins `rocmkit lock` checked
upstream. Machine-written JSON beside the stack file (<stack>.lock.json): the stack TOML is hand-written
with comments, and tomllib reads TOML but cannot write it back, so the lock lives in a file of its own.

Pure: reading a lock document and comparing it with a stack; resolving refs is rocmkit/refs/."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ..errors import InputFileError

LOCK_SCHEMA = "rocmkit.lock/v1"
LOCK_SUFFIX = ".lock.json"
DIGEST_RE = re.compile(r"^sha256:[0-9a-f]{64}$")
_HINT = "the lock is written by `rocmkit lock`: delete it and run `rocmkit lock` again"


@dataclass(frozen=True)
class GitPin:
    git: str
    commit: str
    tag: str | None


@dataclass(frozen=True)
class Lock:
    path: str
    stack: str
    images: dict[str, str]  # image reference as the stack writes it -> sha256 digest of its manifest (list)
    git: dict[str, GitPin]  # component name -> the pin that was checked upstream
    stale: tuple[str, ...] = field(default=(), compare=False)  # how the lock no longer matches its stack

    def digest_for(self, image: str) -> str | None:
        return self.images.get(image)


def lock_path(stack_path: str | Path) -> Path:
    """verl-vllm.toml -> verl-vllm.lock.json, in the same folder."""
    p = Path(stack_path)
    return p.with_name((p.stem if p.suffix == ".toml" else p.name) + LOCK_SUFFIX)


def stack_images(stack) -> list[str]:
    """Every base image reference the stack can build from: base.image and each image_per_arch."""
    return sorted({stack.base.image, *stack.base.image_per_arch.values()})


def stack_git_pins(stack) -> dict[str, GitPin]:
    """The git components pinned to a commit (a mutable component has no pin to lock)."""
    return {c.name: GitPin(c.git, c.commit, c.tag) for c in stack.git_components if c.commit}


def parse_lock(text: str, path: str) -> Lock:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputFileError(path, "", f"not valid JSON: {exc}", _HINT) from None
    if not isinstance(data, dict) or data.get("schema") != LOCK_SCHEMA:
        raise InputFileError(path, "schema", f"not a {LOCK_SCHEMA} document", _HINT)
    images, git = data.get("images"), data.get("git")
    if not isinstance(images, dict) or not isinstance(git, dict) or not isinstance(data.get("stack"), str):
        raise InputFileError(path, "", "needs stack (a name), images and git (tables)", _HINT)
    for ref, digest in images.items():
        if not isinstance(digest, str) or not DIGEST_RE.match(digest):
            raise InputFileError(path, f"images.{ref}", f"invalid digest {digest!r}", "sha256:<64 hex digits>")
    pins = {}
    for name, pin in git.items():
        if not isinstance(pin, dict) or not isinstance(pin.get("git"), str) or not isinstance(pin.get("commit"), str):
            raise InputFileError(path, f"git.{name}", "needs git and commit", _HINT)
        pins[name] = GitPin(pin["git"], pin["commit"], pin.get("tag"))
    return Lock(path=path, stack=data["stack"], images=dict(images), git=pins)


def lock_document(stack, images: dict[str, str]) -> dict[str, Any]:
    """What `rocmkit lock` writes: sorted, no timestamps, so a run that finds nothing new rewrites nothing."""
    return {
        "schema": LOCK_SCHEMA,
        "stack": stack.name,
        "note": "written by `rocmkit lock`; do not edit (run `rocmkit lock` again)",
        "images": dict(sorted(images.items())),
        "git": {n: {"git": p.git, "commit": p.commit, "tag": p.tag} for n, p in sorted(stack_git_pins(stack).items())},
    }


def stale_reasons(stack, lock: Lock) -> list[str]:
    """Where the lock no longer describes the stack (the stack file changed after `rocmkit lock`)."""
    out = []
    if lock.stack != stack.name:
        out.append(f"lock is for stack {lock.stack!r}, not {stack.name!r}")
    wanted = stack_images(stack)
    out += [f"base image {i} is not in the lock" for i in wanted if i not in lock.images]
    out += [f"lock has base image {i}, which the stack no longer uses" for i in lock.images if i not in wanted]
    pins = stack_git_pins(stack)
    for name, pin in pins.items():
        old = lock.git.get(name)
        if old is None:
            out.append(f"component {name} is not in the lock")
        elif old != pin:
            out.append(f"component {name}: the stack pins {_pin(pin)}, the lock has {_pin(old)}")
    out += [f"lock has component {n}, which the stack no longer pins" for n in lock.git if n not in pins]
    return out


def attach(stack, lock: Lock):
    """The stack with its lock, the lock knowing where it is stale."""
    return replace(stack, lock=replace(lock, stale=tuple(stale_reasons(stack, lock))))


def _pin(p: GitPin) -> str:
    return f"{p.git} @ {p.commit[:12]}" + (f" (tag {p.tag})" if p.tag else "")
