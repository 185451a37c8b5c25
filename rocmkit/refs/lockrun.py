"""One stack's refs resolved upstream and compared with its lock: the checks `rocmkit lock` reports, the lock
document it would write, and `lock_stack`, which writes it. Resolving reads the network (registry, git); the
comparison is data."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..stacks.lock import lock_document, stack_images
from . import NotFound, Unreachable, gitrefs, registry

# RefCheck kinds. FAILURES make `lock --check` exit 1 (and stop `lock` from writing that stack's lock, except
# a moved image, which is exactly what `lock` updates); UNREACHABLE makes it exit 3 and keeps the old lock.
OK, LOCKED, MOVED, MISSING, STALE, UNLOCKED, UNREACHABLE, MUTABLE = (
    "ok", "locked", "moved", "missing", "stale", "unlocked", "unreachable", "mutable")
FAILURES = (MOVED, MISSING, STALE, UNLOCKED)
COMPONENT = "component "


@dataclass(frozen=True)
class RefCheck:
    kind: str
    what: str  # "image REF" or "component NAME"
    detail: str
    old: str | None = None
    new: str | None = None

    def line(self) -> str:
        change = f" {self.old} -> {self.new}" if self.old and self.new else f" {self.old or self.new or ''}".rstrip()
        return f"{self.kind:<11} {self.what}:{change} {self.detail}".rstrip()

    def as_dict(self) -> dict:
        return {"kind": self.kind, "what": self.what, "detail": self.detail, "old": self.old, "new": self.new}


@dataclass
class StackRefs:
    stack: object
    findings: list[RefCheck] = field(default_factory=list)
    images: dict[str, str] = field(default_factory=dict)  # what resolved now

    def kinds(self) -> set[str]:
        return {f.kind for f in self.findings}

    def blocking(self) -> list[RefCheck]:
        """What `rocmkit lock` cannot fix by writing the lock: a stack pin that no longer holds upstream."""
        return [f for f in self.findings
                if f.kind == MISSING or (f.kind == MOVED and f.what.startswith(COMPONENT))]

    def document(self) -> dict:
        return lock_document(self.stack, self.images)


def resolve(stack) -> StackRefs:
    """Every base image of the stack resolved to a digest, every pinned git component checked upstream."""
    out = StackRefs(stack)
    lock = stack.lock
    if lock is None:
        out.findings.append(RefCheck(UNLOCKED, f"stack {stack.name}", "has no lock file: run `rocmkit lock`"))
    for reason in (lock.stale if lock else ()):
        out.findings.append(RefCheck(STALE, f"lock {lock.path}", reason))
    for ref in stack_images(stack):
        out.findings.append(_image(ref, lock, out.images))
    for c in stack.git_components:
        if c.mutable:
            out.findings.append(RefCheck(MUTABLE, f"{COMPONENT}{c.name}", f"mutable ref {c.mutable_ref}: not locked "
                                        f"({c.mutable_reason})"))
            continue
        out.findings.append(_git(c))
    for c in stack.wheel_components:  # nothing to resolve: the stack pins a URL's bytes, an index pin its version
        out.findings.append(RefCheck(OK, f"{COMPONENT}{c.name}", "wheel pinned by sha256 in the stack" if c.wheel_url
                                     else f"wheel {c.wheel_pin()} from an index: `rocmkit outdated` checks it"))
    return out


def _image(ref: str, lock, resolved: dict[str, str]) -> RefCheck:
    what = f"image {ref}"
    old = lock.digest_for(ref) if lock else None
    if "@" in ref:  # the stack pins it by digest itself
        resolved[ref] = ref.split("@", 1)[1]
        return RefCheck(OK, what, "pinned by digest in the stack")
    try:
        digest = registry.resolve_digest(ref)
    except NotFound as exc:
        return RefCheck(MISSING, what, str(exc), old=old)
    except Unreachable as exc:
        return RefCheck(UNREACHABLE, what, str(exc), old=old)
    resolved[ref] = digest
    if old is None:
        return RefCheck(UNLOCKED, what, "not in the lock", new=digest)
    if old != digest:
        return RefCheck(MOVED, what, "the tag now names other content", old=old, new=digest)
    return RefCheck(OK, what, digest)


def _git(c) -> RefCheck:
    what = f"{COMPONENT}{c.name}"
    try:
        if c.tag:
            now = gitrefs.tag_commit(c.git, c.tag)
            if now != c.commit:
                return RefCheck(MOVED, what, f"tag {c.tag} on {c.git} moved: update the stack's commit or tag",
                               old=c.commit, new=now)
            return RefCheck(OK, what, f"tag {c.tag} -> {c.commit[:12]}")
        gitrefs.check_commit(c.git, c.commit)
        return RefCheck(OK, what, f"commit {c.commit[:12]} exists on {c.git}")
    except NotFound as exc:
        return RefCheck(MISSING, what, str(exc), old=c.commit)
    except Unreachable as exc:
        return RefCheck(UNREACHABLE, what, str(exc))


def lock_stack(stack, path: Path, check: bool) -> dict:
    """`rocmkit lock` for one stack: resolve its refs and, unless `check`, write its lock to `path` when every
    ref was reached and no stack pin needs review. Returns the stack's report (what `lock --json` lists)."""
    from ..fileio import write_atomic
    from ..output import dumps

    refs = resolve(stack)
    kinds = refs.kinds()
    written = False
    if check:
        failed = bool(kinds & set(FAILURES))
        result = "FAILED" if failed else ("incomplete (unreachable refs)" if UNREACHABLE in kinds else "up to date")
    else:
        blocking = refs.blocking()
        failed = bool(blocking)
        if failed:
            result = "not written: the stack's pins need review"
        elif UNREACHABLE in kinds:
            result = "not written (old lock kept): refs unreachable"
        else:
            text = dumps(refs.document())
            if path.is_file() and path.read_text(encoding="utf-8") == text:
                result = "unchanged"
            else:
                write_atomic(path, text)
                written, result = True, "written"
    return {"stack": stack.name, "lock_file": str(path), "written": written, "failed": failed, "result": result,
            "findings": [{**f.as_dict(), "line": f.line()} for f in refs.findings]}
