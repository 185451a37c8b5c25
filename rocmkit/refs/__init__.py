"""Reading refs upstream: an image tag's digest from its registry, a git tag's commit and a commit's existence
from its remote. What `rocmkit lock` resolves; everything here reads the network."""

from __future__ import annotations


class Unreachable(Exception):
    """The registry or remote could not be asked (refused, timed out, TLS, 5xx, credentials refused)."""


class NotFound(Exception):
    """It answered: the tag, manifest or commit does not exist there."""
