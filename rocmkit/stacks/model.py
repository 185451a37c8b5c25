"""The stack model: frozen data a stack file becomes once every field has been validated."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from .. import archs
from ..textenum import TextEnum

if TYPE_CHECKING:
    from .lock import Lock

NO_ROCM = "none"  # the `rocm` of a stack that ships none (CPU and test stacks)


class ComponentKind(TextEnum):
    GIT = "git"  # compiled in its own stage into a wheel
    PIP = "pip"  # installed from the index in the final stage
    WHEEL = "wheel"  # a prebuilt wheel (a URL with its sha256, or an index pin), reused instead of compiled


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
class AmdgpuIds:
    """Lines of libdrm's amdgpu.ids (device, revision, product name) appended to the image's table where it
    lacks that device and revision; `file` is relative to the stack file, its bytes hashed into the inputs."""

    file: str
    sha256: str
    entries: tuple[tuple[str, str, str], ...]
    why: str


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
class RocmWheels:
    """ROCm from pip wheels (TheRock) installed into the image's Python: the SDK packages every target shares,
    and per-arch device payloads whose names are declared patterns, `{arch}` standing for the target's name
    in `arch_names` (TheRock names families, e.g. gfx94X-dcgpu) or the arch itself."""

    packages: tuple[str, ...]  # pinned requirements, e.g. rocm[libraries,devel]==7.14.0
    device: tuple[str, ...]  # pinned requirement patterns with {arch}, e.g. rocm-sdk-device-{arch}==7.14.0
    arch_names: dict[str, str]
    find_links: str | None = None
    index_url: str | None = None  # an extra index URL
    note: str = ""

    def device_for(self, targets) -> tuple[str, ...]:
        return tuple(d.replace("{arch}", self.arch_names.get(t, t)) for t in targets for d in self.device)

    def requirements(self, targets) -> tuple[str, ...]:
        return self.packages + self.device_for(targets)


@dataclass(frozen=True)
class Provided:
    """A component the base image already holds (`[[base.provides]]`): the distribution a build step reads in the
    base's Python before anything else runs, and the version it must hold, or only its release numbers where
    that is all a source gives (an image tag's `pytorch_2.11.0`). With neither it is MUTABLE: the build records
    what the base holds but cannot fail on it (no published file names the version)."""

    name: str  # the component as the card names it, e.g. transformer-engine
    distribution: str  # the Python distribution to read, e.g. transformer_engine
    version: str | None  # PEP 440; without a local label (+...) any local build of that version matches
    source_note: str = ""
    mutable_reason: str | None = None
    release: str | None = None  # X.Y.Z: any version whose release numbers these are (2.11.0a0+git..., 2.11.0+rocm)

    @property
    def mutable(self) -> bool:
        return self.version is None and self.release is None

    def pin(self) -> str:
        if self.version:
            return f"{self.distribution}=={self.version}"
        return f"{self.distribution} release {self.release}" if self.release else f"{self.distribution} (MUTABLE)"


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
    rocm_wheels: RocmWheels | None = None  # ROCm from pip wheels, not from the base image
    # The base image's ROCm is already TheRock's pip SDK (rocm/primus v26.x): its fix-ups run on it as on
    # an SDK installed by rocm_wheels.
    rocm_from_pip: bool = False
    provides: tuple[Provided, ...] = ()  # components the base holds, checked by the build before anything runs

    @property
    def pip_sdk(self) -> bool:
        """ROCm lives in site-packages (TheRock's _rocm_sdk_core/_rocm_sdk_devel), not in an /opt/rocm tree."""
        return self.rocm_wheels is not None or self.rocm_from_pip

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
    # wheel components: a URL with its sha256, or an index pin (kept in `pip`, so `outdated` checks it)
    wheel_url: str | None = None
    wheel_sha256: str | None = None
    constrain: bool = False  # its exact pin joins the image's pip constraint file

    @property
    def wheel_file(self) -> str | None:
        from urllib.parse import unquote

        return unquote(self.wheel_url.rsplit("/", 1)[-1]) if self.wheel_url else None

    def wheel_pin(self) -> str:
        """name==version of a wheel component: its index pin, or read from the wheel's file name."""
        if self.pip:
            return self.pip[0]
        from packaging.utils import parse_wheel_filename

        name, version, _, _ = parse_wheel_filename(self.wheel_file)
        return f"{name}=={version}"

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
        if self.kind is ComponentKind.WHEEL:
            return f"{self.wheel_pin()} (wheel{f' sha256:{self.wheel_sha256[:12]}' if self.wheel_sha256 else ''})"
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
    constraints: tuple[str, ...] = ()  # extra exact pins for the image's pip constraint file
    amdgpu_ids: AmdgpuIds | None = None  # libdrm amdgpu.ids lines the image's table may lack
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
    def wheel_components(self) -> list[Component]:
        return [c for c in self.components if c.kind is ComponentKind.WHEEL]

    @property
    def downloads(self) -> tuple[Asset, ...]:
        """Every file fetched on the host and verified by sha256: the assets, then the wheel components' URLs."""
        return self.assets + tuple(Asset(name=c.name, url=c.wheel_url, sha256=c.wheel_sha256, why="prebuilt wheel")
                                   for c in self.wheel_components if c.wheel_url)

    @property
    def mutable_components(self) -> list[Component]:
        return [c for c in self.components if c.mutable]

    def pinned_version(self, package: str) -> str | None:
        """The `==` version the stack pins for a PyPI package (any pip component or the base)."""
        reqs = list(self.base.pip) + [r for c in self.pip_components for r in c.pip]
        for r in reqs:
            req = Requirement(r)
            if canonicalize_name(req.name) == canonicalize_name(package):
                return next(iter(req.specifier)).version
        return None


