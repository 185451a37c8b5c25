"""The real pyamdgpuinfo and amdsmi (the `doctor-libs` extra), with Ray 2.60, on a machine without ROCm or
/dev/dri: their failures become recorded facts, their prints never reach stdout, `--json` stays parseable,
and the doctor's verdict on Ray matches what Ray's own code then does.

They live in a venv of their own (.ci/provision/40-doctor-libs.sh, named by ROCMKIT_DOCTOR_LIBS_PYTHON):
beside Ray in the main venv, amdsmi without ROCm would make `ray start` fail for the Slurm tests. Without
that variable the tests use this interpreter when it has the libraries, else skip (CI sets
ROCMKIT_REQUIRE_DOCTOR_LIBS=1: then a missing venv fails)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

NO_ROCM = not Path("/opt/rocm/lib/libamd_smi.so").exists()
NO_DRI = not Path("/dev/dri").is_dir()


def _python() -> str | None:
    named = os.environ.get("ROCMKIT_DOCTOR_LIBS_PYTHON")
    if named:
        return named
    if all(importlib.util.find_spec(n) for n in ("amdsmi", "pyamdgpuinfo")):
        return sys.executable
    return None


@pytest.fixture(scope="module")
def py() -> str:
    found = _python()
    if found is None:
        if os.environ.get("ROCMKIT_REQUIRE_DOCTOR_LIBS") == "1":
            pytest.fail("ROCMKIT_REQUIRE_DOCTOR_LIBS=1 but no venv with amdsmi and pyamdgpuinfo "
                        "(ROCMKIT_DOCTOR_LIBS_PYTHON; .ci/provision/40-doctor-libs.sh makes it)")
        pytest.skip("amdsmi/pyamdgpuinfo not installed (.ci/provision/40-doctor-libs.sh, or "
                    "pip install -e '.[doctor-libs]' in a venv without Ray)")
    return found


def run(py: str, code: str) -> subprocess.CompletedProcess:
    # A real process: C-level writes to fd 1 would show too (an in-process test only swaps sys.stdout).
    return subprocess.run([py, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONWARNINGS": "ignore"})


def test_real_libraries_fail_as_facts_and_print_nothing(py):
    r = run(py, "import json; from rocmkit.host.facts.process import _gpu_libraries; print(json.dumps(_gpu_libraries()))")
    assert r.returncode == 0, r.stderr
    libs = json.loads(r.stdout)  # nothing but the JSON on stdout: amdsmi's import-time prints were caught
    for name in ("amdsmi", "pyamdgpuinfo"):
        assert libs[name]["status"] in ("ok", "error"), libs
    if NO_ROCM:
        # amdsmi 7.0.2 without ROCm: prints a hint, then its wrapper indexes a missing library, at import
        a = libs["amdsmi"]
        assert a["status"] == "error" and a["error"].startswith("KeyError"), libs
        assert a["stage"] == "import" and a["import_error"] is False
        assert "libamd_smi.so" in a["printed"]
    if NO_DRI:
        p = libs["pyamdgpuinfo"]
        assert p["status"] == "error" and p["error"].startswith("FileNotFoundError") and p["stage"] == "use", libs


def test_doctor_json_stays_clean_and_reports_the_libraries(py):
    r = subprocess.run([py, "-m", "rocmkit", "doctor", "--json"], capture_output=True, text=True, timeout=120)
    assert r.returncode in (0, 1), r.stderr
    doc = json.loads(r.stdout)
    found = {f["id"]: f for f in doc["findings"]}
    assert {"software.amdsmi", "software.pyamdgpuinfo"} <= set(found)
    assert not [k for k in found if k.startswith("doctor.internal")]
    gpus = bool(doc["host"]["gpus"])
    for name in ("amdsmi", "pyamdgpuinfo"):
        if found[f"software.{name}"]["evidence"]["library"]["status"] == "error":
            # without GPUs the library's failure is expected (skip); with GPUs it is worth a warning
            assert found[f"software.{name}"]["status"] == ("warn" if gpus else "skip")


def test_ray_verdict_matches_what_ray_does(py):
    """The doctor reads Ray's code (without importing Ray) and says whether Ray can be used; Ray itself, run
    here, must agree: `import ray` builds its global worker, which runs the AMD GPU detection."""
    if run(py, "import importlib.util, sys; sys.exit(importlib.util.find_spec('ray') is None)").returncode:
        pytest.skip("no Ray beside the libraries")
    r = subprocess.run([py, "-m", "rocmkit", "doctor", "--json", "--only", "software.ray_gpus"],
                       capture_output=True, text=True, timeout=120)
    verdict = {f["id"]: f for f in json.loads(r.stdout)["findings"]}.get("software.ray_gpus")
    ray = run(py, "import ray")
    if ray.returncode != 0:
        assert "KeyError" in ray.stderr, ray.stderr[-2000:]
        assert verdict is not None and verdict["status"] == "fail", verdict
        assert "cannot even be imported" in verdict["title"] and "KeyError" in verdict["title"]
    else:
        assert verdict is None or verdict["status"] != "fail", (verdict, ray.stdout)
