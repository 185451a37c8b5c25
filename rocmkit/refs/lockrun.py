"""One stack's refs resolved upstream and compared with its lock: the checks `rocmkit lock` reports, the lock
document it would write, and `lock_stack`, which writes it. Resolving reads the network (registry, git); the
comparison is data."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..stacks.lock import lock_document, stack_images
from . import NotFound, Unreachable, gitrefs, registry

# RefCheck kinds. FAILURES make `lock --check` exit 1 (and stop `lock` from writing that stack's lock, except
# a moved image, which is exactly what `lock` updates); UNREACHABLE alone makes it exit 3 and keeps the old lock.
# NO_LOCK (the stack has no lock file at all) is its own kind: its fix is to make one, not to review a pin.
OK, LOCKED, MOVED, MISSING, STALE, UNLOCKED, UNREACHABLE, MUTABLE, NO_LOCK = (
    "ok", "locked", "moved", "missing", "stale", "unlocked", "unreachable", "mutable", "no-lock")
FAILURES = (MOVED, MISSING, STALE, UNLOCKED, NO_LOCK)
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
        out.findings.append(RefCheck(NO_LOCK, f"stack {stack.name}", "has no lock file yet"))
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
        return RefCheck(UNLOCKED, what, "not in the lock", new=digest) if lock else RefCheck(OK, what, digest)
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


def lock_stack(stack, path: Path, check: bool, *, make: str, builtin: bool = False) -> dict:
    """`rocmkit lock` for one stack: resolve its refs and, unless `check`, write its lock to `path` when every
    ref was reached and no stack pin needs review. `make` is the command that writes this stack's lock (said
    where it has none). Returns the stack's report (what `lock --json` lists)."""
    from ..fileio import write_atomic
    from ..output import dumps

    refs = resolve(stack)
    if check:  # say how a lock is made, and for a built-in stack why rocmkit ships none
        refs.findings = [RefCheck(f.kind, f.what, no_lock_detail(stack.name, make, builtin)) if f.kind == NO_LOCK
                         else f for f in refs.findings]
    else:  # the lock this run is making is no finding
        refs.findings = [f for f in refs.findings if f.kind != NO_LOCK]
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
            result = "not written" + (" (old lock kept)" if path.is_file() else "") + ": refs unreachable"
        else:
            text = dumps(refs.document())
            if path.is_file() and path.read_text(encoding="utf-8") == text:
                result = "unchanged"
            else:
                write_atomic(path, text)
                written, result = True, "written"
    # lock_file: where this stack's lock is written (and read first); lock_read: the lock this run compared
    # with (a built-in stack's may be the one shipped with rocmkit), None where there was none.
    return {"stack": stack.name, "lock_file": str(path), "lock_read": stack.lock.path if stack.lock else None,
            "written": written, "failed": failed, "result": result, "make": make, "builtin": builtin,
            "findings": [{**f.as_dict(), "line": f.line()} for f in refs.findings]}


def no_lock_detail(name: str, make: str, builtin: bool) -> str:
    if not builtin:
        return f"has no lock file yet: `{make}` makes one (where its registry and git remotes answer)"
    # The project's image pipeline makes the built-in stacks' locks where Docker Hub and GitHub answer; until
    # that has run, a release carries none, and no digest is ever invented.
    return (f"rocmkit ships no lock for this built-in stack: a lock records the digest each base image tag names "
            f"when it is made, which needs the stack's registry and git remotes; `{make}` writes one to the "
            f"current folder ({name}.lock.json, read by every command run from there), "
            f"`rocmkit lock --stack-file FILE` one beside a copy of it")


# What each failing kind means, for the hint: what failed and how to fix it, in this order.
_HINTS = (
    ((MISSING,), "a tag, commit or image the stack pins is gone upstream: review that pin"),
    ((MOVED,), "a pin moved upstream (a git tag names another commit, or a base tag other content): review it; "
               "`rocmkit lock` then records a base image's new digest (a git pin is changed in the stack file)"),
    ((STALE, UNLOCKED), "the lock no longer matches the stack file (a pin changed since it was made): run "
                        "`rocmkit lock` for it again"),
)


def outcome(reports: list[dict], check: bool):
    """The error `rocmkit lock` ends with (None: exit 0). Exit 1 names what failed — no lock yet, a lock that no
    longer matches its stack, a pin that moved or is gone — each with its own fix; exit 3 when the only
    problem is a registry or remote that did not answer."""
    from ..errors import EnvironmentMissing, Failed

    unreachable = [f["what"] for r in reports for f in r["findings"] if f["kind"] == UNREACHABLE]
    reach = (f"could not reach {', '.join(unreachable)}: those refs were not checked; run again where the "
             "registry and git remotes answer") if unreachable else ""
    failed = [r for r in reports if r["failed"]]
    if failed:
        kinds = {f["kind"] for r in failed for f in r["findings"]}
        if not check:
            kinds &= {MISSING, MOVED}  # what stops `lock` from writing: a stack pin that needs review
        hints = [h for ks, h in _HINTS if kinds & set(ks)]
        no_lock = [r for r in failed if any(f["kind"] == NO_LOCK for f in r["findings"])]
        if [r for r in no_lock if not r["builtin"]]:
            hints.append("no lock yet: " + "; ".join(f"`{r['make']}` makes {r['stack']}'s" for r in no_lock
                                                     if not r["builtin"]))
        if [r for r in no_lock if r["builtin"]]:
            hints.append("no lock yet: rocmkit ships none for its built-in stacks; the no-lock line above says how to "
                         "make one")
        what = "; ".join(f"{r['stack']} ({', '.join(sorted({f['kind'] for f in r['findings']} & set(FAILURES)))})"
                         for r in failed)
        return Failed(f"{'lock check' if check else 'lock'} failed for {what}",
                      hint="\n      ".join(filter(None, hints + [reach])))
    if unreachable:
        return EnvironmentMissing(f"could not reach: {', '.join(unreachable)} (no lock file was written)",
                                  hint="run again where the registry and git remotes answer (a mirror: "
                                       "point the stack at it)")
    return None
