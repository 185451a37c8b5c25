"""The preflight of `rocmkit kuberay`'s init container run for real in the local Docker engine, in a pod-shaped
container: sysfs (bound from the project's tree generator) lists 8 MI300X GPUs, /dev/dri holds the 4 render nodes
the "device plugin" gave it (character devices that open, as /dev/kfd), as AMD's device plugin mounts them."""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest
from treegen import HostSpec, write_tree

from rocmkit.cluster import kuberay

pytestmark = [pytest.mark.docker]
REPO = Path(__file__).resolve().parent.parent


def preflight_args(gpus: int) -> list[str]:
    """The init container's command, as `rocmkit kuberay` renders it for a job asking `gpus` per node."""
    s = kuberay.KubeRaySpec(nodes=2, gpus_per_node=gpus, image="img:1", arch="gfx942", ray_version="2.55.1")
    (init,) = kuberay.manifests(s)[-1]["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["initContainers"]
    assert init["command"][:2] == ["rocmkit", "doctor"]
    return ["python3", "-m", "rocmkit", *init["command"][1:]]


@pytest.mark.parametrize("requested,code", [(4, 0), (8, 1)])
def test_preflight_in_a_pod_shaped_container(tmp_path, base_image, requested, code):
    tree = write_tree(tmp_path / "node", HostSpec(container=True, missing_render=(4, 5, 6, 7), process=None,
                                                  proc_self=False))
    render = sorted(p.name for p in (tree / "dev" / "dri").iterdir())
    assert len(render) == 4
    report = tmp_path / "report"
    report.mkdir()
    docker = os.environ.get("ROCMKIT_DOCKER", "docker")
    name = f"rocmkit-test-preflight-{uuid.uuid4().hex[:8]}"
    cmd = [docker, "run", "--rm", "--name", name, "--network=none", "--shm-size=64g",
           "-v", f"{tree / 'sys'}:/sys:ro", "--device", "/dev/null:/dev/kfd",
           *[a for r in render for a in ("--device", f"/dev/null:/dev/dri/{r}")],
           "-v", f"{REPO}:/src:ro", "-e", "PYTHONPATH=/src", "-v", f"{report}:{kuberay.REPORT_DIR}",
           base_image, *preflight_args(requested)]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    finally:
        subprocess.run([docker, "rm", "-f", name], capture_output=True, timeout=60)
    assert r.returncode == code, r.stdout + r.stderr
    doc = json.loads((report / "preflight.json").read_text())
    found = {f["id"]: f for f in doc["findings"]}
    assert found["pod.gpus"]["evidence"]["openable"] == 4 and found["pod.gpus"]["evidence"]["listed_by_sysfs"] == 8
    assert found["pod.gpus"]["status"] == ("pass" if code == 0 else "fail")
    assert found["gpu.arch"]["status"] == "pass" and found["container.shm"]["status"] == "pass"
    # this engine may not raise memlock (rlimit refused): a warning, which does not stop the pod
    assert found["container.memlock"]["status"] in ("pass", "warn")
