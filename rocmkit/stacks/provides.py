"""`[[base.provides]]`: the components a stack takes from its base image (rocm/primus' TransformerEngine, torch,
aiter), each with the distribution the build reads and the exact version it must hold. Validated here, so the
names and versions that reach the build's check step are plain words (rocmkit/image/basecheck.py)."""

from __future__ import annotations

import re

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..errors import InputFileError
from .fields import DIST_NAME_RE, NAME_RE, NOTE, TEXT_RE, Fields
from .model import Component, ComponentKind, Provided, PythonFrom

# A PEP 440 version as `importlib.metadata` reads it: letters, digits and . + ! _ - only (nothing a shell or a
# Dockerfile reads specially), checked again with packaging below.
PROVIDED_VERSION_RE = re.compile(r"^[0-9][A-Za-z0-9.+!_-]{0,100}$")
RELEASE_RE = re.compile(r"^[0-9]{1,6}(\.[0-9]{1,6}){0,3}$")


def provides(b: Fields) -> tuple[Provided, ...]:
    raw = b.get("provides", list, [])
    out: list[Provided] = []
    for i, item in enumerate(raw):
        name = item.get("name") if isinstance(item, dict) else None
        where = f"base.provides[{i}]" + (f" ({name})" if isinstance(name, str) else "")
        f = Fields(b.path, where, item, ("name", "distribution", "version", "release", "mutable", "source_note"))
        version = f.text("version", PROVIDED_VERSION_RE, "an exact version as the distribution's metadata "
                                                          "spells it, e.g. 2.14.0.dev0+e6ede467", None)
        release = f.text("release", RELEASE_RE, "release numbers only, e.g. 2.11.0 (any 2.11.0a0+git..., "
                                                "2.11.0+rocm7.14 matches)", None)
        mutable = f.get("mutable", dict, None)
        given = [k for k, v in (("version", version), ("release", release), ("mutable", mutable)) if v is not None]
        if len(given) > 1:
            raise f.error(given[1], f"a component has one of version, release or mutable; {given[0]} is given",
                          f"remove {given[1]} or {given[0]}")
        reason = None
        if version is not None:
            try:
                normal = str(Version(version))
            except InvalidVersion:
                raise f.error("version", f"{version!r} is not a PEP 440 version", "e.g. 2.12.0+rocm7.14.0") from None
            if normal != version:
                raise f.error("version", f"{version!r} is not written as its metadata writes it",
                              f"{normal!r} (the normalised form, which importlib.metadata reads back)")
        elif mutable is not None:
            reason = Fields(b.path, f"{where}.mutable", mutable, ("reason",)).text(
                "reason", TEXT_RE, "one line saying why no published file names the version")
        elif release is None:
            raise f.error("version", "missing required field",
                          "the exact version the base holds; release = \"X.Y.Z\" where a source gives only its "
                          "release numbers; if none does, mutable = { reason = \"...\" } (recorded, not checked)")
        out.append(Provided(
            name=f.text("name", NAME_RE, "lower-case letters, digits and -, e.g. transformer-engine"),
            distribution=f.text("distribution", DIST_NAME_RE, "a distribution name such as transformer_engine"),
            version=version, release=release, source_note=f.text("source_note", TEXT_RE, NOTE, ""),
            mutable_reason=reason))
    for key in ("name", "distribution"):
        seen = [canonicalize_name(getattr(p, key)) for p in out]
        dupes = sorted({v for v in seen if seen.count(v) > 1})
        if dupes:
            raise b.error("provides", f"two entries with the {key} {dupes[0]!r}", f"one entry per {key}")
    return tuple(out)


def check_against(path: str, provided: tuple[Provided, ...], python_from: PythonFrom,
                  components: list[Component], base_pip: tuple[str, ...]) -> None:
    """What a stack cannot mean: a base Python it replaces (deadsnakes), or a component it both takes from the
    base and builds or installs itself (the build's own would replace the base's after the check)."""
    if provided and python_from is PythonFrom.DEADSNAKES:
        raise InputFileError(path, "base.provides", "the base's components are read in the base's own Python, and "
                             "python_from = \"deadsnakes\" installs another", "python_from = \"image\"")
    names = {c.name for c in components}
    from packaging.requirements import Requirement

    installed = {canonicalize_name(Requirement(r).name) for r in base_pip}
    installed |= {canonicalize_name(Requirement(r).name) for c in components for r in c.pip}
    installed |= {canonicalize_name(Requirement(c.wheel_pin()).name) for c in components if c.kind is ComponentKind.WHEEL}
    for i, p in enumerate(provided):
        if p.name in names:
            raise InputFileError(path, f"base.provides[{i}] ({p.name})", "also a component of this stack: the "
                                 "stack builds or installs it, so the base's is replaced",
                                 "remove one of the two")
        if canonicalize_name(p.distribution) in installed:
            raise InputFileError(path, f"base.provides[{i}] ({p.name})", f"{p.distribution} is also installed "
                                 "by this stack (pip or a wheel), which replaces the base's", "remove one of the two")

