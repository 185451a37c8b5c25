"""Reading one TOML table field by field: the patterns every value that reaches a Dockerfile must match,
and the readers that name the file, the field and what is allowed when it does not."""

from __future__ import annotations

import re
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement

from ..errors import InputFileError
from ..runtime import imageref
from .model import EnvVar

SCHEMA = "rocmkit.stack/v1"

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
TEXT_RE = re.compile(r"^[^\x00-\x1f\"`$\\]*$")  # one line, no double quote, backslash, `$` or backtick
IMAGE_RE = imageref.Pattern()  # Docker's grammar, with a digest (runtime/imageref.py)
VERSION_RE = re.compile(r"^\d+\.\d+(\.\d+)?$")
PYTHON_RE = re.compile(r"^3\.\d{1,2}$")
APT_RE = re.compile(r"^[a-z0-9][a-z0-9+.-]*(=[A-Za-z0-9.+:~-]+)?$")
# https anywhere; git:// (no TLS, no server authentication) only from this host, as Docker allows plain
# http only for loopback registries: a `git daemon` serving local mirrors. Same safe characters either way.
GIT_URL_RE = re.compile(r"^(https://[A-Za-z0-9.-]+|git://(localhost|127\.0\.0\.1))(:\d+)?/[A-Za-z0-9._/-]+$")
GIT_URL_ALLOWED = "an https:// git URL, or git://localhost[:port]/... (a git daemon on this host)"
COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
REF_RE = re.compile(r"^[A-Za-z0-9._/+-]{1,200}$")
PATH_RE = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_./-]{0,200}$")
ENV_KEY_RE = re.compile(r"^[A-Z_][A-Z0-9_]{0,100}$")
ENV_VALUE_RE = re.compile(r"^[A-Za-z0-9 _.,;:=/+@%-]{0,500}$")
PIP_REQ_RE = re.compile(r"^[A-Za-z0-9_.\[\],=+-]+$")
DIST_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,100}$")
URL_RE = re.compile(r"^https://[A-Za-z0-9.-]+(:\d+)?(/[A-Za-z0-9._~%/+-]*)?$")

TOP_LEVEL_KEYS = ("schema", "name", "description", "source_note", "targets", "rocm", "python", "base", "component", "env",
                  "post", "asset", "constraints", "amdgpu_ids")
SHA256_RE = re.compile(r"^[0-9a-f]{64}$")
PATCH_FILE_RE = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_./-]{0,200}\.(patch|diff)$")
# https anywhere; plain http only on the loopback (a local mirror, the tests' server).
ASSET_URL_RE = re.compile(r"^(https://[A-Za-z0-9.-]+|http://(127\.0\.0\.1|localhost))(:\d+)?(/[A-Za-z0-9._~%+-]+)*"
                          r"/[A-Za-z0-9][A-Za-z0-9_.+%-]*\.(whl|tar\.gz)$")
NOTE = "one line of text without double quotes, backslash, $ or backtick"


