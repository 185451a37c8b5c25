"""Each component kind renders its own part of the Dockerfile, as hpc-container-maker's building blocks do:
a git component its build stage (templates/components/git.j2) and its wheel in the final install; PyPI pins
their requirements in that one resolution, or a RUN of their own when installed without dependencies.
Dockerfile.j2 is the frame around them. Pure: text from data."""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field

from ..stacks import BuildKind, Component, ComponentKind
from .plan import BuildPlan, Stage


@dataclass
class Block:
    """What one component contributes: its own stage, its part of the final install, its own install runs."""

    component: Component
    stage_text: str = ""
    mounts: list[str] = field(default_factory=list)  # bind mounts of the final install
    args: list[str] = field(default_factory=list)  # arguments of the final install's one `pip install`
    indexes: list[str] = field(default_factory=list)  # extra index URLs that install needs
    removed: list[str] = field(default_factory=list)  # removed right after it
    notes: list[str] = field(default_factory=list)  # comments above it
    own_install: list[str] = field(default_factory=list)  # `pip install ...` lines run on their own
    checks: list[str] = field(default_factory=list)  # shell tests run before the final install


ASSETS_DIR = "assets"  # the stack's assets and wheel URLs, downloaded and verified on the host before the build
ASSETS_TARGET = "/tmp/rocmkit-assets"
ASSETS_MOUNT = f"--mount=type=bind,source={ASSETS_DIR},target={ASSETS_TARGET}"


def sha256_check(what: str, file: str, sha256: str) -> str:
    """The shell test that a downloaded file is the one the stack pinned (checked on the host too; this catches
    a build context assembled by other means)."""
    # No pipe: the final stage inherits bash with pipefail, but a linter reading the stage alone cannot know.
    return (f'{{ [ "$(sha256sum {ASSETS_TARGET}/{file})" = "{sha256}  {ASSETS_TARGET}/{file}" ] '
            f'|| {{ echo "{what}: sha256 differs from the stack: {sha256}" >&2; exit 1; }}; }}')


def _wheel_mount(name: str, root: str) -> str:
    return f"--mount=type=bind,from=build-{name},source=/wheels,target={root}/{name}"


class GitWheel:
    """A git component built with `pip wheel` (its pyproject's backend) in a stage of its own."""

    kind = BuildKind.PIP_WHEEL

    def build_command(self, c: Component) -> str:
        return "pip wheel --no-deps --no-build-isolation --wheel-dir /wheels ."

    def block(self, stage: Stage, render) -> Block:
        c = stage.component
        text = render("components/git.j2", stage=stage, build_command=self.build_command(c))
        args = []
        if c.install:
            wheel = f"/tmp/wheels/{c.name}/*.whl"
            args.append(f'"$(echo {wheel})[{",".join(c.extras)}]"' if c.extras else wheel)
        return Block(component=c, stage_text=text, mounts=[_wheel_mount(c.name, "/tmp/wheels")], args=args)


class GitSetupPy(GitWheel):
    """A git component whose wheel only its own setup script builds (sgl-kernel's setup_rocm.py)."""

    kind = BuildKind.SETUP_PY

    def build_command(self, c: Component) -> str:
        return f"python {shlex.quote(c.setup_script)} bdist_wheel --dist-dir /wheels"


class PypiPins:
    """Requirements from the index: part of the final stage's one resolution, or installed on their own
    without dependencies (`no_deps`)."""

    def block(self, c: Component) -> Block:
        reqs = [shlex.quote(r) for r in c.pip]
        if c.no_deps:
            index = f" --extra-index-url {c.extra_index_url}" if c.extra_index_url else ""
            return Block(component=c, own_install=["pip install --no-deps" + index + "".join(" " + r for r in reqs)])
        notes = [f"Removed after the install ({', '.join(c.remove)}): {c.remove_why}"] if c.remove else []
        return Block(component=c, args=reqs, indexes=[c.extra_index_url] if c.extra_index_url else [],
                     removed=list(c.remove), notes=notes)


class PrebuiltWheel:
    """A prebuilt wheel reused instead of compiled: a URL's file (downloaded and verified on the host, checked
    again here) or an index pin pip may take only as a wheel (`--only-binary`), in the final resolution."""

    def block(self, c: Component) -> Block:
        if c.wheel_url:
            return Block(component=c, mounts=[ASSETS_MOUNT], args=[shlex.quote(f"{ASSETS_TARGET}/{c.wheel_file}")],
                         checks=[sha256_check(f"component {c.name}: wheel {c.wheel_url}", c.wheel_file,
                                              c.wheel_sha256)])
        from packaging.requirements import Requirement

        name = Requirement(c.pip[0]).name
        return Block(component=c, args=[f"--only-binary {name}", shlex.quote(c.pip[0])],
                     indexes=[c.extra_index_url] if c.extra_index_url else [])


GIT_KINDS = {k.kind: k() for k in (GitWheel, GitSetupPy)}


@dataclass
class FinalInstall:
    """The final stage's one `pip install`: every installed wheel and PyPI pin resolved together."""

    mounts: list[str]
    args: list[str]
    removed: list[str]
    notes: list[str]
    checks: list[str] = field(default_factory=list)


def blocks(plan: BuildPlan, render) -> list[Block]:
    """One block per component: git components in stage (dependency) order, then the PyPI pins."""
    out = [GIT_KINDS[st.component.build].block(st, render) for st in plan.stages]
    out += [PrebuiltWheel().block(c) for c in plan.stack.wheel_components]
    out += [PypiPins().block(c) for c in plan.stack.components if c.kind is ComponentKind.PIP]
    return out


def final_install(parts: list[Block]) -> FinalInstall:
    indexes = sorted({u for b in parts for u in b.indexes})
    git = [b for b in parts if b.component.kind is ComponentKind.GIT]
    wheels = [b for b in parts if b.component.kind is ComponentKind.WHEEL]
    pins = [b for b in parts if b.component.kind is ComponentKind.PIP]
    return FinalInstall(
        mounts=list(dict.fromkeys(m for b in git + wheels for m in b.mounts)),
        args=[f"--extra-index-url {u}" for u in indexes] + [a for b in git + wheels + pins for a in b.args],
        removed=[r for b in parts for r in b.removed],
        notes=[n for b in parts for n in b.notes],
        checks=[c for b in wheels for c in b.checks])
