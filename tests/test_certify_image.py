"""`rocmkit certify --image` against the real engine: the certificate never lies, nothing the user owns is
lost, and the deadline and signals leave no container behind.

Two images: one built here from a generated stack (rocmkit without torch), and the verl-cpu image that
CI's image gate builds from its stack before the tests (.ci/image-gate.sh, ROCMKIT_TEST_VERL_CPU_IMAGE).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
import stackgen
from provisioned import provisioned

pytestmark = [pytest.mark.docker, pytest.mark.slow]
DOCKER = os.environ.get("ROCMKIT_DOCKER", "docker")


def rocmkit(*args, timeout=900, **kw):
    return subprocess.run([sys.executable, "-m", "rocmkit", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "CI": "true"}, **kw)


def containers(label: str = "io.rocmkit.run") -> list[str]:
    out = subprocess.run([DOCKER, "ps", "-aq", "--filter", f"label={label}"], capture_output=True, text=True)
    return out.stdout.split()


def running(label: str = "io.rocmkit.run", within: float = 60.0) -> list[str]:
    """The running containers with `label`, once there is one (polled every 0.2 s, for at most `within` s). A
    poll, not a fixed sleep: the tests below signal or kill certify once its training container runs, which a
    fixed 5 s wait after "certify: training" only made likely and paid in full every time."""
    end = time.monotonic() + within
    while True:
        out = subprocess.run([DOCKER, "ps", "-q", "--filter", f"label={label}", "--filter", "status=running"],
                             capture_output=True, text=True, check=False).stdout.split()
        if out or time.monotonic() > end:
            return out
        time.sleep(0.2)


@pytest.fixture(scope="module")
def no_torch_image(tmp_path_factory, base_image):
    """A rocmkit-built image with rocmkit and one pure-Python component, and no torch."""
    tmp = tmp_path_factory.mktemp("notorch")
    spec = [stackgen.ComponentSpec("alpha")]
    stackgen.write_component(tmp / "src", spec[0])
    stack = stackgen.write_stack(tmp / "stack.toml", "notorch", base_image, spec)
    tag = f"rocmkit-test/notorch:{uuid.uuid4().hex[:8]}"
    r = rocmkit("build", "--arch", "gfx942", "--stack-file", str(stack), "--network", "none", "--progress", "plain",
                "--tag", tag, *stackgen.source_options(tmp / "src", spec))
    assert r.returncode == 0, r.stderr[-3000:]
    yield tag
    subprocess.run([DOCKER, "rmi", "-f", tag], capture_output=True)


@pytest.fixture(scope="module")
def verl_cpu_image():
    return provisioned("ROCMKIT_TEST_VERL_CPU_IMAGE", ".ci/image-gate.sh builds the verl-cpu image", "VERL_CPU")


def test_an_image_without_torch_is_not_certified_and_names_what_is_missing(tmp_path, no_torch_image):
    out = tmp_path / "run"
    r = rocmkit("certify", "--image", no_torch_image, "--gpus", "0", "--out", str(out), "--json")
    assert r.returncode == 3, r.stderr
    assert "lacks torch" in r.stderr and "hint:" in r.stderr
    cert = json.loads(r.stdout)
    assert cert["verdict"] == "not certified: setup" and cert["exit_code"] == 3
    assert cert["target"]["id"].startswith("sha256:") and cert["target"]["manifest"]["stack"] == "notorch"
    assert json.loads((out / "certificate.json").read_text())["verdict"] == "not certified: setup"
    assert "NOT CERTIFIED: SETUP" in (out / "certificate.md").read_text()
    # a run that never trained still has its picture, saying why
    assert cert["files"]["picture"] == str(out / "certificate.svg") and "](certificate.svg)" in (
        out / "certificate.md").read_text()
    assert "The training did not start" in (out / "certificate.svg").read_text()
    assert not containers()


def test_a_dry_run_checks_inside_the_image_and_writes_nothing(tmp_path, no_torch_image):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "notes.txt").write_text("my notes\n")
    r = rocmkit("certify", "--image", no_torch_image, "--gpus", "0", "--out", str(out), "--dry-run", "--force")
    assert r.returncode == 3 and "lacks torch" in r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"] and (out / "notes.txt").read_text() == "my notes\n"


@pytest.mark.parametrize("name,code,said", [
    ("Rocmkit-Test/UPPER:1", 2, "not an image reference"),
    ("rocmkit-test/no-such-image:1", 2, "not in the Docker engine"),
])
def test_bad_image_names_are_usage_errors(tmp_path, name, code, said):
    r = rocmkit("certify", "--image", name, "--out", str(tmp_path / "o"))
    assert r.returncode == code and said in r.stderr, r.stderr
    assert not (tmp_path / "o").exists()


def test_gpus_asked_where_none_is_visible_stops_before_training(tmp_path, verl_cpu_image):
    out = tmp_path / "run"
    r = rocmkit("certify", "--image", verl_cpu_image, "--engine", "verl", "--out", str(out), "--json")  # --gpus 1
    assert r.returncode == 3, r.stderr[-2000:]
    assert "asked for 1 GPU(s)" in r.stderr and "sees 0" in r.stderr and "--gpus 0" in r.stderr
    cert = json.loads(r.stdout)
    assert cert["verdict"] == "not certified: setup" and cert["run"]["status"] == "not started"
    assert cert["metrics"]["steps"] == 0 and not (out / "run.log").exists()
    assert cert["target"]["manifest"]["stack"] == "verl-cpu" and cert["target"]["id"].startswith("sha256:")
    assert not containers()


def test_the_timeout_holds_and_leaves_no_container(tmp_path, verl_cpu_image):
    started = time.monotonic()
    r = rocmkit("certify", "--image", verl_cpu_image, "--engine", "verl", "--gpus", "0", "--timeout", "20",
                "--out", str(tmp_path / "run"), "--json")
    took = time.monotonic() - started
    assert r.returncode == 124, r.stderr[-2000:]
    assert took < 30, took
    assert "--timeout 20" in r.stderr
    assert json.loads(r.stdout)["verdict"] == "not certified: timeout"
    assert not containers()


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_to_rocmkit_alone_removes_the_container(tmp_path, verl_cpu_image, sig, code):
    out = tmp_path / "run"
    p = subprocess.Popen([sys.executable, "-m", "rocmkit", "certify", "--image", verl_cpu_image, "--engine", "verl",
                          "--gpus", "0", "--out", str(out), "--progress", "plain"],
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    seen = []
    for line in p.stdout:  # wait until the training container runs
        seen.append(line)
        if "certify: training" in line:
            break
    assert running(), "no container was running"
    os.kill(p.pid, sig)  # rocmkit alone: it runs in a session of its own, the container's client in another
    rest, _ = p.communicate(timeout=60)
    assert p.returncode == code, "".join(seen) + rest
    assert f"rocmkit received {sig.name}" in rest
    assert not containers()


def test_a_container_left_by_a_certify_killed_outright_is_removed_by_the_next_and_named(tmp_path, verl_cpu_image):
    """SIGKILL to certify leaves nothing in it to remove its containers: they keep running (on a GPU host, with
    their GPU memory). The next certify of an image removes them and says so in its notes (here a --dry-run, which
    resolves the target the same way)."""
    log = (tmp_path / "killed.log").open("w")
    p = subprocess.Popen([sys.executable, "-m", "rocmkit", "certify", "--image", verl_cpu_image, "--engine", "verl",
                          "--gpus", "0", "--out", str(tmp_path / "run"), "--progress", "plain"],
                         stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    deadline = time.monotonic() + 300
    while "certify: training" not in (tmp_path / "killed.log").read_text() and time.monotonic() < deadline:
        time.sleep(0.2)
    running("io.rocmkit.owner")  # its training container runs (the assertion below says so if it never did)
    left = containers("io.rocmkit.owner")
    assert left, (tmp_path / "killed.log").read_text()[-2000:]
    os.killpg(p.pid, signal.SIGKILL)  # certify and anything in its session; the containers' clients die with it
    p.wait(timeout=30)
    time.sleep(2)
    assert set(left) <= set(containers("io.rocmkit.owner")), "the kill removed the containers: nothing to test"
    r = rocmkit("certify", "--image", verl_cpu_image, "--engine", "verl", "--gpus", "0", "--dry-run",
                "--out", str(tmp_path / "next"), "--json")
    assert r.returncode == 0, r.stderr[-2000:]
    notes = json.loads(r.stdout)["notes"]
    said = [n for n in notes if n.startswith("removed container ")]
    assert len(said) == len(left) and all(f"rocmkit process {p.pid}, which started it, is gone" in n for n in said)
    assert not set(left) & set(containers("io.rocmkit.owner"))


def test_a_folder_holding_a_users_files_is_refused_and_left_byte_identical(tmp_path, no_torch_image):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "train.parquet").write_bytes(b"PAR1 my data")
    (out / "reward.py").write_text("def compute_score(): return 42\n")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    for extra in ([], ["--dry-run"]):
        r = rocmkit("certify", "--image", no_torch_image, "--gpus", "0", "--out", str(out), *extra)
        assert r.returncode == 2 and "not a rocmkit run" in r.stderr, r.stderr
    r = rocmkit("certify", "--image", no_torch_image, "--gpus", "0", "--out", str(out), "--force")
    assert r.returncode == 2 and "reward.py" in r.stderr and "never replaces" in r.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
