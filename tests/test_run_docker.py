"""The flags of rocmkit.runtime.container in a real container (marker `docker`): what each one is for is visible from
inside. This CI machine has no GPU, so the device nodes are left out (skip_missing), as `doctor --image` does."""

from __future__ import annotations

import os
import subprocess

import pytest

from rocmkit.runtime.container import read_device_nodes
from rocmkit.runtime.container import docker_run_argv

pytestmark = pytest.mark.docker

PROBE = ("ulimit -l; ulimit -s; grep CapEff /proc/self/status; readlink /proc/self/ns/ipc; id -G; "
         "df -k /dev/shm | tail -n 1")
CAP_SYS_ADMIN, CAP_SYS_NICE = 21, 23
# (--privileged is not run here: nested engines cannot grant all capabilities; test_run.py checks its argv.)


def probe(image: str, **kw) -> dict:
    docker = os.environ.get("ROCMKIT_DOCKER", "docker")
    r = subprocess.run(docker_run_argv(image, ["sh", "-c", PROBE], docker=docker, nodes=read_device_nodes(), skip_missing=True,
                                       **kw),
                       capture_output=True, text=True, timeout=120)
    if r.returncode and "error setting rlimit" in r.stderr:
        return {"rlimit_refused": r.stderr}
    assert r.returncode == 0, r.stderr
    memlock, stack, caps, ipc, groups, shm = r.stdout.splitlines()
    return {"memlock": memlock, "stack": stack, "caps": int(caps.split()[1], 16), "ipc": ipc,
            "groups": groups.split(), "shm_kib": int(shm.split()[1])}


def test_least_privilege_flags_take_effect(base_image):
    seen = probe(base_image, render_nodes=[])
    if "rlimit_refused" in seen:
        # Engines without CAP_SYS_RESOURCE (rootless, nested) refuse to raise limits; `doctor --image` retries
        # without them. The rest is checked below; the limits themselves only where the engine allows them.
        seen = probe(base_image, render_nodes=[], ulimits=False)
    else:
        assert seen["memlock"] == "unlimited" and seen["stack"] == str(64 * 1024)
    assert seen["caps"] & (1 << CAP_SYS_NICE), "SYS_NICE (NUMA binding) missing"
    assert not seen["caps"] & (1 << CAP_SYS_ADMIN), "the container must not be privileged"
    assert seen["ipc"] == os.readlink("/proc/self/ns/ipc"), "--ipc=host: RCCL needs the host's IPC namespace"
    assert "44" in seen["groups"], "the video group (no device nodes here to take a group id from)"


def test_shm_size_gives_a_private_shm(base_image):
    seen = probe(base_image, render_nodes=[], ulimits=False, shm_size="1g")
    assert seen["ipc"] != os.readlink("/proc/self/ns/ipc") and seen["shm_kib"] == 1024 * 1024

