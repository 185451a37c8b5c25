"""Stack × targets → BuildPlan: the stages and their DAG, build args, arch variables, runtime
environment, labels and the manifest of every pin. Pure: reads nothing but its arguments."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace

from .. import __version__, archs, raycompat
from ..errors import InputFileError, UsageError
from ..stacks import IMAGE_RE, Component, ComponentKind, EnvVar, Stack
from .constraints import CONSTRAINED_PACKAGES, CONSTRAINTS_PATH, stack_pins  # noqa: F401 (re-exported)

# A hipcc job of these projects peaks at several GB; 8 fits a 64 GB builder with room to spare.
# `rocmkit build --max-jobs auto` sizes it to the builder; never the upstream 512.
DEFAULT_MAX_JOBS = 8
MANIFEST_PATH = "/opt/rocmkit/manifest.json"
LABEL_PREFIX = "io.rocmkit"


@dataclass(frozen=True)
class LocalSource:
    """A component built from a local directory instead of its git pin (`--source NAME=DIR`)."""

    name: str
    path: str  # where it came from; recorded, but not part of the inputs hash
    digest: str  # sha256 of the tree's content; what identifies it


@dataclass(frozen=True)
class Stage:
    name: str  # Dockerfile stage name: build-<component>
    component: Component
    needs: tuple[str, ...]  # component names whose wheels are installed first (transitive)
    local: LocalSource | None = None


@dataclass(frozen=True)
class BuildPlan:
    stack: Stack
    targets: tuple[str, ...]
    base_image: str
    base_image_overridden: bool
    stages: tuple[Stage, ...]
    pip_components: tuple[Component, ...]
    arch_env: tuple[tuple[str, str], ...]
    runtime_env: tuple[EnvVar, ...]
    build_args: dict[str, str]
    labels: dict[str, str]
    manifest: dict
    inputs_hash: str
    tag: str
    warnings: tuple[str, ...] = field(default=())
    base_digest: str | None = None  # from the stack's lock: FROM pins the base by content, not by tag

    @property
    def base_ref(self) -> str:
        """What FROM names: image:tag@sha256:... when locked (the tag stays for the reader; the digest decides)."""
        return f"{self.base_image}@{self.base_digest}" if self.base_digest else self.base_image

    def with_max_jobs(self, max_jobs: int) -> "BuildPlan":
        """This plan with another MAX_JOBS (what make_plan gives for it): `--max-jobs auto` knows it only once
        the builder is known, and the plan is not made twice for that."""
        if max_jobs < 1:
            raise UsageError(f"max jobs must be at least 1, got {max_jobs}")
        return replace(self, build_args={**self.build_args, "MAX_JOBS": str(max_jobs)})

    def levels(self) -> list[list[str]]:
        """Stages grouped by DAG depth: every stage of a level can build in parallel."""
        depth: dict[str, int] = {}
        for s in self.stages:  # stages are in dependency order
            depth[s.component.name] = 1 + max((depth[n] for n in s.component.needs), default=-1)
        out: list[list[str]] = [[] for _ in range(max(depth.values(), default=-1) + 1)]
        for s in self.stages:
            out[depth[s.component.name]].append(s.name)
        return out


def make_plan(stack: Stack, targets: list[str], *, base_image: str | None = None,
              sources: dict[str, LocalSource] | None = None, max_jobs: int = DEFAULT_MAX_JOBS) -> BuildPlan:
    sources = dict(sources or {})
    targets = _check_targets(stack, targets)
    _check_sources(stack, sources)
    if base_image is not None and not IMAGE_RE.match(base_image):
        raise UsageError(f"--base-image {base_image!r} is not an image reference",
                         hint="e.g. registry.example.com/rocm/dev-ubuntu-22.04:7.0.2-complete")
    if max_jobs < 1:
        raise UsageError(f"max jobs must be at least 1, got {max_jobs}")

    stages = _stages(stack, sources)
    runtime_env = _runtime_env(stack)
    # A CPU image has no GPU arch: no arch variable is set, so no build system compiles for a GPU.
    arch_env = () if archs.is_cpu(targets) else archs.build_arch_env(targets)
    image = base_image or stack.base.image_for(targets)
    digest = stack.lock.digest_for(image) if stack.lock and base_image is None and "@" not in image else None
    warnings = tuple(
        f"component {c.name} is MUTABLE: built from {c.mutable_ref!r}, not a commit ({c.mutable_reason}); "
        "two builds of this stack may differ"
        for c in stack.mutable_components if c.name not in sources
    ) + tuple(
        f"base component {p.name} is MUTABLE: the build records the base's {p.distribution} in its base-versions "
        f"file but cannot check it ({p.mutable_reason}); two builds of this stack may differ unless the base is "
        "pinned by digest (rocmkit lock)"
        for p in stack.base.provides if p.mutable
    ) + tuple(f"lock {stack.lock.path} is stale: {r}; run `rocmkit lock`"
              for r in (stack.lock.stale if stack.lock else ())) + tuple(
        f"asset {a.name} is MUTABLE: {a.url} has no sha256 ({a.mutable_reason}); two builds of this stack may differ"
        for a in stack.assets if a.sha256 is None
    )
    manifest = _manifest(stack, targets, image, base_image is not None, sources, runtime_env)
    if digest:  # only when locked, so the inputs hash of an unlocked stack stays what it was
        manifest["base_image_digest"] = digest
    inputs_hash = _inputs_hash(manifest)
    manifest["inputs_hash"] = inputs_hash
    tag = _default_tag(stack, targets, inputs_hash)
    labels = _labels(stack, targets, image, base_image is not None, sources, inputs_hash, tag)
    if digest:
        labels["org.opencontainers.image.base.digest"] = digest
    return BuildPlan(
        stack=stack, targets=tuple(targets), base_image=image, base_image_overridden=base_image is not None,
        stages=tuple(stages), pip_components=tuple(stack.pip_components), arch_env=arch_env,
        runtime_env=runtime_env, build_args={"MAX_JOBS": str(max_jobs)}, labels=labels, manifest=manifest,
        inputs_hash=inputs_hash, tag=tag, warnings=warnings, base_digest=digest,
    )


def _check_targets(stack: Stack, targets: list[str]) -> list[str]:
    for t in targets:
        archs.check_build_target(t)
        if t not in stack.targets:
            raise UsageError(f"stack {stack.name} does not support {'target' if t == archs.CPU else 'arch'} {t}",
                             hint=f"{stack.name} supports: {', '.join(stack.targets)}")
    if len(targets) > 1:
        single = [c.name for c in stack.git_components if c.single_arch]
        if single:
            raise UsageError(f"stack {stack.name} builds {', '.join(single)} for exactly one arch; "
                             f"cannot target {';'.join(targets)} in one image",
                             hint="build one image per arch: --arch " + " / --arch ".join(targets))
    if stack.has_rocm:
        for t in targets:
            arch = archs.get_arch(t)
            if not archs.rocm_supports(stack.rocm, arch):
                raise InputFileError(stack.path, "rocm", f"ROCm {stack.rocm} does not support {t} "
                                     f"(needs ROCm >= {archs.min_rocm_for(arch)})")
    return list(targets)


def _check_sources(stack: Stack, sources: dict[str, LocalSource]) -> None:
    git = [c.name for c in stack.git_components]
    for name in sources:
        if name not in git:
            raise UsageError(f"--source {name}=...: {stack.name} has no git component {name!r}",
                             hint=f"components built from source: {', '.join(git) or '(none)'}")


def _stages(stack: Stack, sources: dict[str, LocalSource]) -> list[Stage]:
    """Git components in dependency order, each with the transitive set of wheels it needs."""
    by_name = {c.name: c for c in stack.git_components}
    closure: dict[str, tuple[str, ...]] = {}

    def needs_of(name: str) -> tuple[str, ...]:
        if name not in closure:
            out: list[str] = []
            for n in by_name[name].needs:
                for m in needs_of(n) + (n,):
                    if m not in out:
                        out.append(m)
            closure[name] = tuple(out)
        return closure[name]

    ordered: list[str] = []
    for c in stack.git_components:
        for n in needs_of(c.name) + (c.name,):
            if n not in ordered:
                ordered.append(n)
    return [Stage(name=f"build-{n}", component=by_name[n], needs=needs_of(n), local=sources.get(n)) for n in ordered]


def _runtime_env(stack: Stack) -> tuple[EnvVar, ...]:
    for i, e in enumerate(stack.env):
        if e.name in raycompat.ALL_NOSET_VARS:
            raise InputFileError(stack.path, f"env[{i}]", f"{e.name} is derived from the pinned Ray version; "
                                 "remove it from the stack")
    env = list(stack.env)
    ray = stack.pinned_version("ray")
    if ray and not stack.on_cpu:  # a CPU image has no GPUs for Ray to narrow
        var = raycompat.noset_variable(ray)
        env.append(EnvVar(var, "1", f"Ray {ray} would narrow each actor's AMD visible devices; verl assigns GPUs "
                                    f"itself ({'ray-project/ray#51104, Ray >= 2.45' if var == raycompat.HIP_VAR else 'Ray < 2.45'})"))
    return tuple(env)


def _component_entry(c: Component, local: LocalSource | None) -> dict:
    if c.kind is ComponentKind.WHEEL:
        entry = {"name": c.name, "kind": c.kind.value, "requirement": c.wheel_pin()}
        if c.wheel_url:
            entry.update(url=c.wheel_url, sha256=c.wheel_sha256)
        if c.extra_index_url:
            entry["extra_index_url"] = c.extra_index_url
        if c.constrain:
            entry["constrain"] = True
        return entry
    if c.kind is ComponentKind.PIP:
        entry = {"name": c.name, "kind": c.kind.value, "requirements": list(c.pip), "no_deps": c.no_deps}
        if c.constrain:
            entry["constrain"] = True
        if c.extra_index_url:
            entry["extra_index_url"] = c.extra_index_url
        if c.remove:
            entry["removed"] = list(c.remove)
        return entry
    entry = {"name": c.name, "kind": c.kind.value, "git": c.git, "commit": c.commit, "tag": c.tag,
             "mutable_ref": c.mutable_ref, "mutable_reason": c.mutable_reason, "needs": list(c.needs)}
    if c.branch:
        entry["branch"] = c.branch
    if c.patches:
        # By content: a patch edited in place changes the inputs hash, so the image tag.
        entry["patches"] = [{"file": p.file, "sha256": p.sha256} for p in c.patches]
    if local:
        # By content only: the folder it was built from differs between machines, the image must not.
        entry["local_source"] = {"digest": local.digest}
    return entry


def _manifest(stack: Stack, targets: list[str], image: str, overridden: bool, sources: dict[str, LocalSource],
              runtime_env: tuple[EnvVar, ...]) -> dict:
    # Keys only a stack using them gets, so the inputs hash (and tag) of every other stack stays what it was.
    extra: dict = {}
    rw = stack.base.rocm_wheels
    if rw:
        extra["base_rocm_wheels"] = {"requirements": list(rw.requirements(targets)),
                                     "sources": [u for u in (rw.index_url, rw.find_links) if u]}
    if stack.base.provides:
        extra["base_provides"] = [{"name": p.name, "distribution": p.distribution, "version": p.version,
                                   **({"release": p.release} if p.release else {}),
                                   **({"mutable_reason": p.mutable_reason} if p.mutable else {})}
                                  for p in stack.base.provides]
    pins = stack_pins(stack, targets)
    if pins:
        extra["constraints"] = {"path": CONSTRAINTS_PATH, "pins": pins}
    return {**_manifest_common(stack, targets, image, overridden, sources, runtime_env), **extra}


def _manifest_common(stack: Stack, targets: list[str], image: str, overridden: bool,
                     sources: dict[str, LocalSource], runtime_env: tuple[EnvVar, ...]) -> dict:
    return {
        "schema": "rocmkit.manifest/v1",
        "rocmkit": __version__,
        "stack": stack.name,
        "description": stack.description,
        "targets": list(targets),
        "rocm": stack.rocm,
        "python": stack.python,
        "base_image": image,
        "base_image_overridden": overridden,
        "base_pip": list(stack.base.pip),
        "base_pip_sources": [u for u in (stack.base.pip_extra_index_url, stack.base.pip_find_links) if u],
        "components": [_component_entry(c, sources.get(c.name)) for c in stack.components],
        "runtime_env": {e.name: e.value for e in runtime_env},
        **({"assets": [{"name": a.name, "url": a.url, "sha256": a.sha256, "mutable_reason": a.mutable_reason}
                       for a in stack.assets]} if stack.assets else {}),
        **({"amdgpu_ids": {"file": stack.amdgpu_ids.file, "sha256": stack.amdgpu_ids.sha256,
                           "entries": len(stack.amdgpu_ids.entries)}} if stack.amdgpu_ids else {}),
    }


def _inputs_hash(manifest: dict) -> str:
    """sha256 of everything that decides the image (a local source counts by content)."""
    return hashlib.sha256(json.dumps(manifest, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _default_tag(stack: Stack, targets: list[str], inputs_hash: str) -> str:
    rocm = f"rocm{stack.rocm}-" if stack.has_rocm else ""
    return f"rocmkit/{stack.name}:{rocm}{archs.targets_slug(targets)}-{inputs_hash[:12]}"


def _labels(stack: Stack, targets: list[str], image: str, overridden: bool, sources: dict[str, LocalSource],
            inputs_hash: str, tag: str) -> dict[str, str]:
    labels = {
        "org.opencontainers.image.title": f"rocmkit/{stack.name}",
        "org.opencontainers.image.description": stack.description,
        "org.opencontainers.image.version": tag.split(":", 1)[1],
        "org.opencontainers.image.base.name": image,
        f"{LABEL_PREFIX}.stack": stack.name,
        f"{LABEL_PREFIX}.targets": archs.join_targets(targets),
        f"{LABEL_PREFIX}.rocm": stack.rocm,
        f"{LABEL_PREFIX}.python": stack.python,
        f"{LABEL_PREFIX}.inputs-hash": inputs_hash,
        f"{LABEL_PREFIX}.manifest": MANIFEST_PATH,
        f"{LABEL_PREFIX}.base-image-overridden": str(overridden).lower(),
    }
    ray = stack.pinned_version("ray")
    if ray:
        labels[f"{LABEL_PREFIX}.ray-version"] = ray
    if stack.base.provides:
        # What the base must hold, as the build's first step checked it (MUTABLE: recorded, not checked).
        labels[f"{LABEL_PREFIX}.base-provides"] = ",".join(
            f"{p.name}={p.version or (p.release and f'{p.release}.*') or 'MUTABLE'}" for p in stack.base.provides)
    mutable = [c.name for c in stack.mutable_components if c.name not in sources] + [
        a.name for a in stack.assets if a.sha256 is None] + [p.name for p in stack.base.provides if p.mutable]
    if mutable:
        labels[f"{LABEL_PREFIX}.mutable-components"] = ",".join(mutable)
    if sources:
        labels[f"{LABEL_PREFIX}.local-sources"] = ",".join(f"{n}=sha256:{s.digest[:12]}" for n, s in sorted(sources.items()))
    return labels


def plan_document(plan: BuildPlan) -> dict:
    """The plan as data, for `rocmkit build --dry-run --json`."""
    return {
        "stack": plan.stack.name,
        "targets": list(plan.targets),
        "base_image": plan.base_image,
        "base_image_overridden": plan.base_image_overridden,
        "base_image_digest": plan.base_digest,
        "tag": plan.tag,
        "inputs_hash": plan.inputs_hash,
        "stages": [
            {"name": s.name, "component": s.component.name, "needs": [f"build-{n}" for n in s.component.needs],
             "source": {"local": s.local.path, "digest": s.local.digest} if s.local
             else {"git": s.component.git, "ref": s.component.ref, "tag": s.component.tag},
             "mutable": s.component.mutable and not s.local}
            for s in plan.stages
        ],
        "parallel_levels": plan.levels(),
        "final": {"pip": [r for c in plan.pip_components for r in c.pip],
                  **({"wheels": [c.wheel_url or c.wheel_pin() for c in plan.stack.wheel_components]}
                     if plan.stack.wheel_components else {})},
        "build_args": dict(plan.build_args),
        "arch_env": dict(plan.arch_env),
        "runtime_env": {e.name: e.value for e in plan.runtime_env},
        "labels": dict(plan.labels),
        "warnings": list(plan.warnings),
        # What the image's /opt/rocmkit/manifest.json will hold: `rocmkit diff` compares two plans before
        # either is built (save this key to a file for each).
        "manifest": plan.manifest,
    }
