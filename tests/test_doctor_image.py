"""`rocmkit doctor --image`: the doctor runs inside a rocmkit-built image through the real engine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

import pytest
import stackgen

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def rocmkit(*args, timeout=900):
    return subprocess.run([sys.executable, "-m", "rocmkit", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "CI": "true"})


def test_doctor_runs_inside_a_built_image(tmp_path, base_image):
    base = base_image
    spec = stackgen.default_specs(functions=20, units=1)[:1]
    for s in spec:
        stackgen.write_component(tmp_path / "src", s)
    stack = stackgen.write_stack(tmp_path / "stack.toml", "doctorimg", base, spec)
    tag = f"rocmkit-test/doctor:{uuid.uuid4().hex[:8]}"
    r = rocmkit("build", "--arch", "gfx942", "--stack-file", str(stack), "--network", "none", "--progress", "plain",
                "--tag", tag, *stackgen.source_options(tmp_path / "src", spec))
    assert r.returncode == 0, r.stderr[-3000:]
    try:
        r = rocmkit("doctor", "--image", tag, "--json")
        doc = json.loads(r.stdout)
        assert doc["schema"] == "rocmkit.doctor/v1" and doc["image"] == tag
        ids = {f["id"]: f for f in doc["findings"]}
        # this CI machine has no AMD GPU: the doctor inside says so instead of crashing
        assert ids["gpu.kfd"]["status"] == "fail" and ids["container.detect"]["status"] == "pass"
        assert r.returncode == 1
        r = rocmkit("doctor", "--image", "rocmkit-test/no-such-image:1")
        assert r.returncode == 2 and "not in the Docker engine" in r.stderr
    finally:
        subprocess.run([os.environ.get("ROCMKIT_DOCKER", "docker"), "rmi", "-f", tag], capture_output=True)


def test_doctor_image_without_engine_exits_3(monkeypatch):
    env = {**os.environ, "DOCKER_HOST": "unix:///nonexistent/docker.sock"}
    r = subprocess.run([sys.executable, "-m", "rocmkit", "doctor", "--image", "x"], capture_output=True, text=True,
                       env=env, timeout=60)
    assert r.returncode == 3 and "no Docker engine" in r.stderr
