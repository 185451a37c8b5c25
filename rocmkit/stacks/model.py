"""The stack model: frozen data a stack file becomes once every field has been validated."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from packaging.requirements import Requirement

from .. import archs
from ..textenum import TextEnum

if TYPE_CHECKING:
    from .lock import Lock

NO_ROCM = "none"  # the `rocm` of a stack that ships none (CPU and test stacks)


class ComponentKind(TextEnum):
    GIT = "git"  # compiled in its own stage into a wheel
    PIP = "pip"  # installed from the index in the final stage


class BuildKind(TextEnum):
    PIP_WHEEL = "pip-wheel"
    SETUP_PY = "setup-py"


class PythonFrom(TextEnum):
    IMAGE = "image"
    DEADSNAKES = "deadsnakes"


class PostStep(TextEnum):
    VF_CONFIGS = "vf-configs"


@dataclass(frozen=True)
class EnvVar:
    name: str
    value: str
    why: str


@dataclass(frozen=True)
class Patch:
    """A patch file shipped beside the stack, applied to a git component's source before its build."""

    file: str  # as the stack declares it, relative to the stack file
    sha256: str
    content: bytes = field(repr=False, compare=False)

    @property
    def name(self) -> str:
        return self.file.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class Asset:
    """A file downloaded from a URL (a prebuilt wheel from a release page), verified against its sha256 and
    installed with pip in the final stage. Without a sha256 it is mutable, with the reason."""

    name: str
    url: str
    sha256: str | None
    why: str
    mutable_reason: str | None = None

    @property
    def file(self) -> str:
        from urllib.parse import unquote

        return unquote(self.url.rsplit("/", 1)[-1])  # release pages spell a wheel's `+` as %2B


@dataclass(frozen=True)
class Base:
    image: str
    image_per_arch: dict[str, str]
    python_from: PythonFrom
    apt: tuple[str, ...]
    pip: tuple[str, ...]
    pip_extra_index_url: str | None
    pip_find_links: str | None
    ccache: bool
    amdsmi_from_rocm: bool = False
    source_note: str = ""  # where the base image comes from (the README's table shows it)
    pip_note: str = ""  # why the base pins are these

    def image_for(self, targets: list[str]) -> str:
        """Per-arch base image when the stack names one for a single target, else the default."""
        if len(targets) == 1 and targets[0] in self.image_per_arch:
            return self.image_per_arch[targets[0]]
        return self.image


@dataclass(frozen=True)
class Component:
    name: str
    kind: ComponentKind
    # git components
    git: str | None = None
    commit: str | None = None
    tag: str | None = None
    mutable_ref: str | None = None  # a branch, tag or short hash, accepted only with mutable_reason
    mutable_reason: str | None = None
    branch: str | None = None  # the branch the commit was read from: information, the build uses the commit
    patches: tuple[Patch, ...] = ()
    submodules: bool = False
    subdir: str = "."
    build: BuildKind = BuildKind.PIP_WHEEL
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
        if self.kind is ComponentKind.PIP:
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
    post: tuple[PostStep, ...]
    assets: tuple[Asset, ...] = ()
    source_note: str = ""  # the recipe the stack follows (the README shows it above the stack's table)
    path: str = field(default="", compare=False)
    lock: Lock | None = None  # the digests `rocmkit lock` resolved, read from the lock file beside the stack

    def component(self, name: str) -> Component | None:
        return next((c for c in self.components if c.name == name), None)

    @property
    def has_rocm(self) -> bool:
        return self.rocm != NO_ROCM

    @property
    def on_cpu(self) -> bool:
        return archs.is_cpu(self.targets)

    @property
    def git_components(self) -> list[Component]:
        return [c for c in self.components if c.kind is ComponentKind.GIT]

    @property
    def pip_components(self) -> list[Component]:
        return [c for c in self.components if c.kind is ComponentKind.PIP]

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


