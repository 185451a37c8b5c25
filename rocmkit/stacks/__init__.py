"""The stack model: load a stack file (TOML), validate every field, return frozen data.

Every value that will reach a Dockerfile is checked here against a narrow pattern, so that nothing a
stack file says can smuggle a newline, quote or shell metacharacter into a RUN line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from packaging.requirements import InvalidRequirement, Requirement

from .. import archs
from ..errors import InputFileError, UsageError
from ..tomlread import load_toml_file, load_toml_text

SCHEMA = "rocmkit.stack/v1"

NAME_RE = re.compile(r"^[a-z0-9][a-z0-9-]{0,62}$")
TEXT_RE = re.compile(r"^[^\x00-\x1f\"`$\\]*$")  # one line, no double quote, backslash, `$` or backtick
IMAGE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/:@-]{0,254}$")
VERSION_RE = re.compile(r"^\d+\.\d+(\.\d+)?$")
PYTHON_RE = re.compile(r"^3\.\d{1,2}$")
APT_RE = re.compile(r"^[a-z0-9][a-z0-9+.-]*(=[A-Za-z0-9.+:~-]+)?$")
GIT_URL_RE = re.compile(r"^https://[A-Za-z0-9.-]+(:\d+)?/[A-Za-z0-9._/-]+$")
COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
REF_RE = re.compile(r"^[A-Za-z0-9._/+-]{1,200}$")
PATH_RE = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_./-]{0,200}$")
ENV_KEY_RE = re.compile(r"^[A-Z_][A-Z0-9_]{0,100}$")
ENV_VALUE_RE = re.compile(r"^[A-Za-z0-9 _.,;:=/+@%-]{0,500}$")
PIP_REQ_RE = re.compile(r"^[A-Za-z0-9_.\[\],=+-]+$")
DIST_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,100}$")
URL_RE = re.compile(r"^https://[A-Za-z0-9.-]+(:\d+)?(/[A-Za-z0-9._~%/+-]*)?$")

TOP_LEVEL_KEYS = ("schema", "name", "description", "targets", "rocm", "python", "base", "component", "env", "post")
BUILD_KINDS = ("pip-wheel", "setup-py")
PYTHON_FROM = ("image", "deadsnakes")
POST_STEPS = ("vf-configs",)


@dataclass(frozen=True)
class EnvVar:
    name: str
    value: str
    why: str


@dataclass(frozen=True)
class Base:
    image: str
    image_per_arch: dict[str, str]
    python_from: str
    apt: tuple[str, ...]
    pip: tuple[str, ...]
    pip_extra_index_url: str | None
    pip_find_links: str | None
    ccache: bool
    amdsmi_from_rocm: bool = False

    def image_for(self, targets: list[str]) -> str:
        """Per-arch base image when the stack names one for a single target, else the default."""
        if len(targets) == 1 and targets[0] in self.image_per_arch:
            return self.image_per_arch[targets[0]]
        return self.image


@dataclass(frozen=True)
class Component:
    name: str
    kind: str  # "git" (compiled in its own stage into a wheel) | "pip" (installed in the final stage)
    # git components
    git: str | None = None
    commit: str | None = None
    tag: str | None = None
    mutable_ref: str | None = None  # a branch, tag or short hash, accepted only with mutable_reason
    mutable_reason: str | None = None
    submodules: bool = False
    subdir: str = "."
    build: str = "pip-wheel"
    setup_script: str = "setup.py"
    pyproject: str | None = None
    build_requires: tuple[str, ...] = ()
    requirements: tuple[str, ...] = ()
    env: tuple[EnvVar, ...] = ()
    needs: tuple[str, ...] = ()
    single_arch: bool = False
    install: bool = True  # False: a build-only dependency, offered to the stages that need it, not installed
    extras: tuple[str, ...] = ()  # extras of the built wheel installed with it, e.g. SGLang's srt_hip
    source_note: str = ""
    # pip components
    pip: tuple[str, ...] = ()
    no_deps: bool = False
    extra_index_url: str | None = None
    remove: tuple[str, ...] = ()  # distributions its dependencies pull in that are removed after the install
    remove_why: str = ""

    @property
    def mutable(self) -> bool:
        return self.mutable_reason is not None

    @property
    def ref(self) -> str:
        """What the build checks out: the pinned commit, or the declared mutable ref."""
        return self.commit or self.mutable_ref or ""

    def pin(self) -> str:
        if self.kind == "pip":
            return " ".join(self.pip)
        label = self.commit[:12] if self.commit else f"{self.mutable_ref} (MUTABLE)"
        return f"{label} ({self.tag})" if self.tag and self.commit else label


@dataclass(frozen=True)
class Stack:
    name: str
    description: str
    targets: tuple[str, ...]  # AMD GPU archs, or ("cpu",) for a CPU-only stack
    rocm: str  # a ROCm version, or "none" for stacks that ship no ROCm (CPU and test stacks)
    python: str
    base: Base
    components: tuple[Component, ...]
    env: tuple[EnvVar, ...]
    post: tuple[str, ...]
    path: str = field(default="", compare=False)

    def component(self, name: str) -> Component | None:
        return next((c for c in self.components if c.name == name), None)

    @property
    def on_cpu(self) -> bool:
        return archs.is_cpu(self.targets)

    @property
    def git_components(self) -> list[Component]:
        return [c for c in self.components if c.kind == "git"]

    @property
    def pip_components(self) -> list[Component]:
        return [c for c in self.components if c.kind == "pip"]

    @property
    def mutable_components(self) -> list[Component]:
        return [c for c in self.components if c.mutable]

    def pinned_version(self, package: str) -> str | None:
        """The `==` version the stack pins for a PyPI package (any pip component or the base)."""
        reqs = list(self.base.pip) + [r for c in self.pip_components for r in c.pip]
        for r in reqs:
            req = Requirement(r)
            if _canon(req.name) == _canon(package):
                return next(iter(req.specifier)).version
        return None


def _canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


class _Fields:
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
            raise self.error(key, f"must be {_kind_name(kind)}, got a boolean")
        if not isinstance(value, kind):
            raise self.error(key, f"must be {_kind_name(kind)}, got {type(value).__name__}")
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


def _kind_name(kind: type | tuple[type, ...]) -> str:
    names = {str: "a string", bool: "true or false", list: "a list", dict: "a table", int: "an integer"}
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _pinned_requirements(f: _Fields, key: str) -> tuple[str, ...]:
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


def _inside(f: _Fields, where: str, p: str) -> str:
    if ".." in p.split("/"):
        raise InputFileError(f.path, where, "must not leave the source tree ('..')")
    return p


def _path_list(f: _Fields, key: str) -> tuple[str, ...]:
    paths = f.text_list(key, PATH_RE, "a relative path inside the source (letters, digits, _ . / -)")
    return tuple(_inside(f, f"{f._f(key)}[{i}]", p) for i, p in enumerate(paths))


def _env_list(path: str, where: str, raw: Any) -> tuple[EnvVar, ...]:
    """`[[env]]` arrays: name, value, why (the why becomes the comment above the ENV line)."""
    if not isinstance(raw, list):
        raise InputFileError(path, where, "must be an array of tables", "[[env]] name = ..., value = ..., why = ...")
    out = []
    for i, item in enumerate(raw):
        f = _Fields(path, f"{where}[{i}]", item, ("name", "value", "why"))
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


def _component(path: str, index: int, raw: Any) -> Component:
    name = raw.get("name") if isinstance(raw, dict) else None
    where = f"component[{index}]" + (f" ({name})" if isinstance(name, str) else "")
    if isinstance(raw, dict) and "pip" in raw:
        f = _Fields(path, where, raw, ("name", "pip", "no_deps", "extra_index_url", "remove", "remove_why",
                                       "source_note"))
        if not f.get("pip", list):
            raise f.error("pip", "must list at least one requirement", "name[extras]==version")
        remove = f.text_list("remove", DIST_NAME_RE, "distribution names such as torchvision")
        remove_why = f.text("remove_why", TEXT_RE, "one line of text without double quotes, backslash, $ or backtick",
                            "")
        if remove and not remove_why:
            raise f.error("remove_why", "missing: say why each removed distribution must go",
                          "one line of text, e.g. what breaks when it stays")
        return Component(
            name=f.text("name", NAME_RE, "lower-case letters, digits and -"),
            kind="pip",
            pip=_pinned_requirements(f, "pip"),
            no_deps=f.get("no_deps", bool, False),
            extra_index_url=f.text("extra_index_url", URL_RE, "an https:// URL", None),
            remove=remove,
            remove_why=remove_why,
            source_note=f.text("source_note", TEXT_RE, "one line of text without double quotes, backslash, $ or backtick", ""),
        )
    f = _Fields(path, where, raw, (
        "name", "git", "commit", "tag", "mutable", "submodules", "subdir", "build", "setup_script", "pyproject",
        "build_requires", "requirements", "env", "needs", "single_arch", "install", "extras", "source_note"))
    if "git" not in f.table:
        raise f.error("git", "missing: a component has either git (built from source) or pip (installed from PyPI)")
    commit = f.get("commit", str, None)
    mutable = f.get("mutable", dict, None)
    mutable_ref = mutable_reason = None
    if commit is not None and not COMMIT_RE.match(commit):
        raise f.error("commit", f"{commit!r} is not a full commit",
                      "40 lower-case hex digits; a branch or short hash may move or be ambiguous. If the commit truly "
                      "cannot be established, declare mutable = { ref = \"...\", reason = \"...\" } instead")
    if mutable is not None:
        if commit is not None:
            raise f.error("mutable", "a component with a commit is not mutable; remove one of the two")
        m = _Fields(path, f"{where}.mutable", mutable, ("ref", "reason"))
        mutable_ref = m.text("ref", REF_RE, "a branch, tag or abbreviated commit")
        mutable_reason = m.text("reason", TEXT_RE, "one line saying why no commit could be established")
    elif commit is None:
        raise f.error("commit", "missing required field", "40 lower-case hex digits")
    build = f.get("build", str, "pip-wheel")
    if build not in BUILD_KINDS:
        raise f.error("build", f"unknown build kind {build!r}", ", ".join(BUILD_KINDS))
    subdir = _inside(f, f._f("subdir"), f.text("subdir", PATH_RE, "a relative path inside the source", "."))
    return Component(
        name=f.text("name", NAME_RE, "lower-case letters, digits and -"),
        kind="git",
        git=f.text("git", GIT_URL_RE, "an https:// git URL"),
        commit=commit,
        tag=f.text("tag", REF_RE, "a tag name", None),
        mutable_ref=mutable_ref,
        mutable_reason=mutable_reason,
        submodules=f.get("submodules", bool, False),
        subdir=subdir,
        build=build,
        setup_script=f.text("setup_script", PATH_RE, "a file name such as setup_rocm.py", "setup.py"),
        pyproject=f.text("pyproject", PATH_RE, "a file name such as pyproject_rocm.toml", None),
        build_requires=_pinned_requirements(f, "build_requires"),
        requirements=_path_list(f, "requirements"),
        env=_env_list(path, f"{where}.env", f.get("env", list, [])),
        needs=f.text_list("needs", NAME_RE, "names of other git components"),
        single_arch=f.get("single_arch", bool, False),
        install=f.get("install", bool, True),
        extras=f.text_list("extras", re.compile(r"^[a-z0-9][a-z0-9_-]*$"), "extra names such as srt_hip"),
        source_note=f.text("source_note", TEXT_RE, "one line of text without double quotes, backslash, $ or backtick", ""),
    )


def parse_stack(data: dict[str, Any], path: str) -> Stack:
    """Validate a parsed stack document; every problem names the file and the field."""
    if isinstance(data, dict) and "archs" in data:
        raise InputFileError(path, "archs", "renamed to targets", "targets = [\"gfx942\", \"gfx950\"] or [\"cpu\"]")
    f = _Fields(path, "", data, TOP_LEVEL_KEYS)
    schema = f.get("schema", str)
    if schema != SCHEMA:
        raise f.error("schema", f"unsupported schema {schema!r}", SCHEMA)
    allowed_targets = ", ".join(archs.known_build_targets()) + " (cpu alone)"
    stack_targets = f.text_list("targets", re.compile(r"^[a-z0-9]+$"), allowed_targets)
    if not stack_targets:
        raise f.error("targets", "must list at least one target", allowed_targets)
    for i, a in enumerate(stack_targets):
        try:
            archs.check_build_target(a)
        except UsageError as exc:
            raise InputFileError(path, f"targets[{i}]", exc.message, allowed_targets) from None
    if archs.CPU in stack_targets and len(stack_targets) > 1:
        raise f.error("targets", "cpu is a target of its own, not combined with GPU archs", allowed_targets)
    rocm = f.get("rocm", str)
    if rocm != "none" and not VERSION_RE.match(rocm):
        raise f.error("rocm", f"invalid value {rocm!r}", "a ROCm version such as 7.0.2, or \"none\"")
    if archs.CPU in stack_targets and rocm != "none":
        raise f.error("rocm", f"a CPU stack ships no ROCm, got {rocm!r}", "\"none\"")

    b = _Fields(path, "base", f.get("base", dict), ("image", "image_per_arch", "python_from", "apt", "pip",
                                                    "pip_extra_index_url", "pip_find_links", "ccache",
                                                    "amdsmi_from_rocm"))
    per_arch_raw = b.get("image_per_arch", dict, {})
    per_arch = {}
    for a, img in per_arch_raw.items():
        if a not in stack_targets:
            raise b.error(f"image_per_arch.{a}", "arch not in the stack's targets", ", ".join(stack_targets))
        if not isinstance(img, str) or not IMAGE_RE.match(img):
            raise b.error(f"image_per_arch.{a}", f"invalid image {img!r}", "an image reference such as repo/name:tag")
        per_arch[a] = img
    python_from = b.get("python_from", str, "image")
    if python_from not in PYTHON_FROM:
        raise b.error("python_from", f"invalid value {python_from!r}", ", ".join(PYTHON_FROM))
    base = Base(
        image=b.text("image", IMAGE_RE, "an image reference such as rocm/dev-ubuntu-22.04:7.0.2-complete"),
        image_per_arch=per_arch,
        python_from=python_from,
        apt=b.text_list("apt", APT_RE, "Debian package names, optionally name=version"),
        pip=_pinned_requirements(b, "pip"),
        pip_extra_index_url=b.text("pip_extra_index_url", URL_RE, "an https:// URL", None),
        pip_find_links=b.text("pip_find_links", URL_RE, "an https:// URL of a page listing wheels", None),
        ccache=b.get("ccache", bool, False),
        amdsmi_from_rocm=b.get("amdsmi_from_rocm", bool, False),
    )

    raw_components = f.get("component", list)
    components = [_component(path, i, c) for i, c in enumerate(raw_components)]
    names = [c.name for c in components]
    for c in components:
        if names.count(c.name) > 1:
            raise InputFileError(path, f"component ({c.name})", "component name used twice")
    git_names = {c.name for c in components if c.kind == "git"}
    for c in components:
        for n in c.needs:
            if n not in git_names:
                raise InputFileError(path, f"component ({c.name}).needs", f"{n!r} is not a git component of this stack",
                                     ", ".join(sorted(git_names - {c.name})) or "(none)")
    _check_acyclic(path, components)
    needed = {n for c in components for n in c.needs}
    for c in components:
        if not c.install and c.name not in needed:
            raise InputFileError(path, f"component ({c.name}).install", "install = false, but no component needs it",
                                 "a build-only component must be listed in another component's needs")

    if base.amdsmi_from_rocm and rocm == "none":
        raise InputFileError(path, "base.amdsmi_from_rocm", "needs a ROCm stack (rocm is \"none\")")
    post = f.text_list("post", re.compile(r"^[a-z-]+$"), ", ".join(POST_STEPS))
    for i, step in enumerate(post):
        if step not in POST_STEPS:
            raise InputFileError(path, f"post[{i}]", f"unknown step {step!r}", ", ".join(POST_STEPS))

    return Stack(
        name=f.text("name", NAME_RE, "lower-case letters, digits and -"),
        description=f.text("description", TEXT_RE, "one line of text without double quotes, backslash, $ or backtick"),
        targets=stack_targets,
        rocm=rocm,
        python=f.text("python", PYTHON_RE, "a Python version such as 3.12"),
        base=base,
        components=tuple(components),
        env=_env_list(path, "env", f.get("env", list, [])),
        post=post,
        path=path,
    )


def _check_acyclic(path: str, components: list[Component]) -> None:
    needs = {c.name: c.needs for c in components}
    state: dict[str, int] = {}

    def visit(n: str, trail: list[str]) -> None:
        if state.get(n) == 2:
            return
        if state.get(n) == 1:
            cycle = " -> ".join(trail[trail.index(n):] + [n])
            raise InputFileError(path, f"component ({n}).needs", f"dependency cycle: {cycle}")
        state[n] = 1
        for m in needs[n]:
            visit(m, trail + [n])
        state[n] = 2

    for c in components:
        visit(c.name, [])


def builtin_names() -> list[str]:
    return sorted(p.name[:-5] for p in resources.files("rocmkit.resources.stacks").iterdir() if p.name.endswith(".toml"))


def load_builtin(name: str) -> Stack:
    if name not in builtin_names():
        raise UsageError(f"unknown stack {name!r}", hint=f"built-in stacks: {', '.join(builtin_names())}; "
                                                          "or pass --stack-file PATH")
    res = resources.files("rocmkit.resources.stacks").joinpath(f"{name}.toml")
    origin = f"rocmkit/resources/stacks/{name}.toml"
    return parse_stack(load_toml_text(res.read_text(encoding="utf-8"), origin), origin)


def load_file(path: str | Path) -> Stack:
    return parse_stack(load_toml_file(path), str(path))


def load(stack: str | None = None, stack_file: str | Path | None = None, default: str = "verl-vllm") -> Stack:
    """The stack named by --stack or --stack-file (not both), else the default."""
    if stack and stack_file:
        raise UsageError("--stack and --stack-file are alternatives; give one")
    if stack_file:
        return load_file(stack_file)
    return load_builtin(stack or default)


def all_builtin() -> list[Stack]:
    return [load_builtin(n) for n in builtin_names()]
