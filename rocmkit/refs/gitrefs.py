"""A git remote asked about one pin: where a tag points now (`git ls-remote`), and whether a commit exists
there. ls-remote lists only refs, so a commit that no ref names is asked for directly: a shallow
`git fetch --depth=1 --filter=tree:0 <url> <commit>` into a temporary bare repository (one commit object,
no trees, where the server supports filters; GitHub does). Never prompts for credentials."""

from __future__ import annotations

import os
import tempfile

from .. import proc
from . import NotFound, Unreachable

TIMEOUT_S = 120.0
# What git prints when the remote answered but has no such object (git daemon / GitHub: "not our ref").
_MISSING = ("not our ref", "couldn't find remote ref", "no such remote ref", "unadvertised object")


def _git(args: list[str], what: str, cwd: str | None = None) -> proc.Result:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true", "LC_ALL": "C"}
    return proc.run(["git", *args], env=env, cwd=cwd, timeout=TIMEOUT_S, keep_stdout=True, what=what)


def _failure(result: proc.Result) -> str:
    if result.timed_out:
        return f"no answer within {TIMEOUT_S:g} s"
    errors = [line.strip().removeprefix("fatal: ") for line in result.tail
              if line.strip() and line not in (result.stdout or [])]
    return " ".join(errors[-3:]) if errors else f"git exited {result.returncode}"


def tag_commit(url: str, tag: str) -> str:
    """The commit tag `tag` points to on the remote now (an annotated tag peeled to its commit)."""
    r = _git(["ls-remote", "--tags", url, f"refs/tags/{tag}", f"refs/tags/{tag}^{{}}"], f"git ls-remote {url}")
    if not r.ok:
        raise Unreachable(f"{url}: {_failure(r)}")
    refs = dict(reversed(line.split("\t", 1)) for line in r.stdout or [] if "\t" in line)
    commit = refs.get(f"refs/tags/{tag}^{{}}") or refs.get(f"refs/tags/{tag}")
    if not commit:
        raise NotFound(f"{url} has no tag {tag}")
    return commit


def check_commit(url: str, commit: str) -> None:
    """Returns when `commit` exists on the remote; NotFound when the remote says it does not."""
    with tempfile.TemporaryDirectory(prefix="rocmkit-lock-") as tmp:
        init = _git(["init", "-q", "--bare", tmp], "git init")
        if not init.ok:
            raise Unreachable(f"git init in {tmp}: {_failure(init)}")
        r = _git(["fetch", "-q", "--no-tags", "--depth=1", "--filter=tree:0", url, commit], f"git fetch {url}", cwd=tmp)
    if r.ok:
        return
    reason = _failure(r)
    if any(m in line for line in r.tail for m in _MISSING):
        raise NotFound(f"{url} has no commit {commit}")
    raise Unreachable(f"{url}: {reason}")
