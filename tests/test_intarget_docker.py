"""The rocmkit code in a target is the host's (rocmkit/runtime/host_rocmkit.py), tested with images of an earlier
rocmkit: the trl-cpu image of CI's image gate with its rocmkit package replaced by main's before the layout
changed (OLDER_MAIN, from this repository's history: no `rocmkit.runtime`, the doctor's modules flat in
`rocmkit/host/`), and one with a module of its rocmkit removed, as an older layout would lack it. certify (TRL,
vLLM server mode on the CPU) passes in both through the host's mount; with the image's own rocmkit
(ROCMKIT_IN_TARGET=image) the run of the second fails for want of the module."""

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
REMOVED = "certify/intarget/trl_run.py"  # what the trainer runs: `python -m rocmkit.certify.intarget.trl_run`
OLDER_MAIN = "e7e6781"  # main before issue 26 moved modules (runtime/, host/facts/, host/probes/)
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _build(dockerfile: str, context: str | None = None) -> str:
    tag = f"rocmkit-test/older-layout:{uuid.uuid4().hex[:8]}"
    argv = [DOCKER, "build", "--network", "none", "-t", tag]
    r = subprocess.run(argv + ([context] if context else ["-"]), input=None if context else dockerfile, text=True,
                       capture_output=True, env={**os.environ, "DOCKER_BUILDKIT": "0"})
    assert r.returncode == 0, r.stderr[-2000:]
    return tag


@pytest.fixture(scope="module")
def older_main_image(tmp_path_factory):
    """The gate's image with OLDER_MAIN's rocmkit package in place of its own (the package as that main's wheel
    installs it: its templates are not read in a target)."""
    base = provisioned("ROCMKIT_TEST_TRL_CPU_IMAGE", ".ci/image-gate.sh builds the trl-cpu image", "TRL_CPU")
    have = subprocess.run(["git", "-C", REPO, "cat-file", "-e", f"{OLDER_MAIN}^{{commit}}"], capture_output=True)
    if have.returncode != 0:
        if os.environ.get("CI"):
            pytest.fail(f"commit {OLDER_MAIN} is not in this clone's history (a shallow clone?)")
        pytest.skip(f"commit {OLDER_MAIN} is not in this clone's history")
    ctx = tmp_path_factory.mktemp("older-main")
    archive = subprocess.run(["git", "-C", REPO, "archive", "--format=tar", OLDER_MAIN, "rocmkit"],
                             capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(ctx)], input=archive, check=True)
    where = subprocess.run([DOCKER, "run", "--rm", base, "python3", "-c",
                            "import os, rocmkit; print(os.path.dirname(rocmkit.__file__))"],
                           capture_output=True, text=True, check=True).stdout.strip()
    (ctx / "Dockerfile").write_text(f"FROM {base}\nRUN rm -rf {where}\nCOPY rocmkit {where}\n")
    tag = _build("", str(ctx))
    yield tag
    subprocess.run([DOCKER, "rmi", "-f", tag], capture_output=True)


@pytest.fixture(scope="module")
def older_image():
    base = provisioned("ROCMKIT_TEST_TRL_CPU_IMAGE", ".ci/image-gate.sh builds the trl-cpu image", "TRL_CPU")
    tag = _build(f"FROM {base}\nRUN python3 -c \"import os, rocmkit; "
                 f"os.remove(os.path.join(os.path.dirname(rocmkit.__file__), '{REMOVED}'))\"\n")
    yield tag
    subprocess.run([DOCKER, "rmi", "-f", tag], capture_output=True)


def certify(image: str, out, *, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rocmkit", "certify", "--image", image, "--engine", "trl",
                           "--vllm-mode", "server", "--gpus", "0", "--steps", "12", "--no-probes", "--out", str(out),
                           "--progress", "plain"], capture_output=True, text=True, timeout=1500,
                          env={**os.environ, "CI": "true", **(env or {})})


def test_the_older_main_image_has_the_older_layout(older_main_image):
    r = subprocess.run([DOCKER, "run", "--rm", older_main_image, "python3", "-c",
                        "import rocmkit.host.probes_vram, rocmkit.proc; import rocmkit.runtime"],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "No module named 'rocmkit.runtime'" in r.stderr, r.stderr[-2000:]


def test_certify_and_the_doctor_run_in_the_older_main_image(older_main_image, tmp_path):
    r = certify(older_main_image, tmp_path / "host")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert json.loads((tmp_path / "host" / "certificate.json").read_text())["verdict"] == "pass"
    doc = subprocess.run([sys.executable, "-m", "rocmkit", "doctor", "--image", older_main_image, "--json",
                          "--only", "software,image"], capture_output=True, text=True, timeout=600)
    assert doc.returncode in (0, 1), doc.stdout[-2000:] + doc.stderr[-2000:]
    assert json.loads(doc.stdout)["schema"] == "rocmkit.doctor/v1"


def test_the_image_lacks_the_module(older_image):
    r = subprocess.run([DOCKER, "run", "--rm", older_image, "python3", "-c", "import rocmkit.certify.intarget.trl_run"],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "No module named 'rocmkit.certify.intarget.trl_run'" in r.stderr


def test_certify_runs_the_hosts_rocmkit_in_an_older_image(older_image, tmp_path):
    r = certify(older_image, tmp_path / "host")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    cert = json.loads((tmp_path / "host" / "certificate.json").read_text())
    assert cert["verdict"] == "pass"
    argv = cert["settings"]["command"]
    assert any(a.endswith(":/opt/rocmkit-host/rocmkit:ro") for a in argv) and "rocmkit.certify.intarget.trl_launch" in argv


def test_the_images_own_rocmkit_fails_there(older_image, tmp_path):
    r = certify(older_image, tmp_path / "image", env={"ROCMKIT_IN_TARGET": "image"})
    assert r.returncode == 1, r.stdout[-2000:] + r.stderr[-2000:]
    log = (tmp_path / "image" / "run.log").read_text(errors="replace")
    assert "rocmkit.certify.intarget.trl_run" in log and "No module named" in log
