"""A parsed stack document → a validated Stack; every problem names the file and the field."""

from __future__ import annotations

import hashlib
import re
from typing import Any

from .. import archs
from ..errors import InputFileError, UsageError
from .fields import (
    APT_RE,
    ASSET_URL_RE,
    COMMIT_RE,
    DIST_NAME_RE,
    GIT_URL_ALLOWED,
    GIT_URL_RE,
    IMAGE_RE,
    NAME_RE,
    PATCH_FILE_RE,
    PATH_RE,
    PYTHON_RE,
    REF_RE,
    SCHEMA,
    SHA256_RE,
    TEXT_RE,
    NOTE,
    TOP_LEVEL_KEYS,
    URL_RE,
    VERSION_RE,
    Fields,
    env_list,
    inside,
    path_list,
    pinned_requirements,
)
from .amdgpu_ids import amdgpu_ids
from .provides import check_against, provides
from .besidefiles import missing
from .wheels import constraints, rocm_wheels, wheel_source
from .model import NO_ROCM, Asset, Base, BuildKind, Component, ComponentKind, Patch, PostStep, PythonFrom, Stack

FILE_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")


def _patches(f: Fields, beside: Any) -> tuple[Patch, ...]:
    """`patches = ["patches/x.patch"]`: files relative to the stack file, read now, so the inputs hash and the
    build context hold exactly the bytes that were validated."""
    allowed = "paths of .patch or .diff files relative to the stack file (letters, digits, _ . / -)"
    files = f.text_list("patches", PATCH_FILE_RE, allowed)
    out, names = [], set()
    for i, rel in enumerate(files):
        where = f"{f._f('patches')}[{i}]"
        inside(f, where, rel)
        target = beside.joinpath(rel) if beside is not None else None
        try:
            content = target.read_bytes() if target is not None else None
        except OSError:
            content = None
        if content is None:
            raise missing(f.path, where, rel, beside, "patch file", allowed)
        if not content.strip():
            raise InputFileError(f.path, where, f"patch file {rel!r} is empty", "a unified diff (git diff output)")
        name = rel.rsplit("/", 1)[-1]
        if name in names:
            raise InputFileError(f.path, where, f"two patches named {name!r}", "distinct file names")
        names.add(name)
        out.append(Patch(file=rel, sha256=hashlib.sha256(content).hexdigest(), content=content))
    return tuple(out)


def _assets(path: str, raw: Any) -> tuple[Asset, ...]:
    """`[[asset]]`: name, url, sha256 (or mutable = { reason }), why."""
    if not isinstance(raw, list):
        raise InputFileError(path, "asset", "must be an array of tables", "[[asset]] name = ..., url = ..., sha256 = ...")
    out = []
    for i, item in enumerate(raw):
        name = item.get("name") if isinstance(item, dict) else None
        where = f"asset[{i}]" + (f" ({name})" if isinstance(name, str) else "")
        f = Fields(path, where, item, ("name", "url", "sha256", "mutable", "why"))
        url = f.text("url", ASSET_URL_RE, "an https:// URL of a .whl or .tar.gz file (http:// only on 127.0.0.1 or "
                                          "localhost)")
        sha = f.text("sha256", SHA256_RE, "64 lower-case hex digits (sha256sum of the file)", None)
        mutable = f.get("mutable", dict, None)
        reason = None
        if mutable is not None:
            if sha is not None:
                raise f.error("mutable", "an asset with a sha256 is not mutable; remove one of the two")
            reason = Fields(path, f"{where}.mutable", mutable, ("reason",)).text(
                "reason", TEXT_RE, "one line saying why no sha256 could be established")
        elif sha is None:
            raise f.error("sha256", "missing required field",
                          "64 lower-case hex digits; if it truly cannot be established, declare "
                          "mutable = { reason = \"...\" } instead")
        asset = Asset(name=f.text("name", NAME_RE, "lower-case letters, digits and -"), url=url, sha256=sha,
                      why=f.text("why", TEXT_RE, NOTE), mutable_reason=reason)
        if not FILE_NAME_RE.match(asset.file):
            raise f.error("url", f"the file name {asset.file!r} is not a plain file name", "letters, digits, _ . + -")
        out.append(asset)
    for key in ("name", "file"):
        seen = [getattr(a, key) for a in out]
        dupes = sorted({v for v in seen if seen.count(v) > 1})
        if dupes:
            raise InputFileError(path, "asset", f"two assets with the {key} {dupes[0]!r}", f"a distinct {key} each")
    return tuple(out)


