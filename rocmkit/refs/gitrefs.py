"""A git remote read without cloning it: its tags and where one tag points (`git ls-remote --tags`, an
annotated tag peeled to its commit), whether a commit exists there, and a few files at one tag. ls-remote
lists only refs, so a commit that no ref names is asked for directly: a shallow `git fetch --depth=1
--filter=tree:0 <url> <commit>` into a temporary bare repository (one commit object, no trees, where the server
supports filters; GitHub does); files come from a depth-1 fetch of the tag, then `git show`. Every git call
goes through rocmkit.runtime.proc with a deadline, and never prompts for credentials: a remote that wants them is
unreachable."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass

from ..runtime import proc
from ..errors import EnvironmentMissing
from . import NotFound, Unreachable

TIMEOUT_S = 120.0
GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true", "LC_ALL": "C"}
# What git prints when the remote answered but has no such object (git daemon / GitHub: "not our ref").
_MISSING = ("not our ref", "couldn't find remote ref", "no such remote ref", "unadvertised object")


@dataclass(frozen=True)
class Tag:
    name: str
    commit: str  # the commit it names: an annotated tag is peeled to its commit


def _git(args: list[str], what: str, cwd: str | None = None) -> proc.Result:
    try:
        return proc.run(["git", *args], env={**os.environ, **GIT_ENV}, cwd=cwd, timeout=TIMEOUT_S,
                        keep_stdout=True, what=what)
    except EnvironmentMissing:
        raise EnvironmentMissing("git is not installed", hint="install git (Debian/Ubuntu: apt-get install git)") from None


def _failure(result: proc.Result) -> str:
    if result.timed_out:
        return f"no answer within {TIMEOUT_S:g} s"
    errors = [line.strip().removeprefix("fatal: ") for line in result.tail
              if line.strip() and line not in (result.stdout or [])]
    return " ".join(errors[-3:]) if errors else f"git exited {result.returncode}"


def _output(args: list[str], what: str, where: str, cwd: str | None = None) -> list[str]:
    """The stdout lines of a git call that must succeed; Unreachable naming `where` and the call otherwise."""
    result = _git(args, what, cwd=cwd)
    if not result.ok:
        raise Unreachable(f"{where}: {what}: {_failure(result)}")
    return result.stdout or []


def parse_ls_remote(lines: list[str]) -> list[Tag]:
    """`git ls-remote --tags` output → tags; `refs/tags/X^{}` (the peeled commit of an annotated tag) wins
    over `refs/tags/X` (the tag object)."""
    direct: dict[str, str] = {}
    peeled: dict[str, str] = {}
    for line in lines:
        sha, _, ref = line.strip().partition("\t")
        if not ref.startswith("refs/tags/") or len(sha) not in (40, 64):  # SHA-1 or SHA-256 object names
            continue
        name = ref[len("refs/tags/"):]
        if name.endswith("^{}"):
            peeled[name[:-3]] = sha
        else:
            direct[name] = sha
    return [Tag(n, peeled.get(n, sha)) for n, sha in sorted(direct.items())]


def tags(url: str, *names: str) -> list[Tag]:
    """The tags of the remote at `url` (only those named, when names are given) with the commits they name."""
    patterns = [p for n in names for p in (f"refs/tags/{n}", f"refs/tags/{n}^{{}}")]
    return parse_ls_remote(_output(["ls-remote", "--tags", url, *patterns], "git ls-remote", url))


def tag_commit(url: str, tag: str) -> str:
    """The commit tag `tag` points to on the remote now (an annotated tag peeled to its commit)."""
    found = {t.name: t.commit for t in tags(url, tag)}
    if tag not in found:
        raise NotFound(f"{url} has no tag {tag}")
    return found[tag]


def check_commit(url: str, commit: str) -> None:
    """Returns when `commit` exists on the remote; NotFound when the remote says it does not."""
    with tempfile.TemporaryDirectory(prefix="rocmkit-git-") as tmp:
        _output(["init", "-q", "--bare", tmp], "git init", tmp)
        r = _git(["fetch", "-q", "--no-tags", "--depth=1", "--filter=tree:0", url, commit], f"git fetch {url}", cwd=tmp)
    if r.ok:
        return
    if any(m in line for line in r.tail for m in _MISSING):
        raise NotFound(f"{url} has no commit {commit}")
    raise Unreachable(f"{url}: {_failure(r)}")


def files_at_tag(url: str, tag: str, wanted) -> dict[str, str]:
    """The text of the files at `tag` of `url` for which wanted(path) is true (a depth-1 fetch of that tag
    only, so a large history costs one commit)."""
    with tempfile.TemporaryDirectory(prefix="rocmkit-git-") as repo:
        _output(["init", "-q", "--bare", repo], "git init", repo)
        _output(["fetch", "-q", "--depth=1", "--no-tags", url, f"refs/tags/{tag}"], f"git fetch {tag}", url, cwd=repo)
        names = _output(["ls-tree", "-r", "--name-only", "FETCH_HEAD"], "git ls-tree", url, cwd=repo)
        return {path: "\n".join(_output(["show", f"FETCH_HEAD:{path}"], f"git show {path}", url, cwd=repo))
                for path in names if wanted(path)}


def history(url: str, commit: str, tag: str) -> tuple[set[str], set[str]]:
    """The ancestors of `commit` and of `tag` (each including itself), read from the remote: one fetch of both
    with `--filter=tree:0` (commits only, no trees or files, where the server supports filters), then `git
    rev-list`. What orders a commit that no release tag names against the releases (`outdated`)."""
    with tempfile.TemporaryDirectory(prefix="rocmkit-git-") as repo:
        _output(["init", "-q", "--bare", repo], "git init", repo)
        r = _git(["fetch", "-q", "--no-tags", "--filter=tree:0", url, commit, f"+refs/tags/{tag}:refs/tags/{tag}"],
                 f"git fetch {url}", cwd=repo)
        if not r.ok:
            if any(m in line for line in r.tail for m in _MISSING):
                raise NotFound(f"{url} has no commit {commit}")
            raise Unreachable(f"{url}: {_failure(r)}")
        return ({line.strip() for line in _output(["rev-list", commit], "git rev-list", url, cwd=repo)},
                {line.strip() for line in _output(["rev-list", f"refs/tags/{tag}^{{commit}}"], "git rev-list", url,
                                                  cwd=repo)})
