"""The one reading of an image reference, Docker's grammar (distribution/reference):

    [registry[:port]/]path[/path...][:tag][@sha256:digest]     or an image id: [sha256:]hex (12 to 64)

The first part is a registry when it has a dot or a port or is `localhost` (Docker's rule); otherwise it is part
of the lower-case repository path. Path components are lower-case letters and digits joined by `.`, `_`, `__`
or dashes; a tag is up to 128 of letters, digits, `_`, `.` and `-`, not starting with `.` or `-`.

Each caller keeps its own words for a bad reference: `parse` raises BadImageRef, which they turn into theirs
(`build --tag`, `certify --image`, a stack file's `base.image`, the registry client of `rocmkit lock`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

DOCKER_HUB = "docker.io"
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_REGISTRY = re.compile(r"^(?:[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*)"
                       r"(?::\d+)?$")
_PATH = re.compile(rf"^{_COMPONENT}(?:/{_COMPONENT})*$")
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_ID = re.compile(r"^(?:sha256:)?[0-9a-f]{12,64}$")
MAX_LENGTH = 255 + 1 + 128 + 72  # Docker's 255 for the name, plus a tag and a digest


class BadImageRef(ValueError):
    """Not an image reference; str() says which part is wrong."""


@dataclass(frozen=True)
class ImageRef:
    registry: str | None  # host[:port] as written; None: Docker Hub
    repository: str  # the path as written (no library/ added)
    tag: str | None = None
    digest: str | None = None  # sha256:<hex>
    image_id: str | None = None  # set (and nothing else) for an image id

    @property
    def name(self) -> str:
        """registry/repository as written: what `docker tag` and `docker push` take beside a tag."""
        return f"{self.registry}/{self.repository}" if self.registry else self.repository

    @property
    def hub_registry(self) -> str:
        """The registry to ask: the one written, else Docker Hub."""
        return self.registry or DOCKER_HUB

    @property
    def hub_repository(self) -> str:
        """The repository as the registry names it: Docker Hub's official images live under library/."""
        return self.repository if self.registry or "/" in self.repository else f"library/{self.repository}"

    def __str__(self) -> str:
        if self.image_id:
            return self.image_id
        return self.name + (f":{self.tag}" if self.tag else "") + (f"@{self.digest}" if self.digest else "")


def parse(ref: str, *, digest: bool = True, image_id: bool = False) -> ImageRef:
    """`ref` read into its parts; BadImageRef when it is not one. digest False refuses `@sha256:...` (a tag
    rocmkit gives an image); image_id True also takes an image id (an image already in the engine)."""
    if not isinstance(ref, str) or not ref or len(ref) > MAX_LENGTH:
        raise BadImageRef("empty or too long")
    if image_id and _ID.match(ref) and (ref.startswith("sha256:") or not _PATH.match(ref)):
        return ImageRef(None, "", image_id=ref)
    name, at, dig = ref.partition("@")
    if at and (not digest or not _DIGEST.match(dig)):
        raise BadImageRef("a digest is not allowed here" if not digest else f"bad digest {dig!r}")
    tag = None
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > slash:
        name, tag = name[:colon], name[colon + 1:]
        if not _TAG.match(tag):
            raise BadImageRef(f"bad tag {tag!r}")
    first, sep, rest = name.partition("/")
    registry = None
    if sep and ("." in first or ":" in first or first == "localhost"):
        if not _REGISTRY.match(first):
            raise BadImageRef(f"bad registry {first!r}")
        registry, name = first, rest
    if not _PATH.match(name):
        raise BadImageRef(f"bad repository {name!r} (lower-case letters, digits and . _ - between them)")
    return ImageRef(registry, name, tag, dig or None)


HINT = ("[registry[:port]/]repository[:tag][@sha256:digest]: the repository is lower-case letters and digits "
        "joined by . _ or - (Docker refuses upper case), e.g. ghcr.io/org/verl-vllm:gfx942")


def checked(ref: str, what: str, **kw) -> str:
    """`ref` when it is an image reference; else the UsageError every command gives (`run IMAGE`, `certify --image`,
    `doctor --image`, `build --tag`): the option, the value and the rule it breaks."""
    from ..errors import UsageError

    try:
        parse(ref, **kw)
    except BadImageRef as exc:
        raise UsageError(f"{what} {ref!r} is not an image reference Docker takes: {exc}", hint=HINT) from None
    return ref


def is_ref(ref: str, **kw) -> bool:
    try:
        parse(ref, **kw)
    except BadImageRef:
        return False
    return True


class Pattern:
    """An image reference as a `re.Pattern` stand-in (`.match`), for the field readers that take a pattern."""

    def __init__(self, **kw):
        self.kw = kw

    def match(self, text: str):
        return text if is_ref(text, **self.kw) else None
