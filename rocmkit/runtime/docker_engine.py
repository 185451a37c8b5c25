"""The Docker engine rocmkit talks to through the `docker` SDK: where it is (DOCKER_HOST, else the docker CLI's
current context), whether it answers (ping), its version and resources, and images: inspect, tag, push, read a
file out of one. Which docker client builds and runs containers is docker_client's business: BuildKit builds
need the CLI, not the SDK."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass

from ..errors import EnvironmentMissing, Failed, UsageError
from . import imageref

NO_ENGINE_HINT = (
    "start a Docker engine (`sudo systemctl start docker`, or as root `dockerd &`), or point DOCKER_HOST "
    "at a running one (e.g. DOCKER_HOST=unix:///run/user/1000/docker.sock or DOCKER_HOST=ssh://user@builder)"
)


NO_IMAGE_HINT = "build it (rocmkit build) or pull it"

DEFAULT_HOST = "unix:///var/run/docker.sock"


@dataclass(frozen=True)
class Endpoint:
    """The engine the docker CLI would talk to, found the CLI's way, so that the SDK, the doctor's ping and
    the CLI (build, run) all reach one engine: DOCKER_HOST, else the context named by DOCKER_CONTEXT or by
    `docker context use` (currentContext in $DOCKER_CONFIG/config.json), else the default socket."""
    host: str
    context: str | None = None  # a non-default context, when the host came from one
    source: str = "default"

    def describe(self) -> str:
        if self.source == "DOCKER_HOST":
            return self.host
        if self.context:
            return f"{self.host} (docker context {self.context!r}, from {self.source})"
        return f"{self.host} (the default; DOCKER_HOST is not set)"


def _docker_config_dir() -> str:
    return os.environ.get("DOCKER_CONFIG") or os.path.join(os.path.expanduser("~"), ".docker")


def endpoint() -> Endpoint:
    if os.environ.get("DOCKER_HOST"):
        return Endpoint(os.environ["DOCKER_HOST"], source="DOCKER_HOST")
    name, source = os.environ.get("DOCKER_CONTEXT"), "DOCKER_CONTEXT"
    config = os.path.join(_docker_config_dir(), "config.json")
    if not name:
        name, source = _read_json_field(config, "currentContext"), config
    if not name or name == "default":
        return Endpoint(DEFAULT_HOST)
    import hashlib  # here: the doctor's level 1 imports this module and rarely needs it

    # The CLI's context store: contexts/meta/<sha256 of the name>/meta.json.
    meta = os.path.join(_docker_config_dir(), "contexts", "meta", hashlib.sha256(name.encode()).hexdigest(),
                        "meta.json")
    endpoints = _read_json_field(meta, "Endpoints")
    host = (endpoints or {}).get("docker", {}).get("Host") if isinstance(endpoints, dict) else None
    if not host:
        raise EnvironmentMissing(f"docker context {name!r} (from {source}) does not exist or names no engine "
                                 f"(read {meta})", hint="`docker context ls` lists the contexts; "
                                 "`docker context use default` or DOCKER_HOST chooses another engine")
    return Endpoint(host, context=name, source=source)


def _read_json_field(path: str, field: str):
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data.get(field) if isinstance(data, dict) else None


@dataclass(frozen=True)
class EngineInfo:
    version: str
    api_version: str
    os: str
    arch: str
    ncpu: int
    mem_total: int  # bytes
    address: str


@dataclass(frozen=True)
class ImageInfo:
    id: str
    tags: tuple[str, ...]
    size: int  # bytes
    labels: dict[str, str]
    digests: tuple[str, ...] = ()  # repo@sha256:... for images pulled from or pushed to a registry


class Engine:
    """A connected Docker engine. `connect()` makes one or says (exit 3) how to get one."""

    def __init__(self, client, where: Endpoint):
        self.client = client
        self.where = where

    @classmethod
    def connect(cls, timeout: int = 30) -> "Engine":
        try:
            import docker
        except ImportError as exc:  # a broken install; pip install rocmkit brings the SDK
            raise EnvironmentMissing(f"the docker Python SDK cannot be imported ({exc})",
                                     hint="pip install 'docker>=5.0.3'") from None
        where = endpoint()
        try:
            if where.context:  # the SDK's from_env ignores contexts; its ContextAPI (docker >= 4.3) reads them
                from docker.context import ContextAPI

                ctx = ContextAPI.get_context(where.context)
                client = docker.DockerClient(base_url=where.host, tls=ctx.TLSConfig if ctx else False,
                                             timeout=timeout)
            else:
                client = docker.from_env(timeout=timeout)
            client.ping()
        except Exception as exc:  # DockerException, or requests' errors and timeouts, depending on SDK version
            if "http+docker" in str(exc):  # docker < 7.1 under requests >= 2.32 cannot speak to any engine
                raise EnvironmentMissing(f"the docker Python SDK {docker.__version__} cannot talk to an engine with "
                                         "the requests library installed here (needs docker >= 7.1 with requests "
                                         ">= 2.32)", hint="pip install 'docker>=7.1'") from None
            raise EnvironmentMissing(f"no Docker engine reachable at {where.describe()}: {_reason(exc)}",
                                     hint=NO_ENGINE_HINT) from None
        return cls(client, where)

    def info(self) -> EngineInfo:
        # here: the doctor's level 1 imports this module for ping() alone and never needs the client's rules
        from .docker_client import MIN_BUILDKIT_VERSION, version_tuple

        version = self.client.version()
        info = self.client.info()
        engine = EngineInfo(
            version=str(version.get("Version", "?")),
            api_version=str(version.get("ApiVersion", "?")),
            os=str(info.get("OSType", version.get("Os", "?"))),
            arch=str(info.get("Architecture", version.get("Arch", "?"))),
            ncpu=int(info.get("NCPU") or 1),
            mem_total=int(info.get("MemTotal") or 0),
            address=self.where.describe(),
        )
        if version_tuple(engine.version) < MIN_BUILDKIT_VERSION and not engine.version.startswith("?"):
            raise EnvironmentMissing(f"Docker engine {engine.version} at {engine.address} has no BuildKit "
                                     "(needs 18.09 or newer)", hint="upgrade the engine")
        return engine

    def image(self, ref: str) -> ImageInfo | None:
        """The image `ref` (a tag or an id), or None when the engine has no such image."""
        from docker.errors import APIError, ImageNotFound

        try:
            img = self.client.images.get(ref)
        except ImageNotFound:
            return None
        except APIError as exc:
            if exc.status_code == 400:  # the engine's own check of the reference ("invalid reference format")
                raise UsageError(f"{ref!r} is not an image reference: {exc.explanation}") from None
            raise Failed(f"the Docker engine could not look up {ref!r}: {exc.explanation}") from None
        return ImageInfo(id=img.id, tags=tuple(img.tags), size=int(img.attrs.get("Size") or 0),
                         labels=dict((img.attrs.get("Config") or {}).get("Labels") or {}),
                         digests=tuple(img.attrs.get("RepoDigests") or ()))

    def require_image(self, ref: str, hint: str = NO_IMAGE_HINT) -> ImageInfo:
        """The image `ref`, or UsageError (exit 2) saying the engine lacks it: what every command that runs an
        image checks first (certify --image, doctor --image, recipe checks)."""
        info = self.image(ref)
        if info is None:
            raise UsageError(f"image {ref!r} is not in the Docker engine", hint=hint)
        return info

    def unreachable(self, ref: str) -> str | None:
        """Why the engine cannot get the image `ref` (None when it can): it holds it, or the registry answers for
        its manifest (the engine API's /distribution/{ref}/json, with this user's registry logins). Seconds, where
        a build would find out only when BuildKit pulls it."""
        if self.image(ref) is not None:
            return None
        try:
            self.client.api.inspect_distribution(ref)
        except Exception as exc:  # APIError (unknown, unauthorized, no such host) or the client's timeout
            return getattr(exc, "explanation", None) or _reason(exc)
        return None

    def tag(self, image_id: str, ref: str) -> None:
        repo, tag = split_ref(ref)
        if not self.client.api.tag(image_id, repo, tag, force=True):
            raise Failed(f"the engine refused to tag {image_id} as {ref}")

    def push(self, ref: str, on_line=None) -> str | None:
        """Push `ref`; returns the pushed digest. Registry errors arrive inside the stream, not as
        exceptions, so every line is checked."""
        repo, tag = split_ref(ref)
        digest = None
        try:
            for line in self.client.api.push(repo, tag=tag, stream=True, decode=True):
                if "error" in line:
                    raise Failed(f"pushing {ref} failed: {line.get('error')}",
                                 hint="log in with `docker login REGISTRY`, and check the repository name")
                if on_line and line.get("status"):
                    on_line(" ".join(str(line[k]) for k in ("id", "status", "progress") if line.get(k)))
                aux = line.get("aux") or {}
                digest = aux.get("Digest", digest)
        except Failed:
            raise
        except Exception as exc:
            raise Failed(f"pushing {ref} failed: {_reason(exc)}") from None
        return digest

    def read_file(self, image_id: str, path: str) -> bytes | None:
        """A file's bytes from an image, without running it: create a container, copy out, remove it."""
        import io
        import tarfile

        from docker.errors import NotFound

        container = self.client.containers.create(image_id, command=["true"], network_disabled=True)
        try:
            stream, _ = container.get_archive(path)
            data = b"".join(stream)
        except NotFound:
            return None
        finally:
            container.remove(force=True)
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            member = tar.getmembers()[0]
            handle = tar.extractfile(member)
            return handle.read() if handle else None

    def remove_labelled(self, label: str) -> list[str]:
        """Force-remove every container (running or not) carrying `label` ("key=value"); their ids."""
        return [c.id for c in self.client.containers.list(all=True, filters={"label": label}) if self.remove(c)]

    def remove(self, container) -> bool:
        """Force-remove one container (an id or the client's object); False when it was already gone."""
        from docker.errors import APIError, NotFound

        try:
            (self.client.containers.get(container) if isinstance(container, str) else container).remove(force=True)
        except NotFound:
            return False  # already gone
        except APIError as exc:
            if exc.status_code != 409:  # the engine's conflict for a forced removal: another one is under way
                raise
            return False
        return True

    def labelled(self, label: str) -> list[dict]:
        """Every container (running or not) carrying `label` ("key" or "key=value"): id, name, labels, status and
        when it was created."""
        return [{"id": c.id, "name": c.name, "labels": dict(c.labels or {}), "status": c.status,
                 "created": str(c.attrs.get("Created", ""))[:19]}
                for c in self.client.containers.list(all=True, filters={"label": label})]

    def labelled_pids(self, label: str) -> list[int]:
        """The host pid of each running container carrying `label` ("key=value")."""
        pids = []
        for c in self.client.containers.list(filters={"label": label}):
            pid = (c.attrs.get("State") or {}).get("Pid")
            if pid:
                pids.append(int(pid))
        return pids

    def read_json(self, image_id: str, path: str):
        raw = self.read_file(image_id, path)
        return None if raw is None else json.loads(raw)


