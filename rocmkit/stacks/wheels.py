"""The stack fields that reuse prebuilt wheels instead of compiling: `[base.rocm_wheels]` (ROCm itself from
pip, TheRock's packages), a component's `wheel = { url, sha256 }` or `wheel = { pin }`, and the exact pins
that join the image's pip constraint file. Every problem names the file and the field."""

from __future__ import annotations

import re
from typing import Any

from packaging.requirements import Requirement
from packaging.utils import InvalidWheelFilename, parse_wheel_filename

from ..errors import InputFileError
from .fields import NOTE, SHA256_RE, TEXT_RE, Fields, pinned_requirements
from .model import RocmWheels

# https anywhere; plain http only on the loopback (a local mirror, the tests' server); file:// an absolute
# path on the host that runs `rocmkit build` (downloaded into the build context like any other URL).
WHEEL_URL_RE = re.compile(r"^(https://[A-Za-z0-9.-]+(:\d+)?|http://(127\.0\.0\.1|localhost)(:\d+)?|file://)"
                          r"(/[A-Za-z0-9._~%+-]+)*/[A-Za-z0-9][A-Za-z0-9_.+%-]*\.whl$")
WHEEL_URL_ALLOWED = ("an https:// URL of a .whl file (http:// only on 127.0.0.1 or localhost), or file:///abs/path.whl")
FIND_LINKS_RE = re.compile(r"^(https://[A-Za-z0-9.-]+|http://(127\.0\.0\.1|localhost))(:\d+)?(/[A-Za-z0-9._~%/+-]*)?$")
FIND_LINKS_ALLOWED = "an https:// URL (http:// only on 127.0.0.1 or localhost)"
ARCH_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,40}$")


def rocm_wheels(b: Fields, targets: tuple[str, ...], rocm: str) -> RocmWheels | None:
    """`[base.rocm_wheels]`: packages, device (patterns with {arch}), arch_names, find_links or index_url, note."""
    raw = b.get("rocm_wheels", dict, None)
    if raw is None:
        return None
    where = "base.rocm_wheels"
    f = Fields(b.path, where, raw, ("packages", "device", "arch_names", "find_links", "index_url", "note"))
    packages = pinned_requirements(f, "packages")
    if not packages:
        raise f.error("packages", "must list at least one requirement", "e.g. [\"rocm[libraries,devel]==7.14.0\"]")
    if rocm == "none":
        raise f.error("packages", "ROCm from wheels needs the stack's rocm version (rocm is \"none\")",
                      "rocm = \"<the version these wheels are>\"")
    for i, r in enumerate(packages):
        req = Requirement(r)
        version = next(iter(req.specifier)).version
        if req.name.lower() == "rocm" and version != rocm:
            raise InputFileError(b.path, f"{where}.packages[{i}]", f"pins rocm {version}, but the stack says rocm = "
                                 f"{rocm!r}", "the same version in both")
    arch_names = f.per_arch("arch_names", targets, ARCH_NAME_RE, "value", "a package-name part such as gfx94X-dcgpu")
    patterns = f.get("device", list, [])
    allowed = "a pinned requirement with {arch}, e.g. rocm-sdk-device-{arch}==7.14.0"
    for i, p in enumerate(patterns):
        if not isinstance(p, str) or "{arch}" not in p:
            raise InputFileError(b.path, f"{where}.device[{i}]", f"{p!r} does not name the arch", allowed)
    # Each pattern is checked as the requirement it becomes for every target.
    for t in targets:
        expanded = [p.replace("{arch}", arch_names.get(t, t)) for p in patterns]
        pinned_requirements(Fields(b.path, f"{where} ({t})", {"device": expanded}, ("device",)), "device")
    find_links = f.text("find_links", FIND_LINKS_RE, FIND_LINKS_ALLOWED, None)
    index_url = f.text("index_url", FIND_LINKS_RE, FIND_LINKS_ALLOWED, None)
    return RocmWheels(packages=packages, device=tuple(patterns), arch_names=arch_names, find_links=find_links,
                      index_url=index_url, note=f.text("note", TEXT_RE, NOTE, ""))


def wheel_source(f: Fields) -> dict[str, Any]:
    """A component's `wheel = { url, sha256 }` or `wheel = { pin, index_url }` → Component keyword arguments."""
    w = Fields(f.path, f._f("wheel"), f.get("wheel", dict), ("url", "sha256", "pin", "index_url"))
    if ("url" in w.table) == ("pin" in w.table):
        raise w.error("url", "a wheel has either url (with its sha256) or pin (name==version from an index)",
                      "url = \"https://.../x.whl\", sha256 = \"...\"; or pin = \"name==version\"")
    if "pin" in w.table:
        if "sha256" in w.table:
            raise w.error("sha256", "belongs to a url; an index pin is checked by the index's own hashes")
        pin = pinned_requirements(Fields(w.path, w.where, {"pin": [w.get("pin", str)]}, ("pin",)), "pin")
        return {"pip": pin, "extra_index_url": w.text("index_url", FIND_LINKS_RE, FIND_LINKS_ALLOWED, None)}
    if "index_url" in w.table:
        raise w.error("index_url", "belongs to a pin; a url names its file itself")
    url = w.text("url", WHEEL_URL_RE, WHEEL_URL_ALLOWED)
    sha = w.text("sha256", SHA256_RE, "64 lower-case hex digits (sha256sum of the wheel)")
    from urllib.parse import unquote

    file = unquote(url.rsplit("/", 1)[-1])  # release pages spell a wheel's `+` as %2B
    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$", file):
        raise w.error("url", f"the file name {file!r} is not a plain file name", "letters, digits, _ . + -")
    try:
        parse_wheel_filename(file)
    except InvalidWheelFilename as exc:
        raise w.error("url", f"not a wheel's file name: {exc}", "name-version-python-abi-platform.whl") from None
    return {"wheel_url": url, "wheel_sha256": sha}


def constraints(f: Fields) -> tuple[str, ...]:
    """Top-level `constraints = ["name==version"]`: pins that only hold versions (nothing is installed)."""
    pins = pinned_requirements(f, "constraints")
    for i, r in enumerate(pins):
        if Requirement(r).extras:
            raise InputFileError(f.path, f"constraints[{i}]", "a constraint holds a version, not extras",
                                 "name==version")
    return pins