def _component(path: str, index: int, raw: Any, beside: Any = None) -> Component:
    name = raw.get("name") if isinstance(raw, dict) else None
    where = f"component[{index}]" + (f" ({name})" if isinstance(name, str) else "")
    if isinstance(raw, dict) and "wheel" in raw:
        f = Fields(path, where, raw, ("name", "wheel", "git", "pip", "constrain", "source_note"))
        for other in ("git", "pip"):
            if other in f.table:
                raise f.error(other, "a component has exactly one of git, pip or wheel", f"remove {other} or wheel")
        return Component(
            name=f.text("name", NAME_RE, "lower-case letters, digits and -"),
            kind=ComponentKind.WHEEL,
            constrain=f.get("constrain", bool, False),
            source_note=f.text("source_note", TEXT_RE, NOTE, ""),
            **wheel_source(f),
        )
    if isinstance(raw, dict) and "pip" in raw:
        f = Fields(path, where, raw, ("name", "pip", "no_deps", "extra_index_url", "remove", "remove_why",
                                       "constrain", "source_note"))
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
            kind=ComponentKind.PIP,
            pip=pinned_requirements(f, "pip"),
            no_deps=f.get("no_deps", bool, False),
            extra_index_url=f.text("extra_index_url", URL_RE, "an https:// URL", None),
            remove=remove,
            remove_why=remove_why,
            constrain=f.get("constrain", bool, False),
            source_note=f.text("source_note", TEXT_RE, "one line of text without double quotes, backslash, $ or backtick", ""),
        )
    f = Fields(path, where, raw, (
        "name", "git", "commit", "tag", "mutable", "submodules", "subdir", "build", "setup_script", "pyproject",
        "build_requires", "requirements", "env", "needs", "single_arch", "install", "extras", "source_note",
        "branch", "patches", "constrain"))
    if "git" not in f.table:
        raise f.error("git", "missing: a component has git (built from source), pip (installed from PyPI) or "
                             "wheel (a prebuilt wheel)")
    if f.get("constrain", bool, False):
        raise f.error("constrain", "a git component's version is known only once it is built",
                      "constrain = true on pip or wheel components, or an exact pin in the top-level constraints")
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
        m = Fields(path, f"{where}.mutable", mutable, ("ref", "reason"))
        mutable_ref = m.text("ref", REF_RE, "a branch, tag or abbreviated commit")
        mutable_reason = m.text("reason", TEXT_RE, "one line saying why no commit could be established")
    elif commit is None:
        raise f.error("commit", "missing required field", "40 lower-case hex digits")
    branch = f.text("branch", REF_RE, "the branch name the commit was read from", None)
    if branch is not None and commit is None:
        raise f.error("branch", "a branch is information beside a commit",
                      "commit = \"<40 hex digits the branch pointed at>\" with branch = \"...\"; or, when no commit "
                      "can be established, mutable = { ref = \"<branch>\", reason = \"...\" }")
    build = f.get("build", str, "pip-wheel")
    if build not in {k.value for k in BuildKind}:
        raise f.error("build", f"unknown build kind {build!r}", ", ".join(k.value for k in BuildKind))
    subdir = inside(f, f._f("subdir"), f.text("subdir", PATH_RE, "a relative path inside the source", "."))
    return Component(
        name=f.text("name", NAME_RE, "lower-case letters, digits and -"),
        kind=ComponentKind.GIT,
        git=f.text("git", GIT_URL_RE, GIT_URL_ALLOWED),
        commit=commit,
        tag=f.text("tag", REF_RE, "a tag name", None),
        mutable_ref=mutable_ref,
        mutable_reason=mutable_reason,
        branch=branch,
        patches=_patches(f, beside),
        submodules=f.get("submodules", bool, False),
        subdir=subdir,
        build=BuildKind(build),
        setup_script=f.text("setup_script", PATH_RE, "a file name such as setup_rocm.py", "setup.py"),
        pyproject=f.text("pyproject", PATH_RE, "a file name such as pyproject_rocm.toml", None),
        build_requires=pinned_requirements(f, "build_requires"),
        requirements=path_list(f, "requirements"),
        env=env_list(path, f"{where}.env", f.get("env", list, [])),
        needs=f.text_list("needs", NAME_RE, "names of other git components"),
        single_arch=f.get("single_arch", bool, False),
        install=f.get("install", bool, True),
        extras=f.text_list("extras", re.compile(r"^[a-z0-9][a-z0-9_-]*$"), "extra names such as srt_hip"),
        source_note=f.text("source_note", TEXT_RE, "one line of text without double quotes, backslash, $ or backtick", ""),
    )


