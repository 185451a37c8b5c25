"""The rocmkit code that runs inside a target is this host's rocmkit, never the target's own.

certify and the doctor start rocmkit modules by name inside a target: the setup (`rocmkit.certify.intarget.setup`),
`python -m rocmkit.certify.intarget.trl_run` / `trl_launch` / `vllm_cpu_serve`, verl-cpu's vLLM platform plugin
(`rocmkit.verl.cpu_platform`, named in an environment variable the Ray workers read), the doctor itself for
`doctor --image` and its probes. Were the target's installed rocmkit to run them, host and target code would
differ whenever either moved on: a module moved or renamed here breaks the certification of every image built
by an earlier rocmkit, and a fix made here would not reach the images already built. So:

- a container rocmkit starts for certify or `doctor --image` gets this host's rocmkit package mounted read-only
  at MOUNT_ROOT/rocmkit, and MOUNT_ROOT first on its PYTHONPATH (prepended in the container by a `sh` line, so
  the PYTHONPATH the image sets stays behind it); `rocmkit ...` there is started as `python3 -m rocmkit ...`,
  the image's console script may name an entry point this rocmkit no longer has;
- a run on this host (this Python or another interpreter, e.g. a venv's) gets a folder holding only a link to
  this rocmkit package first on its PYTHONPATH (never the whole site-packages, which would bring this
  Python's packages along).

The target's own rocmkit is then only the way its dependencies (click, psutil, ...) were installed. Templates
and stack files are not read in a target. A Docker engine on another machine (DOCKER_HOST=tcp://..., ssh://, a
remote context) cannot mount this host's files: such a run is refused with that said, unless
ROCMKIT_IN_TARGET=image asks for the image's own rocmkit (its code must then match this one's, which nothing
checks: the image should be built by this same rocmkit)."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

from ..errors import EnvironmentMissing

MOUNT_ROOT = "/opt/rocmkit-host"
MODE_ENV = "ROCMKIT_IN_TARGET"  # "image": a remote engine's containers run the image's own rocmkit
_LINK_DIR: str | None = None


def package_dir() -> Path:
    """This rocmkit's package folder (the one this process imported)."""
    return Path(__file__).resolve().parent.parent


def _prepend(path: str, current: str | None) -> str:
    return path + (os.pathsep + current if current else "")


def use_image_rocmkit() -> bool:
    """Whether containers run the image's own rocmkit: only when asked (ROCMKIT_IN_TARGET=image)."""
    return os.environ.get(MODE_ENV, "").strip().lower() == "image"


def check_engine_local() -> None:
    """Refuses (exit 3) an engine this host's files cannot be mounted into, unless ROCMKIT_IN_TARGET=image."""
    if use_image_rocmkit():
        return
    from .docker_engine import endpoint

    host = endpoint().host
    if not host.startswith("unix://"):
        raise EnvironmentMissing(
            f"the Docker engine at {host} is not on this machine: rocmkit runs its own code in the image from a "
            f"read-only mount of {package_dir()}, which a remote engine cannot see",
            hint=f"use an engine on this machine (a unix:// DOCKER_HOST or context), or set {MODE_ENV}=image to run "
                 "the image's own rocmkit (it must be this rocmkit's version: build the image with it)")


def container_command(command: list[str]) -> list[str]:
    """`command` as it runs in a container with the host's rocmkit first on PYTHONPATH (pure)."""
    if command[:1] == ["rocmkit"]:
        command = ["python3", "-m", "rocmkit", *command[1:]]
    line = f'export PYTHONPATH={MOUNT_ROOT}"${{PYTHONPATH:+:$PYTHONPATH}}"; exec "$@"'
    return ["sh", "-c", line, "rocmkit-in-target", *command]


def container_mounts() -> list[tuple[str, str, str]]:
    return [(str(package_dir()), f"{MOUNT_ROOT}/rocmkit", "ro")]


def in_container(command: list[str], mounts) -> tuple[list[str], list[tuple[str, str, str]]]:
    """(command, mounts) of a container that runs this host's rocmkit; unchanged with ROCMKIT_IN_TARGET=image."""
    if use_image_rocmkit():
        return list(command), list(mounts)
    return container_command(command), [*mounts, *container_mounts()]


def link_dir() -> str:
    """A folder holding only `rocmkit`, a link to this rocmkit's package (made once, removed at exit)."""
    global _LINK_DIR
    if _LINK_DIR is None or not os.path.isdir(_LINK_DIR):
        _LINK_DIR = tempfile.mkdtemp(prefix="rocmkit-host-")
        os.symlink(package_dir(), os.path.join(_LINK_DIR, "rocmkit"))
        atexit.register(shutil.rmtree, _LINK_DIR, True)
    return _LINK_DIR


def host_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The environment of a process on this host that imports rocmkit (whichever its interpreter): `env`
    (None: this process's) with this rocmkit first on PYTHONPATH."""
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = _prepend(link_dir(), env.get("PYTHONPATH"))
    return env
