"""Local component sources (`--source NAME=DIR`): validated and identified by content."""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

from ..errors import UsageError
from ..stacks import NAME_RE
from .plan import LocalSource

# Never part of a component's source: VCS data and build leftovers.
IGNORED_DIRS = {".git", ".hg", ".svn", "__pycache__", ".mypy_cache", ".pytest_cache", ".tox", ".venv", "build", "dist"}


def tree_files(root: Path) -> list[Path]:
    """Every file and symlink of a component's source tree, sorted, leaving out IGNORED_DIRS and
    *.egg-info. The digest and the copy into the build context both use this list, so what is
    hashed is exactly what is built."""
    out: list[Path] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if d not in IGNORED_DIRS and not d.endswith(".egg-info"))
        for name in sorted(filenames):
            path = Path(dirpath) / name
            if not path.is_symlink() and not path.is_file():  # sockets, FIFOs, device nodes
                raise UsageError(f"--source {root}: {path} is not a regular file (a socket, FIFO or device)",
                                 hint="point --source at a source checkout")
            out.append(path.relative_to(root))
    return out


def tree_digest(root: Path) -> str:
    """sha256 over every file's relative path, executable bit and content, in sorted order; symlinks
    count by their target text. Identical trees give identical digests wherever they live."""
    h = hashlib.sha256()
    for relpath in tree_files(root):
        path = root / relpath
        rel = relpath.as_posix()
        if path.is_symlink():
            h.update(f"L {rel}\0{os.readlink(path)}\0".encode())
            continue
        h.update(f"F {rel}\0{'x' if os.access(path, os.X_OK) else '-'}\0".encode())
        try:
            with open(path, "rb") as f:
                for chunk in iter(lambda: f.read(1 << 20), b""):
                    h.update(chunk)
        except OSError as exc:
            raise UsageError(f"--source {root}: cannot read {path}: {exc.strerror or exc}") from None
        h.update(b"\0")
    return h.hexdigest()


def copy_tree(root: Path, dest: Path) -> None:
    """Copy the files tree_files() lists (and so tree_digest() hashed) from root into dest; symlinks
    are copied as links, file modes are kept."""
    for relpath in tree_files(root):
        src, dst = root / relpath, dest / relpath
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), dst)
        else:
            shutil.copy2(src, dst)


def parse_source_options(values: tuple[str, ...] | list[str], components: list[str]) -> dict[str, LocalSource]:
    """`NAME=DIR` options → {name: LocalSource}; NAME must be one of the stack's git `components`
    (checked before anything is read) and DIR an existing folder."""
    out: dict[str, LocalSource] = {}
    for v in values:
        name, sep, directory = v.partition("=")
        if not sep or not name or not directory:
            raise UsageError(f"--source {v!r}: expected COMPONENT=DIR", hint="e.g. --source vllm=./vllm")
        if not NAME_RE.match(name):
            raise UsageError(f"--source {v!r}: {name!r} is not a component name")
        if name in out:
            raise UsageError(f"--source {name}=... given twice")
        if name not in components:
            raise UsageError(f"--source {name}=...: the stack has no git component {name!r}",
                             hint=f"components built from source: {', '.join(components) or '(none)'}")
        path = Path(directory).expanduser()
        if not path.is_dir():
            raise UsageError(f"--source {name}={directory}: no such folder")
        out[name] = LocalSource(name=name, path=str(path.resolve()), digest=tree_digest(path))
    return out
