"""verl-check's edges a new user met: a Python without verl is a missing environment (exit 3, no traceback in the
words), a negative --timeout is bad usage (exit 2)."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _check(tmp_path, *extra: str) -> subprocess.CompletedProcess:
    script = tmp_path / "run.sh"
    script.write_text("python3 -m verl.trainer.main_ppo data.train_batch_size=8\n")
    return subprocess.run([sys.executable, "-m", "rocmkit", "verl-check", str(script), *extra], capture_output=True,
                          text=True, timeout=300)


def test_a_python_without_verl_is_a_missing_environment(tmp_path):
    bare = tmp_path / "bare"
    import venv

    venv.create(bare, with_pip=False)  # a Python of its own with neither verl nor Hydra
    r = _check(tmp_path, "--verl-python", str(bare / "bin" / "python"))
    if r.returncode == 2 and "bubblewrap" in r.stderr:
        pytest.skip("verl-check's sandbox (bubblewrap) is not installed here")
    assert r.returncode == 3, r.stderr[-2000:]
    assert "has no hydra to read verl's config with" in r.stderr or "verl is not installed" in r.stderr
    assert "Traceback" not in r.stderr and "File \"" not in r.stderr


def test_a_negative_timeout_is_bad_usage(tmp_path):
    r = _check(tmp_path, "--timeout", "-1")
    assert r.returncode == 2 and "--timeout" in r.stderr and "-1 is not in the range" in r.stderr
