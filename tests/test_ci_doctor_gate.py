"""CI's image gate (.ci/doctor_gate.py) on real `rocmkit doctor --image --json` reports: the two in
tests/data/doctor were written by the doctor on the CI gate image rocmkit-ci/verl-cpu:gate before and after
duplicate distributions were judged by their owners; the live test asks the doctor about the image CI built."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import scriptmodule
from provisioned import provisioned

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "doctor"
GATE = REPO / ".ci" / "doctor_gate.py"


def _gate():
    return scriptmodule.load(".ci/doctor_gate.py")


def _run(report: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(GATE), str(report)], capture_output=True, text=True, timeout=60)


def test_build_caused_warnings_fail_the_gate_and_host_ones_do_not():
    before = json.loads((DATA / "verl-cpu-gate-before.json").read_text())
    bad = _gate().build_caused(before)
    assert len(bad) == 14 and all(f["id"].startswith("image.duplicate_dists.") for f in bad)
    # the container's memlock limit is a warning in both reports, and never the build's
    assert any(f["id"] == "container.memlock" and f["status"] == "warn" for f in before["findings"])
    out = _run(DATA / "verl-cpu-gate-before.json")
    assert out.returncode == 1 and "14 finding(s) caused by the image's build" in out.stderr
    assert "warn image.duplicate_dists.certifi" in out.stderr

    after = DATA / "verl-cpu-gate-after.json"
    assert _gate().build_caused(json.loads(after.read_text())) == []
    out = _run(after)
    assert out.returncode == 0 and "no warning or failure caused by the image's build" in out.stdout


def test_not_a_report_is_a_clear_error(tmp_path):
    bad = tmp_path / "report.json"
    bad.write_text("{not json")
    out = _run(bad)
    assert out.returncode == 2 and str(bad) in out.stderr and "Traceback" not in out.stderr
    bad.write_text('{"schema": 1}')
    out = _run(bad)
    assert out.returncode == 2 and "no 'findings' list" in out.stderr


@pytest.mark.slow
@pytest.mark.docker
def test_the_gate_image_passes_its_own_doctor(tmp_path):
    image = provisioned("ROCMKIT_TEST_VERL_CPU_IMAGE", ".ci/image-gate.sh builds the verl-cpu image", "VERL_CPU")
    report = tmp_path / "doctor.json"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with report.open("w") as fh:
        rc = subprocess.run([sys.executable, "-m", "rocmkit", "doctor", "--image", image, "--json"], stdout=fh,
                            env=env, timeout=600).returncode
    assert rc == 0
    out = _run(report)
    assert out.returncode == 0, out.stderr