class Fields:
    """Reads one TOML table, remembering which keys were used, so unknown (mistyped) keys are errors."""

    def __init__(self, path: str, where: str, table: Any, allowed: tuple[str, ...]):
        if not isinstance(table, dict):
            raise InputFileError(path, where, "must be a table", allowed="a TOML table")
        self.path, self.where, self.table, self.allowed = path, where, table, allowed
        unknown = sorted(set(table) - set(allowed))
        if unknown:
            err = InputFileError(path, self._f(unknown[0]), "unknown field", allowed=", ".join(allowed))
            if where and unknown[0] in TOP_LEVEL_KEYS:
                # TOML puts every key after a [table] or [[array]] header into that table.
                err.hint += f"; {unknown[0]!r} is a top-level key: move it above the first [table] header"
            raise err

    def _f(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def error(self, key: str, problem: str, allowed: str | None = None) -> InputFileError:
        return InputFileError(self.path, self._f(key), problem, allowed)

    def get(self, key: str, kind: type | tuple[type, ...], default: Any = ..., ) -> Any:
        if key not in self.table:
            if default is ...:
                raise self.error(key, "missing required field")
            return default
        value = self.table[key]
        if isinstance(value, bool) and kind is not bool and bool not in (kind if isinstance(kind, tuple) else (kind,)):
            raise self.error(key, f"must be {kind_name(kind)}, got a boolean")
        if not isinstance(value, kind):
            raise self.error(key, f"must be {kind_name(kind)}, got {type(value).__name__}")
        return value

    def text(self, key: str, pattern: re.Pattern, allowed: str, default: Any = ...) -> Any:
        value = self.get(key, str, default)
        if value is default and default is not ...:
            return value
        if not pattern.match(value):
            raise self.error(key, f"invalid value {value!r}", allowed)
        return value

    def text_list(self, key: str, pattern: re.Pattern, allowed: str) -> tuple[str, ...]:
        values = self.get(key, list, [])
        for i, v in enumerate(values):
            if not isinstance(v, str) or not pattern.match(v):
                raise InputFileError(self.path, f"{self._f(key)}[{i}]", f"invalid value {v!r}", allowed)
        return tuple(values)

    def per_arch(self, key: str, targets, pattern: re.Pattern, invalid: str, allowed: str) -> dict[str, str]:
        """A table of arch -> text (image_per_arch, arch_names): each arch one of the stack's targets, each value
        matching `pattern` (else "invalid {invalid} ...")."""
        out = {}
        for arch, value in self.get(key, dict, {}).items():
            if arch not in targets:
                raise self.error(f"{key}.{arch}", "arch not in the stack's targets", ", ".join(targets))
            if not isinstance(value, str) or not pattern.match(value):
                raise self.error(f"{key}.{arch}", f"invalid {invalid} {value!r}", allowed)
            out[arch] = value
        return out


def kind_name(kind: type | tuple[type, ...]) -> str:
    names = {str: "a string", bool: "true or false", list: "a list", dict: "a table", int: "an integer"}
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def pinned_requirements(f: Fields, key: str) -> tuple[str, ...]:
    values = f.get(key, list, [])
    for i, r in enumerate(values):
        where = f"{f._f(key)}[{i}]"
        allowed = "name[extras]==version, e.g. ray[default]==2.53.0"
        if not isinstance(r, str):
            raise InputFileError(f.path, where, f"must be a string, got {type(r).__name__}", allowed)
        try:
            req = Requirement(r)
        except InvalidRequirement as exc:
            raise InputFileError(f.path, where, f"not a requirement: {exc}", allowed) from None
        specs = list(req.specifier)
        if req.url or len(specs) != 1 or specs[0].operator != "==" or "*" in specs[0].version:
            raise InputFileError(f.path, where, f"{r!r} is not pinned to one exact version", allowed)
        if not PIP_REQ_RE.match(r):  # markers, URLs and shell metacharacters stay out of RUN lines
            raise InputFileError(f.path, where, f"invalid value {r!r}", allowed)
    return tuple(values)


def inside(f: Fields, where: str, p: str) -> str:
    if ".." in p.split("/"):
        raise InputFileError(f.path, where, "must not leave the source tree ('..')")
    return p


def path_list(f: Fields, key: str) -> tuple[str, ...]:
    paths = f.text_list(key, PATH_RE, "a relative path inside the source (letters, digits, _ . / -)")
    return tuple(inside(f, f"{f._f(key)}[{i}]", p) for i, p in enumerate(paths))


def env_list(path: str, where: str, raw: Any) -> tuple[EnvVar, ...]:
    """`[[env]]` arrays: name, value, why (the why becomes the comment above the ENV line)."""
    if not isinstance(raw, list):
        raise InputFileError(path, where, "must be an array of tables", "[[env]] name = ..., value = ..., why = ...")
    out = []
    for i, item in enumerate(raw):
        f = Fields(path, f"{where}[{i}]", item, ("name", "value", "why"))
        out.append(EnvVar(
            name=f.text("name", ENV_KEY_RE, "UPPER_CASE letters, digits and _"),
            value=f.text("value", ENV_VALUE_RE, "letters, digits, space and _ . , ; : = / + @ % -"),
            why=f.text("why", TEXT_RE, "one line of text without double quotes, backslash, $ or backtick"),
        ))
    names = [e.name for e in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise InputFileError(path, where, f"variable {dupes[0]} is set twice")
    return tuple(out)


