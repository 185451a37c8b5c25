"""Shared test setup: markers skip with a reason where the real component is absent, and tests that share
something on this machine (the Docker engine, the Slurm cluster, Ray, a training engine's CPU) run in one
pytest-xdist group, one after another, while the rest run in parallel (docs/development.md)."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
import xdistgroups
from provisioned import provisioned
from rayhost import one_cluster_at_a_time

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


def pytest_addoption(parser, pluginmanager):
    if not pluginmanager.has_plugin("xdist"):
        # pyproject's addopts ask for `-n auto --dist loadgroup`: without pytest-xdist (not installed, or
        # `-p no:xdist`) take those options and run one test at a time instead of failing on them.
        group = parser.getgroup("xdist", "without pytest-xdist: the tests run one at a time")
        # _addoption: pytest keeps lowercase short options for itself and plugins; xdist registers -n the same way
        group._addoption("-n", "--numprocesses", dest="numprocesses", default=None, metavar="N",
                        help="ignored: pytest-xdist is not loaded (pip install -e '.[test]')")
        group.addoption("--dist", dest="dist", default="no", help="ignored: pytest-xdist is not loaded")


class _XdistGroups:
    """The controller's side of tests/xdistgroups.py: a folder where the workers write their groups, and the
    scheduler that reads them. A plugin object registered only with xdist loaded (its hooks are xdist's)."""

    def __init__(self, folder: str):
        self.folder = folder
        self.started = time.monotonic()
        self.durations: dict[str, float] = {}  # node id -> seconds (setup, call and teardown)
        self.workers: set[str] = set()

    def pytest_configure_node(self, node):
        node.workerinput["rocmkit_xdistgroups"] = self.folder

    def pytest_runtest_logreport(self, report):
        self.durations[report.nodeid] = self.durations.get(report.nodeid, 0.0) + report.duration
        node = getattr(report, "node", None)
        if node is not None:
            self.workers.add(node.gateway.id)

    def pytest_terminal_summary(self, terminalreporter):
        # CI's log says where pytest's time went by group, beside --durations' slowest tests (.ci/run)
        if self.durations and self.workers:
            groups = xdistgroups.read(self.folder)
            terminalreporter.write_line(xdistgroups.worker_minutes(
                self.durations, groups, len(self.workers), time.monotonic() - self.started))
            record = os.environ.get("ROCMKIT_TEST_DURATIONS")
            if record:  # every test's seconds and group, for comparing runs test by test (benchmarks/ci_time.py)
                xdistgroups.write_durations(Path(record), self.durations, groups)

    def pytest_xdist_make_scheduler(self, config, log):
        if config.getvalue("dist") == "loadgroup":
            return xdistgroups.scheduler(config, log, self.folder)
        return None

    def pytest_unconfigure(self, config):
        shutil.rmtree(self.folder, ignore_errors=True)


def pytest_configure(config):
    if not config.pluginmanager.has_plugin("xdist"):
        config.addinivalue_line("markers", "xdist_group(name): the pytest-xdist group (inert without it)")
    elif config.getoption("dist", "no") != "no" and not hasattr(config, "workerinput"):
        # loadgroup hands out whole groups in the order collected, which group_items sets (the longest
        # shared groups first); xdist's default reorder by test count would start the long groups late.
        config.option.loadscopereorder = False
        config.pluginmanager.register(_XdistGroups(tempfile.mkdtemp(prefix="rocmkit-xdistgroups-")))


def pytest_report_header(config):
    if not config.pluginmanager.has_plugin("xdist"):
        return "pytest-xdist is not loaded: the tests run one at a time (pip install -e '.[test]' runs them in parallel)"
    return None


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the xdist_group markers set here
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
    # Under xdist each worker collects and groups; every worker must reach the same order, and does (pure).
    worker = getattr(config, "workerinput", None)
    items[:], groups = xdistgroups.group_items(items, reorder=worker is not None)
    if worker and "rocmkit_xdistgroups" in worker:
        xdistgroups.write(worker["rocmkit_xdistgroups"], worker["workerid"], groups)


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


@pytest.fixture
def ray_host():
    """The test starts Ray on this host (a Slurm job's `ray start`, verl's own ray.init): Ray's head and agent
    ports are fixed and its daemons are looked for on the whole host, so such tests take turns (a lock file,
    across processes too) and run in the `engines` xdist group (tests/xdistgroups.py)."""
    with one_cluster_at_a_time():
        yield


@pytest.fixture(scope="session")
def base_image() -> str:
    """The local base image .ci/provision/20-docker.sh builds (no registry is reachable for a real one).
    Missing: a failure where CI provisioned the engine, a skip elsewhere."""
    return provisioned("ROCMKIT_TEST_BASE_IMAGE", ".ci/provision/20-docker.sh provides the base image", "DOCKER")


@pytest.fixture
def utc(monkeypatch):
    """Local time is UTC while the test runs (gpu_holders.describe() prints local start times)."""
    import time

    monkeypatch.setenv("TZ", "UTC")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()
