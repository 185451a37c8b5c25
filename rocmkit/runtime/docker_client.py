"""Which docker client rocmkit builds and runs containers with: one that can run BuildKit builds (its buildx
plugin, or the built-in BuildKit of clients before 23.0), named with --docker or $ROCMKIT_DOCKER or found on
PATH and in the usual places, and, when none can, the reason each candidate was turned down. The `docker` SDK
cannot build with BuildKit (that needs the CLI's session protocol), so builds go through a CLI."""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass

from ..errors import EnvironmentMissing

# The environment variable that names the docker client to build with (same meaning as --docker).
CLI_ENV_VAR = "ROCMKIT_DOCKER"
# Where docker clients usually live besides PATH: Debian's docker.io puts its client in /usr/bin,
# Docker's static bundles and Docker Desktop in /usr/local/bin.
WELL_KNOWN_CLIS = ("/usr/bin/docker", "/usr/local/bin/docker")
# Docker 18.09 (API 1.39) is the first engine and client with BuildKit.
MIN_BUILDKIT_VERSION = (18, 9)
PROBE_TIMEOUT_S = 30


@dataclass(frozen=True)
class DockerCLI:
    """A docker client that can build with BuildKit. mode "buildx": `docker buildx build`;
    mode "builtin": `docker build` with DOCKER_BUILDKIT=1 (clients before 23.0 carry BuildKit)."""

    path: str
    version: str
    mode: str

    def build_env(self) -> dict[str, str]:
        env = dict(os.environ)
        if self.mode == "builtin":
            env["DOCKER_BUILDKIT"] = "1"
        return env

    def build_argv(self) -> list[str]:
        return [self.path, "buildx", "build"] if self.mode == "buildx" else [self.path, "build"]

    def describe(self) -> str:
        how = "buildx plugin" if self.mode == "buildx" else "built-in BuildKit (DOCKER_BUILDKIT=1)"
        return f"{self.path} {self.version}, {how}"


def probe_cli(path: str) -> DockerCLI | str:
    """A DockerCLI if the client at `path` can build with BuildKit, else the reason it cannot."""
    from . import proc

    def run(*args: str, env: dict[str, str] | None = None):
        return proc.capture([path, *args], timeout=PROBE_TIMEOUT_S, env=env)

    try:
        out = run("--version")
    except EnvironmentMissing as exc:
        return f"cannot run it ({exc.message})"
    m = re.search(r"version v?(\d+\.\d+[^\s,]*)", out.output)
    if out.returncode != 0 or not m:
        why = "it did not answer" if out.timed_out else out.output.strip()[:200]
        return f"`{path} --version` failed: {why}"
    version = m.group(1)
    buildx = run("buildx", "version")
    if buildx.returncode == 0:
        return DockerCLI(path, version, "buildx")
    builtin = run("build", "--help", env={**os.environ, "DOCKER_BUILDKIT": "1"})
    if buildx.timed_out or builtin.timed_out:
        return f"it did not answer within {PROBE_TIMEOUT_S}s"
    if version_tuple(version) < MIN_BUILDKIT_VERSION:
        return f"client {version} predates BuildKit (needs 18.09 or newer) and has no buildx plugin"
    if builtin.returncode != 0:
        said = " ".join(builtin.output.split())[:200]
        return f"client {version} has no buildx plugin and refuses built-in BuildKit ({said})"
    return DockerCLI(path, version, "builtin")


def candidate_clis() -> list[str]:
    """Every distinct `docker` on PATH, in PATH order, then the well-known locations."""
    seen: set[str] = set()
    out: list[str] = []
    for d in os.environ.get("PATH", "").split(os.pathsep):
        p = os.path.join(d or ".", "docker")
        if os.path.isfile(p) and os.access(p, os.X_OK):
            key = os.path.realpath(p)
            if key not in seen:
                seen.add(key)
                out.append(p)
    for p in WELL_KNOWN_CLIS:
        if os.path.isfile(p) and os.access(p, os.X_OK) and os.path.realpath(p) not in seen:
            seen.add(os.path.realpath(p))
            out.append(p)
    return out


def find_cli(explicit: str | None = None) -> DockerCLI:
    """The docker client to build with: the one named (--docker or $ROCMKIT_DOCKER), else the first
    that can do BuildKit among candidate_clis(). Says why each was rejected when none can."""
    named = explicit or os.environ.get(CLI_ENV_VAR)
    if named:
        source = "--docker" if explicit else CLI_ENV_VAR
        path = shutil.which(named) if os.sep not in named else named
        if not path or not os.path.isfile(path):
            raise EnvironmentMissing(f"{source}={named}: no such docker client",
                                     hint="give the path of a docker client, e.g. /usr/bin/docker")
        found = probe_cli(path)
        if isinstance(found, str):
            raise EnvironmentMissing(f"{source}={named} cannot build with BuildKit: {found}", hint=_CLI_HINT)
        return found
    rejected = []
    for path in candidate_clis():
        found = probe_cli(path)
        if isinstance(found, DockerCLI):
            return found
        rejected.append(f"{path}: {found}")
    if not rejected:
        raise EnvironmentMissing("no docker client found (none on PATH, none in " + ", ".join(WELL_KNOWN_CLIS) + ")",
                                 hint=_CLI_HINT)
    raise EnvironmentMissing("no docker client here can build with BuildKit:\n  " + "\n  ".join(rejected), hint=_CLI_HINT)


def run_cli(explicit: str | None = None) -> str:
    """The docker client to run containers with: the one named (--docker or $ROCMKIT_DOCKER), else the
    first on PATH or in the well-known places. Running needs no BuildKit, so nothing is probed."""
    named = explicit or os.environ.get(CLI_ENV_VAR)
    if named:
        return named
    clis = candidate_clis()
    if not clis:
        raise EnvironmentMissing("no docker client found to run the container",
                                 hint=f"install one, or name it with --docker PATH or {CLI_ENV_VAR}=PATH")
    return clis[0]


_CLI_HINT = (f"install the docker buildx plugin (Debian/Ubuntu: docker-buildx or docker-buildx-plugin), or use a "
             f"client with built-in BuildKit (docker < 23, e.g. Debian 12's docker.io in /usr/bin/docker); "
             f"name it with --docker PATH or {CLI_ENV_VAR}=PATH")


def version_tuple(version: str) -> tuple[int, ...]:
    m = re.match(r"(\d+)\.(\d+)", version)
    return (int(m.group(1)), int(m.group(2))) if m else (0, 0)
