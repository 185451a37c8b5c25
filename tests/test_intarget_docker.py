"""The rocmkit code in a target is the host's (rocmkit/runtime/intarget.py), tested with an image built by an
earlier rocmkit: the trl-cpu image of CI's image gate (built by the rocmkit it was provisioned with) with a
module of its rocmkit removed, as an older layout would lack it. certify (TRL, vLLM server mode on the CPU) still
passes through the host's mount; with the image's own rocmkit (ROCMKIT_IN_TARGET=image) the run fails."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest
from provisioned import provisioned

pytestmark = [pytest.mark.docker, pytest.mark.slow]
DOCKER = os.environ.get("ROCMKIT_DOCKER", "docker")
REMOVED = "certify/trl_run.py"  # what the trainer runs: `python -m rocmkit.certify.trl_run`


@pytest.fixture(scope="module")
def older_image():
    base = provisioned("ROCMKIT_TEST_TRL_CPU_IMAGE", ".ci/image-gate.sh builds the trl-cpu image", "TRL_CPU")
    tag = f"rocmkit-test/older-layout:{uuid.uuid4().hex[:8]}"
    dockerfile = (f"FROM {base}\nRUN python3 -c \"import os, rocmkit; "
                  f"os.remove(os.path.join(os.path.dirname(rocmkit.__file__), '{REMOVED}'))\"\n")
    r = subprocess.run([DOCKER, "build", "--network", "none", "-t", tag, "-"], input=dockerfile, text=True,
                       capture_output=True, env={**os.environ, "DOCKER_BUILDKIT": "0"})
    assert r.returncode == 0, r.stderr[-2000:]
    yield tag
    subprocess.run([DOCKER, "rmi", "-f", tag], capture_output=True)


def certify(image: str, out, *, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rocmkit", "certify", "--image", image, "--engine", "trl",
                           "--vllm-mode", "server", "--gpus", "0", "--steps", "12", "--no-probes", "--out", str(out),
                           "--progress", "plain"], capture_output=True, text=True, timeout=1500,
                          env={**os.environ, "CI": "true", **(env or {})})


def test_the_image_lacks_the_module(older_image):
    r = subprocess.run([DOCKER, "run", "--rm", older_image, "python3", "-c", "import rocmkit.certify.trl_run"],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "No module named 'rocmkit.certify.trl_run'" in r.stderr


def test_certify_runs_the_hosts_rocmkit_in_an_older_image(older_image, tmp_path):
    r = certify(older_image, tmp_path / "host")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    cert = json.loads((tmp_path / "host" / "certificate.json").read_text())
    assert cert["verdict"] == "pass"
    argv = cert["settings"]["command"]
    assert any(a.endswith(":/opt/rocmkit-host/rocmkit:ro") for a in argv) and "rocmkit.certify.trl_launch" in argv


def test_the_images_own_rocmkit_fails_there(older_image, tmp_path):
    r = certify(older_image, tmp_path / "image", env={"ROCMKIT_IN_TARGET": "image"})
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    log = (tmp_path / "image" / "run.log").read_text(errors="replace")
    assert "rocmkit.certify.trl_run" in log and "No module named" in log
