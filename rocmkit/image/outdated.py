"""`rocmkit outdated`: for each pin of a stack, the newer release upstream — git tags (`git ls-remote`),
PyPI versions (the simple API), registry tags of the base image — and, for a git candidate, the lines of its
own requirement files that bind torch, ROCm, Ray and transformers, checked against the stack's own pins. A
commit that no release tag names is ordered by its history (a commits-only fetch).
Lookups run in parallel; one that cannot reach its upstream is reported, never fatal.
It lives in image because it plans and renders the stack it compares; it reads upstream through rocmkit/refs/,
which stays below image."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ..errors import Failed, RocmkitError
from ..stacks import Component, Source, Stack
from ..stacks.model import NO_ROCM
from ..stacks.edit import Edit
from ..tomlread import load_toml_text
from ..refs import NotFound, gitrefs, pkgindex, registry

NEWER, CURRENT, UNORDERED, UNREACHABLE, NONE_FOUND = "newer", "current", "unordered", "unreachable", "none-found"
MISSING = "missing"  # the upstream answered: it has no such repository or image (a NotFound)
ANSWERED = (NEWER, CURRENT, UNORDERED, MISSING)  # statuses only an upstream's answer gives
BINDING = ("torch", "ray", "transformers")  # the lines that decide which torch/ROCm/Ray/transformers a pin goes with
# Besides the files the stack names: the project's own pyproject.toml and requirements files.
_REQ_FILE = re.compile(r"pyproject\.toml|requirements[^/]*\.txt|requirements/[^/]+\.txt")
WORKERS = 8
_VERSIONED = re.compile(r"^(?P<pre>\D*?)(?P<ver>\d+(?:\.\d+)*)(?P<post>.*)$")


@dataclass
class PinCheck:
    component: str  # a component's name, or "base"
    kind: str  # git, pip, base-pip, base-image
    pin: str  # what is checked: the requirement, the image, the git URL
    current: str
    status: str = NONE_FOUND
    latest: str | None = None
    latest_commit: str | None = None
    note: str = ""
    constraints: list[dict] = field(default_factory=list)
    edits: list[Edit] = field(default_factory=list)  # what --write changes (empty: nothing to write)

    def to_json(self) -> dict:
        return {"component": self.component, "kind": self.kind, "pin": self.pin, "current": self.current,
                "status": self.status, "latest": self.latest, "latest_commit": self.latest_commit,
                "note": self.note, "constraints": self.constraints, "writable": bool(self.edits)}


# ---- versions in tags ----

def tag_version(tag: str, prefix: str = "") -> Version | None:
    """The version a tag names after `prefix` ('v0.9.1' → 0.9.1; 'rocm-6.4.1' with prefix 'rocm-')."""
    if not tag.startswith(prefix):
        return None
    try:
        return Version(tag[len(prefix):])
    except InvalidVersion:
        return None


def tag_prefix(tag: str) -> str:
    """What comes before the version in a tag ('' for 'v1.2' and '1.2', 'rocm-' for 'rocm-6.4')."""
    m = _VERSIONED.match(tag)
    pre = m.group("pre") if m else ""
    return "" if pre in ("", "v") else pre


def check_git(c: Component, url: str, stack: Stack) -> PinCheck:
    f = PinCheck(c.name, "git", url, c.tag or (c.commit or c.ref))
    found = gitrefs.tags(url)
    by_commit: dict[str, str] = {}
    for t in found:  # a commit's version tag wins over another name for it (nightly, latest)
        if t.commit not in by_commit or tag_version(t.name, tag_prefix(t.name)):
            by_commit[t.commit] = t.name
    current_tag = c.tag or (by_commit.get(c.commit) if c.commit else None) or (c.mutable_ref if c.mutable else None)
    prefix = tag_prefix(current_tag) if current_tag else ""
    current = tag_version(current_tag, prefix) if current_tag else None
    pre = bool(current and current.is_prerelease)
    releases = [(v, t) for t in found if (v := tag_version(t.name, prefix)) and (pre or not v.is_prerelease)]
    if not releases:
        f.note = f"no release tag{' ' + prefix + '<version>' if prefix else ''} upstream"
        return f
    version, best = max(releases, key=lambda vt: vt[0])
    f.latest, f.latest_commit = best.name, best.commit
    if current_tag and not c.tag:
        f.current = f"{c.commit[:12]} (= tag {current_tag})" if c.commit else current_tag
    if best.commit == c.commit or (current is not None and version <= current):
        f.status = CURRENT
        return f
    if current is None and c.commit and not c.mutable:
        # A commit between releases (verl's recipes pin SGLang so): its history says whether the newest release
        # contains it, and which release it came after.
        try:
            mine, theirs = gitrefs.history(url, c.commit, best.name)
        except RocmkitError as exc:
            f.status = UNORDERED
            f.note = (f"{c.commit[:12]} is no release tag and its history could not be read ({exc.message}): "
                      f"it cannot be ordered against {best.name}; not written")
            return f
        after = max(((v, t.name) for v, t in releases if t.commit in mine), default=None)
        f.current = f"{c.commit[:12]} ({'after ' + after[1] if after else 'before every release'})"
        if c.commit not in theirs:
            f.status = UNORDERED
            f.note = (f"{c.commit[:12]} is not in the history of {best.name}: newer than every release or on "
                      f"another branch; not written")
            return f
    if current is None and c.mutable:  # a branch (main): no commit to order by
        f.status = UNORDERED
        f.note = f"{c.ref} is no release tag: it cannot be ordered against {best.name}; not written"
    else:
        f.status = NEWER
        if c.mutable:
            f.note = "a mutable component: replace its mutable table by commit and tag by hand"
        else:
            f.edits = [Edit(c.name, c.commit, best.commit, key="commit"),
                       Edit(c.name, c.tag, best.name, key="tag", add_after="commit")]
    try:
        f.constraints = binding_lines(url, best.name, c, stack)
    except RocmkitError as exc:
        f.note = (f.note + "; " if f.note else "") + f"its requirement files could not be read: {exc.message}"
    return f


def binding_lines(url: str, tag: str, c: Component, stack: Stack) -> list[dict]:
    """The lines of the candidate's requirement files naming torch, ROCm, Ray or transformers, each checked
    against the version the stack pins for that package."""
    sub = "" if c.subdir in (".", "") else c.subdir.rstrip("/") + "/"
    own = {sub + r for r in c.requirements} | ({sub + c.pyproject} if c.pyproject else set())

    def wanted(path: str) -> bool:
        rel = path[len(sub):] if path.startswith(sub) else ""
        return path in own or bool(_REQ_FILE.fullmatch(rel))

    out = []
    for path, text in sorted(gitrefs.files_at_tag(url, tag, wanted).items()):
        for line in _requirement_lines(path, text):
            out.append(_judge(path, line, stack))
    return out


def _requirement_lines(path: str, text: str) -> list[str]:
    if path.endswith(".toml"):
        try:
            doc = load_toml_text(text, path)
        except RocmkitError:
            return []
        project = doc.get("project") or {}
        lines = list(project.get("dependencies") or [])
        for extra in (project.get("optional-dependencies") or {}).values():
            lines += list(extra or [])
        lines += list((doc.get("build-system") or {}).get("requires") or [])
        lines = [x for x in lines if isinstance(x, str)]
    else:
        lines = [x.split(" #", 1)[0].strip() for x in text.splitlines()]
    return [x for x in lines if x and not x.startswith("#") and _binds(x)]


def _binds(line: str) -> bool:
    if "rocm" in line.lower():
        return True
    try:
        return canonicalize_name(Requirement(line).name) in BINDING
    except InvalidRequirement:
        return False


def _judge(path: str, line: str, stack: Stack) -> dict:
    entry = {"file": path, "line": line}
    try:
        req = Requirement(line)
    except InvalidRequirement:
        return entry
    pinned = stack.pinned_version(req.name)
    entry["package"] = canonicalize_name(req.name)
    if pinned and req.specifier:
        entry["stack_pins"] = pinned
        entry["satisfied"] = req.specifier.contains(pinned, prereleases=True)
    return entry


# ---- PyPI pins ----

def check_pip(component: str, kind: str, requirement: str, sources: list[tuple[str, bool]], python: str) -> PinCheck:
    """sources: (url, is_page) — simple indexes, or find-links pages."""
    req = Requirement(requirement)
    pinned = next(iter(req.specifier)).version
    current = Version(pinned)
    f = PinCheck(component, kind, requirement, str(current))
    found, failed = [], []
    for url, page in sources:
        try:
            found += pkgindex.files(url, req.name, page=page)
        except RocmkitError as exc:
            failed.append(exc.message)
    if len(failed) == len(sources):
        raise Failed("; ".join(failed))
    f.note = "; ".join(f"left out: {m}" for m in failed)  # the sources that answered still decide
    best = pkgindex.newest(found, python, pre=current.is_prerelease)
    if best is None:
        f.note = "; ".join(filter(None, ["no installable version found on " + ", ".join(u for u, _ in sources), f.note]))
        return f
    f.latest = str(best)
    if best <= current:
        f.status = CURRENT
        return f
    f.status = NEWER
    f.edits = [Edit(component, requirement, requirement.replace(f"=={pinned}", f"=={best}", 1))]
    return f


def pip_sources(stack: Stack, c: Component | None, requirement: str, index_url: str) -> list[tuple[str, bool]]:
    """Where pip would look for this pin. A version with a local label (+rocm7.0.2...) is a build the main
    index does not carry: only the stack's own extra index and find-links page are asked for it."""
    local = "+" in requirement
    extra = c.extra_index_url if c else stack.base.pip_extra_index_url
    out = [] if local else [(index_url, False)]
    if extra:
        out.append((extra, False))
    if c is None and stack.base.pip_find_links:
        out.append((stack.base.pip_find_links, True))
    return out or [(index_url, False)]


