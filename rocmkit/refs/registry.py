"""A container registry through its HTTP API (Docker Registry v2 / OCI distribution): an image tag → the digest
of its manifest (list) (HEAD /v2/<name>/manifests/<tag> with the manifest-list Accept headers, read
Docker-Content-Digest), and a repository's tags (GET /v2/<name>/tags/list, following `Link` pages). One
image-name parsing, one auth (bearer token, Docker Hub's and ghcr.io's, anonymous or with credentials; basic
auth; credentials where `docker login` stores them: config.json `auths` or a credential helper), one request
path (https, then plain http for a registry on this host). Not the Docker SDK's inspect_distribution: that
asks the engine to ask the registry, and `rocmkit lock` must run where no engine is (CI's lock job) and name
the request that failed. A HEAD is not counted against Docker Hub's pull limit."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from ..runtime import proc
from ..errors import InputFileError, UsageError
from ..runtime import imageref
from . import NotFound, Unreachable

ACCEPT = ", ".join([
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
    "application/vnd.docker.distribution.manifest.v2+json",
    "application/vnd.oci.image.manifest.v1+json",
])
DOCKER_HUB = imageref.DOCKER_HUB
DOCKER_HUB_API = "registry-1.docker.io"
DOCKER_HUB_AUTH_KEYS = ("https://index.docker.io/v1/", "index.docker.io", "docker.io", "registry-1.docker.io")
# Docker's rule: a registry on this host may speak plain http (127.0.0.0/8 is insecure by default).
LOOPBACK = re.compile(r"^(localhost|127(\.\d{1,3}){3}|\[::1\])(:\d+)?$")
TIMEOUT_S = 30.0
MAX_PAGES = 50  # of tags/list: a bound, so a registry whose Link pages loop cannot keep us asking


@dataclass(frozen=True)
class ImageName:
    registry: str  # host[:port]; docker.io for Docker Hub
    repository: str  # library/ubuntu for Docker Hub's official images
    tag: str


def parse_image(ref: str, default_tag: str = "latest") -> ImageName:
    """Docker's normalisation (runtime.imageref): the first part is a registry when it has a dot or a port or is
    localhost. A digest (`@sha256:...`) is left off; a reference without a tag gets `default_tag`."""
    try:
        r = imageref.parse(ref)
    except imageref.BadImageRef as exc:
        raise UsageError(f"{ref!r} is not an image reference ({exc})") from None
    return ImageName(r.hub_registry, r.hub_repository, r.tag or default_tag)


def resolve_digest(ref: str, *, timeout: float = TIMEOUT_S) -> str:
    """The sha256 digest `ref` resolves to now; NotFound when the registry says the tag is not there."""
    img = parse_image(ref)
    path = f"/v2/{img.repository}/manifests/{urllib.parse.quote(img.tag, safe='')}"
    status, reply, _, url, auth = _ask("HEAD", img, path, ACCEPT, timeout)
    _answered(status, url, img, f"{img.repository}:{img.tag}")
    digest = reply.get("Docker-Content-Digest")
    if not digest:  # a registry that leaves the header off a HEAD: the digest is the sha256 of the manifest
        status, reply, body = _again(url, img, ACCEPT, auth, timeout)
        if status != 200:
            raise Unreachable(f"{url}: HTTP {status}")
        digest = reply.get("Docker-Content-Digest") or "sha256:" + hashlib.sha256(body).hexdigest()
    if not re.match(r"^sha256:[0-9a-f]{64}$", digest):
        raise Unreachable(f"{url}: unexpected digest {digest!r}")
    return digest


def tags(ref: str, *, timeout: float = TIMEOUT_S) -> list[str]:
    """Every tag of the repository of `ref`, across all `Link` pages (at most MAX_PAGES)."""
    img = parse_image(ref)
    status, reply, body, url, auth = _ask("GET", img, f"/v2/{img.repository}/tags/list", "application/json", timeout)
    out: list[str] = []
    for page in range(1, MAX_PAGES + 1):
        _answered(status, url, img, f"repository {img.repository}")
        try:
            out += json.loads(body).get("tags") or []
        except (ValueError, AttributeError):
            raise Unreachable(f"{url}: the tags/list answer is not the JSON a registry sends") from None
        m = re.match(r'<([^>]+)>;\s*rel="next"', reply.get("Link", ""))
        if not m or page == MAX_PAGES:
            break
        url = urllib.parse.urljoin(url, m.group(1))
        status, reply, body = _again(url, img, "application/json", auth, timeout)
    return out


class _TlsFailed(Exception):
    pass


def _ask(method: str, img: ImageName, path: str, accept: str, timeout: float):
    """(status, headers, body, url, Authorization) of `method path` on the image's registry: https, then plain
    http for a registry on this host (Docker's rule: 127.0.0.0/8 is insecure by default); asked again with the
    Authorization its 401 challenge asks for."""
    host = DOCKER_HUB_API if img.registry == DOCKER_HUB else img.registry
    schemes = ["https", "http"] if LOOPBACK.match(host) else ["https"]
    for i, scheme in enumerate(schemes):
        url = f"{scheme}://{host}{path}"
        try:
            auth = None
            status, reply, body = _request(method, url, _headers(accept, auth), timeout)
            if status == 401:
                auth = _authorization(reply.get("WWW-Authenticate", ""), img, timeout)
                status, reply, body = _request(method, url, _headers(accept, auth), timeout)
            return status, reply, body, url, auth
        except _TlsFailed as exc:
            if i + 1 == len(schemes):
                raise Unreachable(f"{host}: TLS failed ({exc})") from None
    raise AssertionError("unreachable")  # pragma: no cover


def _again(url: str, img: ImageName, accept: str, auth: str | None, timeout: float):
    """A further GET on the scheme and with the Authorization `_ask` settled on."""
    try:
        return _request("GET", url, _headers(accept, auth), timeout)
    except _TlsFailed as exc:
        raise Unreachable(f"{img.registry}: TLS failed ({exc})") from None


def _headers(accept: str, auth: str | None) -> dict[str, str]:
    return {"Accept": accept, **({"Authorization": auth} if auth else {})}


def _answered(status: int, url: str, img: ImageName, what: str) -> None:
    """Returns on a 200; otherwise the error the registry's answer means."""
    if status == 404:
        raise NotFound(f"{img.registry} has no {what}")
    if status in (401, 403):
        raise Unreachable(f"{img.registry} refused access to {img.repository} (HTTP {status}): log in "
                          f"(`docker login {img.registry}`) or set DOCKER_CONFIG to a config.json with its auths")
    if status != 200:
        raise Unreachable(f"{url}: HTTP {status}")


def _authorization(challenge: str, img: ImageName, timeout: float) -> str:
    """The Authorization header the registry's 401 challenge asks for."""
    scheme, _, params = challenge.partition(" ")
    fields = dict(re.findall(r'(\w+)="([^"]*)"', params))
    creds = credentials(img.registry)
    basic = "Basic " + base64.b64encode(f"{creds[0]}:{creds[1]}".encode()).decode() if creds else None
    if scheme.lower() == "basic":
        if not basic:
            raise Unreachable(f"{img.registry} asks for a login and DOCKER_CONFIG has none for it: "
                              f"`docker login {img.registry}`")
        return basic
    if scheme.lower() != "bearer" or "realm" not in fields:
        raise Unreachable(f"{img.registry}: unsupported auth challenge {challenge!r}")
    query = {"scope": fields.get("scope") or f"repository:{img.repository}:pull"}
    if fields.get("service"):
        query["service"] = fields["service"]
    token_url = fields["realm"] + ("&" if "?" in fields["realm"] else "?") + urllib.parse.urlencode(query)
    status, _, body = _request("GET", token_url, {"Authorization": basic} if basic else {}, timeout)
    if status in (401, 403):
        raise Unreachable(f"{img.registry}: the token service {fields['realm']} refused "
                          f"{'the login in DOCKER_CONFIG' if creds else 'an anonymous request'} (HTTP {status}): "
                          f"log in (`docker login {img.registry}`) or set DOCKER_CONFIG to a config.json with its auths")
    if status != 200:
        raise Unreachable(f"{img.registry}: token request to {fields['realm']} answered HTTP {status}")
    try:
        doc = json.loads(body)
        return "Bearer " + (doc.get("token") or doc["access_token"])
    except (ValueError, KeyError, TypeError):
        raise Unreachable(f"{img.registry}: token response from {fields['realm']} has no token") from None


def credentials(registry: str) -> tuple[str, str] | None:
    """(user, password) for the registry as `docker login` stored it, looked up as Docker's CLI does in
    $DOCKER_CONFIG/config.json (default ~/.docker): a `credHelpers` entry for this registry, else `credsStore`
    (then `auths` holds only placeholders), else the `auths` entry itself. A helper runs as Docker runs it:
    `docker-credential-NAME get`, the server on stdin, `{"Username", "Secret"}` on stdout."""
    path = Path(os.environ.get("DOCKER_CONFIG") or Path.home() / ".docker") / "config.json"
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise InputFileError(str(path), "", f"cannot read: {exc}", "the JSON `docker login` writes") from None
    if not isinstance(data, dict):
        return None
    keys = DOCKER_HUB_AUTH_KEYS if registry == DOCKER_HUB else (registry,)
    helpers = data.get("credHelpers") or {}
    if not isinstance(helpers, dict):
        raise InputFileError(str(path), "credHelpers", "not an object", "registry host → credential helper name")
    field, helper = next(((f"credHelpers.{k}", h) for k, h in helpers.items() if _host(k) in keys), (None, None))
    if helper is None and data.get("credsStore"):
        field, helper = "credsStore", data["credsStore"]
    if helper is not None:
        if not isinstance(helper, str) or not re.fullmatch(r"[A-Za-z0-9._-]+", helper):
            raise InputFileError(str(path), field, f"{helper!r} is not a helper name",
                                 "the NAME of a docker-credential-NAME program, e.g. pass, secretservice")
        return _from_helper(helper, DOCKER_HUB_AUTH_KEYS[0] if registry == DOCKER_HUB else registry, path, field)
    auths = data.get("auths")
    if not isinstance(auths, dict):
        return None
    for key, entry in auths.items():
        if _host(key) in keys and isinstance(entry, dict):
            if entry.get("auth"):
                try:
                    user, _, password = base64.b64decode(entry["auth"]).decode().partition(":")
                except ValueError:
                    raise InputFileError(str(path), f"auths.{key}.auth", "not base64 of user:password") from None
                return user, password
            if entry.get("username") and entry.get("password"):
                return entry["username"], entry["password"]
    return None


def _host(key: str) -> str:
    return re.sub(r"^https?://", "", key).split("/", 1)[0]


def _from_helper(helper: str, server: str, config: Path, field: str) -> tuple[str, str] | None:
    exe = f"docker-credential-{helper}"
    if not shutil.which(exe):
        raise Unreachable(f"{config} `{field}` names the credential helper {helper!r}, but {exe} is not on PATH: "
                          f"install it, or log in with `docker login` where it is")
    run = proc.capture([exe, "get"], timeout=TIMEOUT_S, keep_stdout=True, input_text=server + "\n")
    said = "\n".join(run.stdout or [])
    if not run.ok:
        if "credentials not found" in run.output.lower():  # every Docker helper's words for "no login stored"
            return None
        last = next((ln for ln in reversed(run.tail) if ln.strip()), "no output")
        raise Unreachable(f"{exe} get {server}: " + ("timed out" if run.timed_out else f"exit {run.returncode}: {last}"))
    try:
        doc = json.loads(said)
        user, secret = doc["Username"], doc["Secret"]
    except (ValueError, KeyError, TypeError):
        raise Unreachable(f"{exe} get {server}: not a helper's answer ({{\"Username\", \"Secret\"}} JSON): "
                          f"{said[:120]!r}") from None
    if user == "<token>":  # an identity (OAuth refresh) token, as `az acr login` stores: not a password login
        raise Unreachable(f"{exe} holds an identity token for {server}; rocmkit reads user/password logins "
                          f"only: `docker login {server} -u USER`")
    return user, secret


class _NoRedirectErrors(urllib.request.HTTPErrorProcessor):
    """Every status comes back as a response (a 401 or 404 is an answer, not an exception)."""

    def http_response(self, request, response):
        return response

    https_response = http_response


_OPENER = urllib.request.build_opener(_NoRedirectErrors)


def _request(method: str, url: str, headers: dict[str, str], timeout: float):
    req = urllib.request.Request(url, method=method, headers={"User-Agent": "rocmkit", **headers})
    try:
        with _OPENER.open(req, timeout=timeout) as resp:
            status = resp.status
            if status in (301, 302, 303, 307, 308) and resp.headers.get("Location"):
                location = urllib.parse.urljoin(url, resp.headers["Location"])
                return _request(method, location, {k: v for k, v in headers.items() if k != "Authorization"}, timeout)
            return status, resp.headers, resp.read() if method == "GET" else b""
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, ssl.SSLError):
            raise _TlsFailed(str(exc.reason)) from None
        raise Unreachable(f"{urllib.parse.urlsplit(url).netloc}: {exc.reason}") from None
    except ssl.SSLError as exc:
        raise _TlsFailed(str(exc)) from None
    except (OSError, ValueError) as exc:  # timeouts, resets, a malformed reply
        raise Unreachable(f"{urllib.parse.urlsplit(url).netloc}: {exc}") from None
