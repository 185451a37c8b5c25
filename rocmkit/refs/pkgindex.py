"""Which versions of a distribution a package index offers: the simple API, as JSON (PEP 691) when the
index speaks it (pypi.org does) and as HTML (PEP 503) otherwise (a plain directory served over HTTP, a
devpi, a find-links page such as repo.radeon.com's), so one reader serves every index pip can use."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from html.parser import HTMLParser
from urllib.parse import unquote, urljoin, urlparse

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)
from packaging.version import Version

from ..errors import Failed

PYPI = "https://pypi.org/simple/"
TIMEOUT_S = 30
ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"


@dataclass(frozen=True)
class File:
    filename: str
    version: Version
    requires_python: str | None = None
    yanked: bool = False


class _Anchors(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links: list[dict[str, str | None]] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self.links.append(dict(attrs))


def _version_of(filename: str, name: str) -> Version | None:
    """The version a wheel or sdist file name carries, when it is a file of `name`."""
    try:
        if filename.endswith(".whl"):
            dist, version, _, _ = parse_wheel_filename(filename)
        else:
            dist, version = parse_sdist_filename(filename)
    except (InvalidWheelFilename, InvalidSdistFilename, ValueError):
        return None
    return version if canonicalize_name(dist) == canonicalize_name(name) else None


def _get(url: str) -> tuple[str, bytes]:
    req = urllib.request.Request(url, headers={"Accept": ACCEPT, "User-Agent": "rocmkit"})
    try:
        with urllib.request.urlopen(req, timeout=TIMEOUT_S) as resp:
            return resp.headers.get("Content-Type", ""), resp.read()
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return "", b""
        raise Failed(f"{url}: the index answered HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise Failed(f"{url}: cannot reach the index ({getattr(exc, 'reason', exc)})") from None


def files(index_url: str, name: str, *, page: bool = False) -> list[File]:
    """The files of `name` on a simple index (index_url/<name>/), or on one page listing files of many
    distributions when page is true (pip's --find-links). An index without the name gives []."""
    url = index_url if page else urljoin(index_url.rstrip("/") + "/", canonicalize_name(name) + "/")
    ctype, body = _get(url)
    if not body:
        return []
    if "json" in ctype:
        doc = json.loads(body)
        entries = [(f.get("filename", ""), f.get("requires-python"), bool(f.get("yanked"))) for f in doc.get("files", [])]
    else:
        parser = _Anchors()
        parser.feed(body.decode("utf-8", errors="replace"))
        entries = []
        for a in parser.links:
            href = a.get("href") or ""
            filename = unquote(urlparse(urljoin(url, href)).path.rsplit("/", 1)[-1])
            entries.append((filename, a.get("data-requires-python"), "data-yanked" in a))
    out = []
    for filename, requires, yanked in entries:
        version = _version_of(filename, name)
        if version is not None:
            out.append(File(filename, version, requires, yanked))
    return out


def newest(found: list[File], python: str | None = None, *, pre: bool = False) -> Version | None:
    """The newest version with a file that is not yanked and installs on `python` (final releases only,
    unless pre)."""
    ok = set()
    for f in found:
        if f.yanked or (f.version.is_prerelease and not pre):
            continue
        if python and f.requires_python:
            try:
                if not SpecifierSet(f.requires_python).contains(python + ".0", prereleases=True):
                    continue
            except InvalidSpecifier:
                pass
        ok.add(f.version)
    return max(ok, default=None)