# ---- the base image ----

def check_image(ref: str, rocm: str = NO_ROCM) -> PinCheck:
    f = PinCheck("base", "base-image", ref, ref)
    tag = registry.parse_image(ref, default_tag="").tag
    m = _VERSIONED.match(tag) if tag else None
    if "@" in ref or not m:
        f.note = "pinned by digest" if "@" in ref else f"tag {tag or '(none)'} carries no version to compare"
        return f
    pre, post = m.group("pre"), m.group("post")
    current = Version(m.group("ver"))
    repo = ref[: len(ref) - len(tag) - 1]
    newer = []
    for t in registry.tags(ref):
        mt = _VERSIONED.match(t)
        if mt and mt.group("pre") == pre and mt.group("post") == post:
            newer.append((Version(mt.group("ver")), t))
    if not newer:
        f.note = f"no tag {pre}<version>{post} in the repository"
        return f
    version, best = max(newer)
    f.latest = f"{repo}:{best}"
    if version <= current:
        f.status = CURRENT
        return f
    f.status = NEWER
    f.edits = [Edit("base", ref, f.latest)]
    if rocm != NO_ROCM:  # a tag such as primus v26.4 → v26.7 does not say that ROCm moved 7.14 → 10.0 under it
        f.note = (f"--write changes the image only: the stack's rocm = \"{rocm}\" and its torch/ROCm pins are "
                  f"those of {tag}; set them to what {best} carries")
    return f


