"""Reading refs upstream: an image tag's digest and a repository's tags from its registry (`registry`), a
git remote's tags, a tag's commit, a commit's existence and files at a tag (`gitrefs`), the versions a package
index offers (`pkgindex`). What `rocmkit lock` resolves (`lockrun`); everything here reads the network.
`rocmkit outdated` plans and renders what it compares, so it lives beside the planner (rocmkit/image/outdated.py):
refs stays below image, never importing it back."""

from __future__ import annotations

from ..errors import RocmkitError


class Unreachable(RocmkitError):
    """The registry or remote could not be asked (refused, timed out, TLS, 5xx, credentials refused)."""

    exit_code = 3


class NotFound(RocmkitError):
    """It answered: the tag, manifest, repository or commit does not exist there."""

    exit_code = 1
