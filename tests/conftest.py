"""Shared test setup: markers skip with a reason where the real component is absent."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from provisioned import provisioned

REPO = Path(__file__).resolve().parent.parent
SHARED_FIXTURES = REPO.parent / "shared" / "fixtures"


def _docker_ready() -> str | None:
    if not shutil.which("docker"):
        return "no docker client on PATH"
    try:
        import docker

        docker.from_env(timeout=5).ping()
    except Exception as exc:  # any failure to reach the engine means: skip
        return f"no Docker engine reachable ({type(exc).__name__})"
    return None


def _slurm_ready() -> str | None:
    for tool in ("sbatch", "squeue", "scontrol"):
        if not shutil.which(tool):
            return f"no {tool} on PATH (Slurm not installed)"
    try:
        subprocess.run(["scontrol", "ping"], check=True, capture_output=True, timeout=10)
    except Exception as exc:
        return f"Slurm controller not answering ({type(exc).__name__})"
    return None


def _gpu_ready() -> str | None:
    try:
        import torch
    except ImportError:
        return "torch not installed"
    return None if torch.cuda.is_available() else "no GPU visible to torch.cuda"


def _chromium_ready() -> str | None:
    return None if shutil.which("chromium") else "no chromium on PATH (Debian's chromium package)"


_CHECKS = {"docker": _docker_ready, "slurm": _slurm_ready, "gpu": _gpu_ready, "chromium": _chromium_ready}


def pytest_collection_modifyitems(config, items):
    cache: dict[str, str | None] = {}
    for item in items:
        for marker, check in _CHECKS.items():
            if item.get_closest_marker(marker) is not None:
                if marker not in cache:
                    cache[marker] = check()
                if cache[marker]:
                    if os.environ.get(f"ROCMKIT_REQUIRE_{marker.upper()}") == "1":
                        # CI provisions the real component: its absence there is a failure, not a skip.
                        raise pytest.UsageError(f"ROCMKIT_REQUIRE_{marker.upper()}=1 but {cache[marker]}")
                    item.add_marker(pytest.mark.skip(reason=cache[marker]))


@pytest.fixture
def find_tool():
    """Path of a command-line tool installed with the test extras (hadolint, shellcheck, ...): on PATH,
    or beside the Python running the tests (a venv's bin/ that is not on PATH)."""
    import sys

    def find(name: str) -> str:
        found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
        if not found:
            pytest.fail(f"{name} not found: install the test extras (pip install -e '.[test]')")
        return found

    return find


@pytest.fixture(scope="session")
def base_image() -> str:
    """The local base image .ci/provision/20-docker.sh builds (no registry is reachable for a real one).
    Missing: a failure where CI provisioned the engine, a skip elsewhere."""
    return provisioned("ROCMKIT_TEST_BASE_IMAGE", ".ci/provision/20-docker.sh provides the base image", "DOCKER")
