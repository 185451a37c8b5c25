"""The real pyamdgpuinfo and amdsmi (the `doctor-libs` extra) on a machine without ROCm or /dev/dri: their
failures become recorded facts, their prints never reach stdout, and `--json` stays parseable."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rocmkit.doctor.checks import Context, run_checks
from rocmkit.doctor.facts import _gpu_libraries, collect
from rocmkit.doctor.model import Status


def _installed(name: str) -> bool:
    return importlib.util.find_spec(name) is not None


needs_libs = pytest.mark.skipif(not (_installed("amdsmi") and _installed("pyamdgpuinfo")),
                                reason="pyamdgpuinfo/amdsmi not installed (pip install -e '.[doctor-libs]')")
NO_ROCM = not Path("/opt/rocm/lib/libamd_smi.so").exists()
NO_DRI = not Path("/dev/dri").is_dir()


@needs_libs
def test_real_libraries_fail_as_facts(capfd):
    libs = _gpu_libraries()
    out, err = capfd.readouterr()
    assert out == "" and err == ""  # amdsmi prints on import without ROCm; that must not leak
    for name in ("amdsmi", "pyamdgpuinfo"):
        assert libs[name]["status"] in ("ok", "error"), libs
    if NO_ROCM:
        # amdsmi 7.0.2 without ROCm: prints a hint, then its wrapper indexes a missing library
        assert libs["amdsmi"]["status"] == "error" and libs["amdsmi"]["error"].startswith("KeyError"), libs
        assert "libamd_smi.so" in libs["amdsmi"]["printed"]
    if NO_DRI:
        assert libs["pyamdgpuinfo"]["status"] == "error", libs
        assert libs["pyamdgpuinfo"]["error"].startswith("FileNotFoundError"), libs


@needs_libs
def test_library_failure_is_a_finding_not_a_crash():
    facts = collect("/")
    findings = {f.id: f for f in run_checks(facts, Context())}
    for name in ("amdsmi", "pyamdgpuinfo"):
        info = facts.process["gpu_libraries"][name]
        if info["status"] == "error":
            # without GPUs the library's failure is expected (skip); with GPUs it is worth a warning
            assert findings[f"software.{name}"].status == (Status.WARN if facts.devices else Status.SKIP)
    assert not [k for k in findings if k.startswith("doctor.internal")]


@needs_libs
def test_json_stays_clean_in_a_real_process():
    # A real process, so C-level writes to fd 1 would show too (CliRunner only swaps sys.stdout).
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run([sys.executable, "-m", "rocmkit", "doctor", "--json"], capture_output=True, text=True,
                          timeout=60, env=env)
    assert proc.returncode in (0, 1), proc.stderr
    doc = json.loads(proc.stdout)
    ids = {f["id"] for f in doc["findings"]}
    assert {"software.amdsmi", "software.pyamdgpuinfo"} <= ids
