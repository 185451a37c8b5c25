"""The tags of an image repository, through the registry's HTTP API (`GET /v2/<repo>/tags/list`, with the
anonymous bearer token Docker Hub and ghcr.io hand out, and `Link` paging). localhost registries are spoken
to over plain http, as the docker engine does by default."""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.request
from urllib.parse import urlencode, urljoin

from ..errors import Failed

TIMEOUT_S = 30
DOCKER_HUB = "registry-1.docker.io"
MAX_PAGES = 50


def split_image(ref: str) -> tuple[str, str, str]:
    """'rocm/dev-ubuntu-22.04:7.0.2-complete' → ('registry-1.docker.io', 'rocm/dev-ubuntu-22.04',
    '7.0.2-complete'); a digest reference keeps its tag part empty."""
    name = ref.split("@", 1)[0]
    repo, tag = name, ""
    head, sep, tail = name.rpartition(":")
    if sep and "/" not in tail:
        repo, tag = head, tail
    first, _, rest = repo.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        host, path = first, rest
    else:
        host, path = DOCKER_HUB, repo
    if host == DOCKER_HUB and "/" not in path:
        path = f"library/{path}"
    return host, path, tag


def _scheme(host: str) -> str:
    bare = host.split(":", 1)[0]
    return "http" if bare in ("localhost", "127.0.0.1", "::1") else "https"


def _open(url: str, token: str | None):
    headers = {"Accept": "application/json", "User-Agent": "rocmkit"}
    if token:
        headers["Authorization"] = f"Bearer {token}"
    return urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=TIMEOUT_S)


def _token(challenge: str, repo: str) -> str | None:
    """An anonymous pull token for a `WWW-Authenticate: Bearer realm=...,service=...` challenge."""
    fields = dict(re.findall(r'(\w+)="([^"]*)"', challenge))
    if not challenge.lower().startswith("bearer") or "realm" not in fields:
        return None
    query = {"scope": f"repository:{repo}:pull", **({"service": fields["service"]} if "service" in fields else {})}
    with urllib.request.urlopen(f"{fields['realm']}?{urlencode(query)}", timeout=TIMEOUT_S) as resp:
        doc = json.loads(resp.read())
    return doc.get("token") or doc.get("access_token")


def tags(image: str) -> list[str]:
    """Every tag of the repository of `image`."""
    host, repo, _ = split_image(image)
    url = f"{_scheme(host)}://{host}/v2/{repo}/tags/list"
    token = None
    out: list[str] = []
    try:
        for _ in range(MAX_PAGES):
            try:
                resp = _open(url, token)
            except urllib.error.HTTPError as exc:
                challenge = exc.headers.get("WWW-Authenticate", "")
                if exc.code != 401 or token is not None or not (token := _token(challenge, repo)):
                    raise
                resp = _open(url, token)
            with resp:
                out += json.loads(resp.read()).get("tags") or []
                link = resp.headers.get("Link", "")
            m = re.match(r'<([^>]+)>;\s*rel="next"', link)
            if not m:
                return out
            url = urljoin(url, m.group(1))
    except urllib.error.HTTPError as exc:
        raise Failed(f"{host}/{repo}: the registry answered HTTP {exc.code} to tags/list") from None
    except (urllib.error.URLError, OSError, ValueError) as exc:
        raise Failed(f"{host}/{repo}: cannot list tags ({getattr(exc, 'reason', exc)})") from None
    return out
