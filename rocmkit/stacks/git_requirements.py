"""The requirements a stack's git components declare, for `stacks --resolve`: read from local checkouts given
with `--source NAME=DIR` (GitHub is never fetched). A component whose requirements were not read is said so,
with the commands that make them read: a resolve that left one out resolves only part of the stack, and says
that rather than "resolves" (resolve.py's status "unread", exit 4)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

from ..tomlread import load_toml_file
from .model import Component, Stack


def requirement_file(path: Path, seen: set[Path], pin) -> list:
    """The requirements of a pip requirements file, each a `pin(requirement, where)` with its file:line (`-r`
    files followed; other options, such as index URLs, are not the stack's and are left out)."""
    if path in seen or not path.is_file():
        return []
    seen.add(path)
    out: list = []
    for i, raw in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
        line = re.sub(r"(^|\s)#.*$", "", raw).strip()
        if line.startswith(("-r ", "--requirement ")):
            out += requirement_file(path.parent / line.split(None, 1)[1].strip(), seen, pin)
            continue
        if not line or line.startswith("-"):
            continue
        try:
            Requirement(line)
        except InvalidRequirement:
            continue
        out.append(pin(line, f"{path}:{i}"))
    return out


def how_to_read(c: Component) -> str:
    """The commands that make `--resolve` read a component's requirements: a checkout at its pin, then --source."""
    folder = f"./{c.name}"
    ref = c.ref
    clone = f"git clone {shlex.quote(c.git or '')} {folder}" + (f" && git -C {folder} checkout {ref}" if ref else "")
    return f"`{clone}`, then add --source {c.name}={folder}"


def _declared(c: Component) -> str:
    return ", ".join(c.requirements) or "its pyproject's dependencies"


def git_requirement_pins(stack: Stack, sources: dict[str, str], pin) -> tuple[list, list[dict]]:
    """The requirements git components declare, read from local sources; a note per component: {component, read,
    detail} and, where something was not read, `how` to read it."""
    pins: list = []
    notes: list[dict] = []
    for c in stack.git_components:
        src = sources.get(c.name)
        if not src:
            notes.append({"component": c.name, "read": False,
                          "detail": f"requirements not read ({_declared(c)}: no source given)", "how": how_to_read(c)})
            continue
        root = Path(src) / c.subdir
        read: list[str] = []
        for rel in c.requirements:
            f = root / rel
            if not f.is_file():
                notes.append({"component": c.name, "read": False, "detail": f"{f}: no such requirements file",
                              "how": f"give --source {c.name}= a checkout at {c.ref or 'the stack pin'} (it has "
                                     f"{rel}), or correct the stack's requirements"})
                continue
            pins += requirement_file(f, set(), pin)
            read.append(rel)
        pyproject = root / (c.pyproject or "pyproject.toml")
        if pyproject.is_file():
            project = load_toml_file(pyproject).get("project") or {}
            deps = project.get("dependencies") if "dependencies" not in (project.get("dynamic") or []) else None
            if isinstance(deps, list):
                for d in deps:
                    try:
                        Requirement(d)
                    except InvalidRequirement:
                        continue
                    pins.append(pin(d, f"{pyproject} [project].dependencies"))
                read.append(f"{pyproject.name} [project].dependencies ({len(deps)})")
        if read:
            notes.append({"component": c.name, "read": True, "detail": "read " + ", ".join(read)})
        else:  # setup.py's install_requires are code, not data: rocmkit does not run it to find them
            notes.append({"component": c.name, "read": False,
                          "detail": "declares no requirements rocmkit can read (no requirements file in the stack, "
                                    "no static [project].dependencies)",
                          "how": f"name its requirement files in the stack's component ({c.name}: requirements = "
                                 "[\"requirements.txt\"])"})
    return pins, notes