def parse_stack(data: dict[str, Any], path: str, beside: Any) -> Stack:
    """Validate a parsed stack document; every problem names the file and the field. `path` names the file in
    messages; `beside` is the folder its patch and other files are relative to (a Path, or an
    importlib.resources Traversable for a built-in stack): given by the caller, never derived from `path`,
    which for a built-in stack is a label, not a place (`rocmkit.stacks.source` gives both)."""
    if isinstance(data, dict) and "archs" in data:
        raise InputFileError(path, "archs", "renamed to targets", "targets = [\"gfx942\", \"gfx950\"] or [\"cpu\"]")
    f = Fields(path, "", data, TOP_LEVEL_KEYS)
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
    if rocm != NO_ROCM and not VERSION_RE.match(rocm):
        raise f.error("rocm", f"invalid value {rocm!r}", "a ROCm version such as 7.0.2, or \"none\"")
    if archs.CPU in stack_targets and rocm != NO_ROCM:
        raise f.error("rocm", f"a CPU stack ships no ROCm, got {rocm!r}", "\"none\"")

    b = Fields(path, "base", f.get("base", dict), ("image", "image_per_arch", "python_from", "apt", "pip",
                                                    "pip_extra_index_url", "pip_find_links", "ccache",
                                                    "amdsmi_from_rocm", "source_note", "pip_note",
                                                    "rocm_wheels", "rocm_from_pip", "provides"))
    per_arch = b.per_arch("image_per_arch", stack_targets, IMAGE_RE, "image",
                          "an image reference such as repo/name:tag")
    python_from = b.get("python_from", str, "image")
    if python_from not in {p.value for p in PythonFrom}:
        raise b.error("python_from", f"invalid value {python_from!r}", ", ".join(p.value for p in PythonFrom))
    base = Base(
        image=b.text("image", IMAGE_RE, "an image reference such as rocm/dev-ubuntu-22.04:7.0.2-complete"),
        image_per_arch=per_arch,
        python_from=PythonFrom(python_from),
        apt=b.text_list("apt", APT_RE, "Debian package names, optionally name=version"),
        pip=pinned_requirements(b, "pip"),
        pip_extra_index_url=b.text("pip_extra_index_url", URL_RE, "an https:// URL", None),
        pip_find_links=b.text("pip_find_links", URL_RE, "an https:// URL of a page listing wheels", None),
        ccache=b.get("ccache", bool, False),
        amdsmi_from_rocm=b.get("amdsmi_from_rocm", bool, False),
        source_note=b.text("source_note", TEXT_RE, NOTE, ""),
        pip_note=b.text("pip_note", TEXT_RE, NOTE, ""),
        rocm_wheels=rocm_wheels(b, stack_targets, rocm),
        rocm_from_pip=b.get("rocm_from_pip", bool, False),
        provides=provides(b),
    )

    raw_components = f.get("component", list)
    components = [_component(path, i, c, beside) for i, c in enumerate(raw_components)]
    names = [c.name for c in components]
    for c in components:
        if names.count(c.name) > 1:
            raise InputFileError(path, f"component ({c.name})", "component name used twice")
    git_names = {c.name for c in components if c.kind is ComponentKind.GIT}
    for c in components:
        for n in c.needs:
            if n not in git_names:
                raise InputFileError(path, f"component ({c.name}).needs", f"{n!r} is not a git component of this stack",
                                     ", ".join(sorted(git_names - {c.name})) or "(none)")
    _check_acyclic(path, components)
    check_against(path, base.provides, base.python_from, components, base.pip)
    needed = {n for c in components for n in c.needs}
    for c in components:
        if not c.install and c.name not in needed:
            raise InputFileError(path, f"component ({c.name}).install", "install = false, but no component needs it",
                                 "a build-only component must be listed in another component's needs")

    if base.amdsmi_from_rocm and rocm == NO_ROCM:
        raise InputFileError(path, "base.amdsmi_from_rocm", "needs a ROCm stack (rocm is \"none\")")
    if base.rocm_from_pip and rocm == NO_ROCM:
        raise InputFileError(path, "base.rocm_from_pip", "needs a ROCm stack (rocm is \"none\")",
                             "rocm = \"<the version of the image's pip SDK>\"")
    if base.rocm_from_pip and base.rocm_wheels:
        raise InputFileError(path, "base.rocm_from_pip", "[base.rocm_wheels] already puts ROCm in pip's "
                             "site-packages and applies the same fix-ups", "remove rocm_from_pip")
    steps = ", ".join(p.value for p in PostStep)
    post = f.text_list("post", re.compile(r"^[a-z-]+$"), steps)
    for i, step in enumerate(post):
        if step not in {p.value for p in PostStep}:
            raise InputFileError(path, f"post[{i}]", f"unknown step {step!r}", steps)

    stack = Stack(
        name=f.text("name", NAME_RE, "lower-case letters, digits and -"),
        description=f.text("description", TEXT_RE, "one line of text without double quotes, backslash, $ or backtick"),
        source_note=f.text("source_note", TEXT_RE, NOTE, ""),
        targets=stack_targets,
        rocm=rocm,
        python=f.text("python", PYTHON_RE, "a Python version such as 3.12"),
        base=base,
        components=tuple(components),
        env=env_list(path, "env", f.get("env", list, [])),
        post=tuple(PostStep(p) for p in post),
        assets=_assets(path, f.get("asset", list, [])),
        constraints=constraints(f),
        amdgpu_ids=amdgpu_ids(f, beside),
        path=path,
    )
    # Assets and wheel URLs share the build context's assets/ folder: one file name each.
    files = [d.file for d in stack.downloads]
    for c in stack.wheel_components:
        if c.wheel_url and files.count(c.wheel_file) > 1:
            raise InputFileError(path, f"component ({c.name}).wheel.url", f"the file {c.wheel_file!r} is also "
                                 "another asset's or wheel's", "a distinct file name each")
    return stack


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


