"""A wheelhouse: every wheel a stack's pip steps install, made ahead with `pip wheel`, so a build runs with no
network at all (`rocmkit build --wheelhouse DIR --network none`): for air-gapped clusters, and for builders
whose engine has no network (this project's CI).

`pip wheel` resolves like the image's pip will and turns every sdist into a wheel, so nothing is built inside
the image. Because it builds with the Python that runs it, that Python must be the stack's version.
What a stack's git components install is known only from their sources, so those stacks still need the
index for them.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..runtime import proc
from ..errors import EnvironmentMissing, Failed, UsageError
from ..fileio import write_atomic
from ..output import document
from ..stacks import Stack

INDEX_FILE = "wheelhouse.json"
FILE_SUFFIXES = (".whl", ".tar.gz", ".zip")
TIMEOUT_S = 3600


@dataclass(frozen=True)
class PipCall:
    """One `pip wheel` invocation: requirements and where to look beyond the index."""

    requirements: tuple[str, ...]
    extra_index_urls: tuple[str, ...] = ()
    find_links: tuple[str, ...] = ()
    no_deps: bool = False

    def argv(self, python: str, dest: Path) -> list[str]:
        out = [python, "-m", "pip", "wheel", "--wheel-dir", str(dest), "--progress-bar", "off"]
        for url in self.extra_index_urls:
            out += ["--extra-index-url", url]
        for url in self.find_links:
            out += ["--find-links", url]
        if self.no_deps:
            out.append("--no-deps")
        return out + list(self.requirements)


def rocmkit_requirements() -> list[str]:
    """What rocmkit's wheel requires in the image (the final stage installs rocmkit offline too); not the host
    CLI's own dependencies (selfwheel.IMAGE_REQUIREMENTS)."""
    from .selfwheel import IMAGE_REQUIREMENTS

    return list(IMAGE_REQUIREMENTS)


def pip_calls(stack: Stack) -> list[PipCall]:
    """What the stack's pip steps install, as `pip wheel` calls: one resolution of the base pins, the pip
    components and rocmkit's requirements (the image resolves them together too), then each no-deps component."""
    base = stack.base
    # A wheel component's index pin joins the final resolution; a wheel URL is a file of the context, not here.
    pinned = [c for c in stack.pip_components if not c.no_deps] + [c for c in stack.wheel_components if c.pip]
    together = PipCall(
        requirements=tuple(base.pip) + tuple(r for c in pinned for r in c.pip) + tuple(rocmkit_requirements()),
        extra_index_urls=tuple(sorted({u for u in [base.pip_extra_index_url] + [c.extra_index_url for c in pinned]
                                       if u})),
        find_links=(base.pip_find_links,) if base.pip_find_links else ())
    alone = [PipCall(requirements=c.pip, extra_index_urls=(c.extra_index_url,) if c.extra_index_url else (),
                     no_deps=True) for c in stack.pip_components if c.no_deps]
    rw = base.rocm_wheels
    if rw:  # installed in the base stage before the rest, for every target the stack has
        rocm = PipCall(requirements=rw.requirements(stack.targets),
                       extra_index_urls=(rw.index_url,) if rw.index_url else (),
                       find_links=(rw.find_links,) if rw.find_links else ())
        return [rocm, together, *alone]
    return [together, *alone]


def python_version(python: str, purpose: str = "to make the wheelhouse") -> str:
    result = proc.capture([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], timeout=60)
    version = result.output.strip().splitlines()[-1] if result.tail else ""
    if result.returncode != 0 or not re.fullmatch(r"3\.\d+", version):
        raise EnvironmentMissing(f"cannot run {python} {purpose}: {result.output.strip()[:200]}",
                                 hint="name a Python with --python PATH")
    return version


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def make(stack: Stack, dest: Path, *, python: str | None = None, on_line: Callable[[str], None] | None = None,
         timeout_s: float = TIMEOUT_S) -> dict:
    """Fill `dest` with the stack's wheels; returns the wheelhouse document (also written as wheelhouse.json).
    Files appear in `dest` only once every call succeeded; other files there are left alone."""
    python = python or sys.executable
    if stack.git_components:
        raise UsageError(f"stack {stack.name} builds {len(stack.git_components)} component(s) from git, whose "
                         "requirements only their sources name", hint="a wheelhouse serves stacks of pip pins; "
                         "build stacks with git components with the network")
    version = python_version(python)
    if version != stack.python:
        raise UsageError(f"{python} is Python {version}; stack {stack.name} wants {stack.python}",
                         hint=f"pip wheel builds for the Python that runs it: --python /path/to/python{stack.python}")
    dest.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".rocmkit-wheelhouse-", dir=dest.parent))
    try:
        calls = pip_calls(stack)
        for call in calls:
            result = proc.run(call.argv(python, staging), timeout=timeout_s, on_line=on_line, what="pip wheel")
            if not result.ok:
                why = "timed out" if result.timed_out else f"exit {result.returncode}"
                raise Failed(f"pip wheel for stack {stack.name} failed ({why})", hint="\n".join(result.tail[-15:]))
        files = {}
        for f in sorted(staging.iterdir()):
            if f.name.endswith(FILE_SUFFIXES):
                os.replace(f, dest / f.name)
                files[f.name] = sha256(dest / f.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    doc = document("wheelhouse", {"stack": stack.name, "python": version,
                                  "requirements": [r for c in calls for r in c.requirements], "files": files})
    write_atomic(dest / INDEX_FILE, json.dumps(doc, indent=1) + "\n")
    return doc


def check_dir(path: Path) -> Path:
    """A folder given as --wheelhouse: it must exist and hold wheels."""
    path = Path(path)
    if not path.is_dir():
        raise UsageError(f"--wheelhouse {path}: no such folder", hint="make one with `rocmkit wheelhouse --stack NAME DIR`")
    if not any(f.name.endswith(FILE_SUFFIXES) for f in path.iterdir()):
        raise UsageError(f"--wheelhouse {path}: holds no wheels", hint="make one with `rocmkit wheelhouse --stack NAME DIR`")
    return path.resolve()