# ---- all of it ----

def check(stack: Stack, *, index_url: str = pkgindex.PYPI, git_remotes: dict[str, str] | None = None) -> list[PinCheck]:
    git_remotes = git_remotes or {}
    jobs = []
    for img in dict.fromkeys([stack.base.image, *stack.base.image_per_arch.values()]):
        jobs.append((PinCheck("base", "base-image", img, img), lambda img=img: check_image(img, stack.rocm)))
    for r in stack.base.pip:
        jobs.append((PinCheck("base", "base-pip", r, r),
                     lambda r=r: check_pip("base", "base-pip", r, pip_sources(stack, None, r, index_url), stack.python)))
    for c in stack.components:
        if c.git:
            url = git_remotes.get(c.name, c.git)
            jobs.append((PinCheck(c.name, "git", url, c.tag or c.ref), lambda c=c, url=url: check_git(c, url, stack)))
        for r in c.pip:
            jobs.append((PinCheck(c.name, "pip", r, r),
                         lambda c=c, r=r: check_pip(c.name, "pip", r, pip_sources(stack, c, r, index_url), stack.python)))

    def run(job):
        placeholder, fn = job
        try:
            return fn()
        except NotFound as exc:  # it answered: calling that "unreachable" would send the user to their network
            placeholder.status, placeholder.note = MISSING, exc.message
        except RocmkitError as exc:
            placeholder.status, placeholder.note = UNREACHABLE, exc.message
        return placeholder

    # (git runs in threads side by side: rocmkit.runtime.proc's cleanup after a run leaves other runs' processes alone)
    with ThreadPoolExecutor(max_workers=WORKERS) as pool:
        return list(pool.map(run, jobs))


def hints(findings: list[PinCheck]) -> list[str]:
    """What the user can do about the pins that were not answered, each naming what failed."""
    out = []
    unreachable = [f for f in findings if f.status == UNREACHABLE]
    missing = [f for f in findings if f.status == MISSING]
    if unreachable:
        out.append(f"{len(unreachable)} pin(s) not checked: their upstream did not answer "
                   f"({', '.join(f'{f.component} {f.pin}' for f in unreachable[:4])}{', ...' if len(unreachable) > 4 else ''};"
                   " the notes say why); run again where it answers, or read a mirror with --index-url or "
                   "--git-remote NAME=URL")
    if missing:
        out.append(f"{len(missing)} pin(s) name what their upstream does not have "
                   f"({', '.join(f'{f.component} {f.pin}' for f in missing[:4])}): review them in the stack file")
    return out


def nothing_answered(findings: list[PinCheck]) -> bool:
    """No upstream answered at all (exit 3): nothing was checked, which a list of 'unreachable' must not hide."""
    return any(f.status == UNREACHABLE for f in findings) and not any(f.status in ANSWERED for f in findings)


def edits(findings: list[PinCheck]) -> list[Edit]:
    return [e for f in findings if f.status == NEWER for e in f.edits if e.old is not None or e.add_after]


def proposed_text(src: Source, findings: list[PinCheck]) -> tuple[str, Stack]:
    """The stack file's text (`src`) with every newer pin written in, and the stack it
    parses to (its patches read from where the source's are): it must parse and render for each of its
    targets (what `rocmkit render --stack-file` does), or nothing is proposed."""
    from .plan import make_plan
    from .render import render_dockerfile
    from ..stacks.edit import apply

    new = apply(src.text, edits(findings), src.origin)
    stack = src.parse(new)
    for target in stack.targets:
        render_dockerfile(make_plan(stack, [target]))
    return new, stack
