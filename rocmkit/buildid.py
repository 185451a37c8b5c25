"""Which rocmkit this is: its version, a build identity and where it was installed from.

The version alone does not tell two rocmkits apart (every commit says 0.1.0 until a release), and a fleet whose
nodes run different rocmkits compares different facts: an older one reports less, and what it does not report
cannot differ. So every doctor document carries this identity, and `rocmkit doctor --fleet` fails nodes that
differ in it. The build is a hash of the package's own .py files (their paths and bytes), so two commits that
change any code or template differ while two installs of one commit agree, whether from a wheel, an editable
checkout or an image. Computed once per process, from ~250 files: about 15 ms.

`source` is what pip recorded about the install (PEP 610's direct_url.json: a git URL and commit, a local
folder, a wheel's URL), so a fix can say what to install to get the same build; None when installed from an index.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

BUILD_PREFIX = "py-sha256:"
BUILD_HEX = 12  # 48 bits: two builds of one fleet colliding by chance is not a worry


@functools.cache
def identity() -> dict[str, Any]:
    """{"version", "build", "source"} of the rocmkit that runs this code."""
    dist = _dist_info()
    return {"version": _version(dist), "build": build_hash(Path(__file__).resolve().parent, _templates()),
            "source": _source(dist)}


def _dist_info() -> Path | None:
    """rocmkit's installed dist-info folder, found on sys.path as importlib.metadata finds it, without importing
    that module (with zipfile, shutil, bz2 and lzma): the doctor's level-1 path must not (test_doctor_imports.py)."""
    import os
    import sys

    for entry in sys.path:
        try:
            names = sorted(n for n in os.listdir(entry or ".") if n.startswith("rocmkit-") and n.endswith(".dist-info"))
        except OSError:
            continue
        if names:
            return Path(entry or ".", names[0])
    return None


def _version(dist: Path | None) -> str:
    """The installed version (METADATA's Version line), as rocmkit's __version__ says it."""
    try:
        for line in (dist / "METADATA").read_text(errors="replace").splitlines() if dist else ():
            if line.startswith("Version:"):
                return line.split(":", 1)[1].strip()
            if not line:
                break
    except OSError:
        pass
    return "0.0.0+source"


def _templates() -> Path | None:
    """Where rocmkit.templates lives: inside the package in a wheel, the repository's top-level templates/ in an
    editable install (pyproject's package-dir), so both layouts of one commit hash alike."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("rocmkit.templates")
    except (ImportError, ValueError):
        return None
    where = list(spec.submodule_search_locations or []) if spec else []
    return Path(where[0]).resolve() if where else None


def build_hash(package: Path, templates: Path | None = None) -> str:
    """The hash of every .py file under `package` and of the templates (.py, .j2) under `templates`, each by its
    path inside the package (templates/… wherever they live) and its bytes, in a stable order. Compiled caches
    and data files are left out, so a run that wrote __pycache__ or a resource does not change it."""
    files: dict[str, Path] = {}
    for path in package.rglob("*.py"):
        rel = path.relative_to(package).as_posix()
        if "__pycache__" not in path.parts and not (templates and rel.startswith("templates/")):
            files[rel] = path
    if templates and templates.is_dir():
        for path in [*templates.rglob("*.py"), *templates.rglob("*.j2")]:
            if "__pycache__" not in path.parts:
                files["templates/" + path.relative_to(templates).as_posix()] = path
    h = hashlib.sha256()
    for rel in sorted(files):
        h.update(rel.encode() + b"\0")
        try:
            h.update(files[rel].read_bytes())
        except OSError as exc:  # an unreadable file still changes the hash, and says so
            h.update(f"unreadable: {exc.strerror}".encode())
        h.update(b"\0")
    return BUILD_PREFIX + h.hexdigest()[:BUILD_HEX]


def _source(dist: Path | None) -> str | None:
    """What to give pip for this build: `git+URL@COMMIT`, a local folder or a wheel's URL; None when the
    distribution was installed from an index (its version then says what to install) or is not installed."""
    try:
        text = (dist / "direct_url.json").read_text() if dist else None
    except OSError:
        text = None
    try:
        info = json.loads(text) if text else None
    except ValueError:
        return None
    if not isinstance(info, dict) or not isinstance(info.get("url"), str):
        return None
    vcs = info.get("vcs_info")
    if isinstance(vcs, dict) and isinstance(vcs.get("commit_id"), str):
        return f"{vcs.get('vcs', 'git')}+{info['url']}@{vcs['commit_id']}"
    url = info["url"]
    return url.removeprefix("file://") if url.startswith("file://") else url


def describe(ident: Any) -> str:
    """"0.1.0 (build py-sha256:1a2b3c4d5e6f)" for a node's identity; what an older rocmkit without one reports."""
    if not isinstance(ident, dict):
        return "an older rocmkit (no build identity)"
    return f"{ident.get('version') or '?'} (build {str(ident.get('build') or '?').removeprefix(BUILD_PREFIX)})"


def install_line(ident: Any) -> str:
    """The pip line that installs the build `ident` describes: from its recorded source, else its version."""
    if not isinstance(ident, dict):
        return "pip install --upgrade rocmkit"
    source = ident.get("source")
    if isinstance(source, str) and source:
        if source.startswith("/"):  # a local checkout: the same folder, on the node (a shared file system) or copied
            return f"pip install --upgrade {source}"
        return f"pip install --upgrade 'rocmkit @ {source}'"
    return f"pip install --upgrade 'rocmkit=={ident.get('version')}'"