def ping() -> dict:
    """Whether the engine answers and lets this user in — the engine API's `/_ping`, spoken directly on the
    Unix socket of endpoint(): the doctor's level 1 runs in about 0.15 s, and importing the SDK alone takes 0.22 s."""
    try:
        host = endpoint().host
    except EnvironmentMissing as exc:
        return {"host": "?", "status": "unchecked", "reason": exc.message}
    if not host.startswith("unix://"):
        return {"host": host, "status": "unchecked", "reason": "non-unix DOCKER_HOST is not probed at level 1"}
    sock = host[len("unix://"):]
    if not os.path.exists(sock):
        return {"host": host, "status": "absent"}
    import socket

    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(1.0)
    try:
        s.connect(sock)
        s.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
        reply = s.recv(64).decode(errors="replace")
    except PermissionError:
        return {"host": host, "status": "denied"}
    except OSError as exc:
        return {"host": host, "status": "down", "error": exc.strerror or str(exc)}
    finally:
        s.close()
    return {"host": host, "status": "ok" if " 200 " in reply else "down", "reply": reply.split("\r\n")[0]}


def _reason(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    # The SDK nests the interesting part ("Connection refused", "No such file") deep in a long repr.
    for pattern in (r"(Connection refused)", r"(No such file or directory)", r"(Permission denied)",
                    r"(Name or service not known)", r"(timed out)"):
        m = re.search(pattern, text)
        if m:
            return m.group(1)
    return text.splitlines()[0][:300]


def check_ref(ref: str, option: str = "--tag") -> str:
    """An image reference rocmkit may tag or push: [registry[:port]/]name[/name...][:tag] (runtime.imageref)."""
    return imageref.checked(ref, option, digest=False)


def split_ref(ref: str) -> tuple[str, str]:
    """'host:5000/a/b:t' → ('host:5000/a/b', 't'); a ref without a tag gets 'latest'."""
    r = imageref.parse(check_ref(ref, "image"), digest=False)
    return r.name, r.tag or "latest"
