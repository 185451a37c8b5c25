"""Reading a git remote without cloning it: its tags (`git ls-remote --tags`), and a few files at one tag
(a depth-1 fetch into a temporary bare repository, then `git show`). Every git call goes through
rocmkit.proc, with a deadline and no credential prompt."""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass

from .. import proc
from ..errors import EnvironmentMissing, Failed

TIMEOUT_S = 120
# Never ask for a password on a terminal nobody watches; a remote that wants one is unreachable.
GIT_ENV = {"GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "true", "LC_ALL": "C"}


@dataclass(frozen=True)
class Tag:
    name: str
    commit: str  # the commit it names: an annotated tag is peeled to its commit


def _git(args: list[str], what: str, cwd: str | None = None, timeout: float = TIMEOUT_S) -> list[str]:
    env = {**os.environ, **GIT_ENV}
    result = proc.run(["git", *args], env=env, cwd=cwd, timeout=timeout, keep_stdout=True, what=what)
    if result.timed_out:
        raise Failed(f"{what}: git did not answer within {timeout:g} s")
    if result.returncode != 0:
        said = "; ".join(line for line in result.tail if line not in (result.stdout or []))[-400:]
        raise Failed(f"{what} failed (git exit {result.returncode}): {said or 'no message'}")
    return result.stdout or []


def parse_ls_remote(lines: list[str]) -> list[Tag]:
    """`git ls-remote --tags` output → tags; `refs/tags/X^{}` (the peeled commit of an annotated tag) wins
    over `refs/tags/X` (the tag object)."""
    direct: dict[str, str] = {}
    peeled: dict[str, str] = {}
    for line in lines:
        sha, _, ref = line.strip().partition("\t")
        if not ref.startswith("refs/tags/") or len(sha) != 40:
            continue
        name = ref[len("refs/tags/"):]
        if name.endswith("^{}"):
            peeled[name[:-3]] = sha
        else:
            direct[name] = sha
    return [Tag(n, peeled.get(n, sha)) for n, sha in sorted(direct.items())]


def tags(url: str) -> list[Tag]:
    """Every tag of the remote at `url` with the commit it names."""
    try:
        return parse_ls_remote(_git(["ls-remote", "--tags", url], f"git ls-remote --tags {url}"))
    except EnvironmentMissing:
        raise EnvironmentMissing("git is not installed", hint="install git (Debian/Ubuntu: apt-get install git)") from None


def files_at_tag(url: str, tag: str, wanted) -> dict[str, str]:
    """The text of the files at `tag` of `url` for which wanted(path) is true (a depth-1 fetch of that tag
    only, so a large history costs one commit). Files that cannot be decoded are left out."""
    with tempfile.TemporaryDirectory(prefix="rocmkit-git-") as repo:
        _git(["init", "--quiet", "--bare", repo], "git init")
        _git(["fetch", "--quiet", "--depth", "1", "--no-tags", url, f"refs/tags/{tag}"],
             f"git fetch {url} {tag}", cwd=repo)
        names = _git(["ls-tree", "-r", "--name-only", "FETCH_HEAD"], "git ls-tree", cwd=repo)
        out = {}
        for path in (n for n in names if wanted(n)):
            out[path] = "\n".join(_git(["show", f"FETCH_HEAD:{path}"], f"git show {path}", cwd=repo))
        return out
