"""The CycloneDX library for the build context: a copy of the installed cyclonedx-python-lib and what it
needs (all pure Python) into rocmkit-dist/sbom-lib/, which the final stage mounts on PYTHONPATH for the one
step that writes the SBOM. Copied from this host's installation, so a build needs no index for it (offline
builds and wheelhouses stay as they were) and the image's Python environment never gains it."""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
from pathlib import Path

from ..errors import EnvironmentMissing

ROOT_DIST = "cyclonedx-python-lib"
LIB_DIR = "sbom-lib"  # inside rocmkit-dist/
_SKIP = ("__pycache__",)


def _closure(root: str) -> list[importlib.metadata.Distribution]:
    """The distribution and everything it requires outside extras (markers are ignored: the image's
    Python may need what this one does not, e.g. typing_extensions)."""
    out: dict[str, importlib.metadata.Distribution] = {}
    todo = [root]
    while todo:
        name = re.sub(r"[-_.]+", "-", todo.pop()).lower()
        if name in out:
            continue
        try:
            dist = importlib.metadata.distribution(name)
        except importlib.metadata.PackageNotFoundError:
            if name == ROOT_DIST:
                raise EnvironmentMissing("the CycloneDX library is not installed, and every build writes an SBOM "
                                         "with it (a broken install: rocmkit depends on it)",
                                         hint="pip install --force-reinstall rocmkit, or pip install "
                                              "cyclonedx-python-lib") from None
            continue  # a requirement only some Pythons need, absent here
        out[name] = dist
        for req in dist.requires or []:
            if "extra ==" not in req:
                todo.append(re.split(r"[\s\[<>=!~;(]", req, 1)[0])
    return list(out.values())


def check_installed() -> None:
    """Raise EnvironmentMissing (exit 3) before a build starts, not after it ran for an hour."""
    _closure(ROOT_DIST)


def vendor(dest: Path) -> Path:
    """Copy the library's files (hard links where possible, times kept: an unchanged library keeps the
    build cache) into `dest`, replacing what was there."""
    dists = _closure(ROOT_DIST)
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for dist in dists:
        base = Path(str(dist.locate_file(""))).resolve()
        for rel in dist.files or []:
            src = Path(str(dist.locate_file(rel))).resolve()
            if base not in src.parents or any(p in _SKIP for p in rel.parts) or not src.is_file():
                continue  # scripts outside site-packages, caches
            target = dest / src.relative_to(base)
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(src, target)
            except OSError:
                shutil.copy2(src, target)
    return dest
