"""The pytest-xdist groups (tests/xdistgroups.py): decided from the markers and fixtures a test declares, on
plain data, on a real collection of a small test file written here (pytester, in this process), and on a real
two-worker run with this suite's own conftest (seconds)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import xdistgroups as xg

pytest_plugins = ["pytester"]


@pytest.mark.parametrize(("markers", "fixtures", "module_fixture", "group"), [
    (set(), set(), False, None),
    ({"slow"}, {"tmp_path"}, False, None),
    (set(), set(), True, "module:tests/test_m.py"),
    ({"docker", "slow"}, set(), True, "docker"),  # the shared group wins over the module's
    (set(), {"base_image"}, False, "docker"),
    ({"slurm"}, set(), False, "engines"),
    (set(), {"ray_host"}, False, "engines"),
    ({"engine"}, set(), True, "engines"),
    ({"engine", "docker"}, set(), False, "docker"),  # an engine in a container shares the Docker engine only
])
def test_a_test_is_grouped_by_what_it_declares(markers, fixtures, module_fixture, group):
    assert xg.decide(markers, fixtures, "tests/test_m.py", module_fixture) == group


@pytest.mark.parametrize(("markers", "fixtures"), [({"slurm", "docker"}, set()), ({"docker"}, {"ray_host"})])
def test_a_test_that_needs_docker_and_the_cluster_at_once_stops_the_collection(markers, fixtures):
    with pytest.raises(pytest.UsageError, match="tests/test_m.py: a test uses both the Docker engine and the Slurm"):
        xg.decide(markers, fixtures, "tests/test_m.py", False)


def test_the_shared_groups_go_first_and_free_tests_last():
    ranks = [xg.order(g) for g in ("engines", "docker", "module:tests/test_m.py", None)]
    assert ranks == sorted(ranks) and len(set(ranks)) == 4


def test_the_summary_says_how_busy_the_workers_were_and_each_groups_share():
    durations = {"a": 1200.0, "b": 600.0, "c": 300.0, "d": 60.0, "e": 30.0}
    groups = {"a": "engines", "b": "docker", "c": "docker", "d": "module:tests/test_m.py"}
    line = xg.worker_minutes(durations, groups, workers=2, wall_s=1200.0)
    assert line == ("worker-minutes: 36.5 used of 40.0 (2 workers x 20.0 min, 91 % busy); engines 20.0, docker 15.0, "
                    "module groups 1.0, the rest 0.5")


CONFTEST = '''
import pytest
from xdistgroups import group_items

@pytest.fixture
def ray_host():
    yield

@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    items[:], _ = group_items(items, reorder=True)

def pytest_collection_finish(session):
    for item in session.items:
        names = [m.args[0] for m in item.iter_markers("xdist_group")]
        print("GROUP", item.nodeid.split("::")[-1], names[0] if names else "-")
'''

MODULE = '''
import pytest

pytestmark = pytest.mark.usefixtures()

@pytest.fixture(scope="module")
def tree():
    return 1

@pytest.fixture
def via_another(ray_host):
    return 2

def test_free():
    pass

@pytest.mark.slow
def test_free_and_slow():
    pass

def test_uses_the_tree(tree):
    pass

@pytest.mark.docker
def test_builds():
    pass

def test_starts_ray_through_a_fixture(via_another):
    pass

@pytest.mark.slurm
def test_submits():
    pass
'''


def test_a_real_collection_groups_by_markers_and_fixture_closure_and_orders_the_groups_first(pytester):
    pytester.makeconftest(CONFTEST)
    pytester.makepyfile(test_m=MODULE)
    pytester.makeini("[pytest]\nmarkers =\n    docker: d\n    slurm: s\n    slow: l\n    xdist_group(name): g\n")
    r = pytester.runpytest_inprocess("--co", "-q", "-s", "-p", "no:xdist", "-p", "no:cacheprovider")
    got = [line.split()[1:] for line in r.outlines if line.startswith("GROUP ")]
    # within a rank the slow ones first (here a free test; a module group moves whole, tests/xdistgroups.py)
    assert got == [["test_starts_ray_through_a_fixture", "engines"], ["test_submits", "engines"],
                   ["test_builds", "docker"], ["test_uses_the_tree", "module:test_m.py"],
                   ["test_free_and_slow", "-"], ["test_free", "-"]]


RECORDING = '''
import os
from pathlib import Path

import pytest

OUT = Path(os.environ["XDIST_GROUPS_OUT"])


@pytest.fixture(scope="module")
def tree():
    return 1


def record(name):
    (OUT / name).write_text(os.environ["PYTEST_XDIST_WORKER"])


@pytest.mark.engine
@pytest.mark.parametrize("i", range(4))
def test_engine(i):
    record(f"engines-{i}")


@pytest.mark.parametrize("i", range(4))
def test_tree(i, tree):
    record(f"module-{i}")


@pytest.mark.parametrize("i", range(8))
def test_free(i):
    record(f"free-{i}")
'''


def test_two_workers_run_each_group_on_one_worker(pytester, tmp_path, monkeypatch):
    """What pytest-xdist 3.8 under pytest 9.2 did not do with its own xdist_group marker (its issue 1386)."""
    pytest.importorskip("xdist")
    tests = Path(__file__).resolve().parent
    pytester.makeconftest((tests / "conftest.py").read_text())
    pytester.makepyfile(test_rec=RECORDING)
    pytester.makeini("[pytest]\nmarkers =\n    engine: e\n")
    out = tmp_path / "out"
    out.mkdir()
    monkeypatch.setenv("XDIST_GROUPS_OUT", str(out))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(tests), os.environ.get("PYTHONPATH")) if p))
    record = tmp_path / "durations.json"
    monkeypatch.setenv("ROCMKIT_TEST_DURATIONS", str(record))
    r = pytester.runpytest_subprocess("-n", "2", "--dist", "loadgroup", "-p", "no:cacheprovider", "-q")
    assert r.ret == 0, r.stdout.str()[-3000:]
    ran = {p.name: p.read_text() for p in out.iterdir()}
    assert len(ran) == 16
    for group in ("engines", "module"):
        assert len({w for name, w in ran.items() if name.startswith(group)}) == 1, ran
    # the record .ci/run keeps: every test with its group, read by benchmarks/ci_time.py --tests
    import scriptmodule
    ci_time = scriptmodule.load("benchmarks/ci_time.py")
    kept = ci_time.read_tests(record)
    assert len(kept) == 16 and {t["group"] for t in kept.values()} == {"engines", "module groups", "the rest"}
    assert kept["test_rec.py::test_engine[0]"]["group"] == "engines" and not list(tmp_path.glob("*.tmp"))
    said = ci_time.tests_table([kept, kept])
    assert "| engines | 0.0 min | 0.0 min |" in said and "`test_rec.py::test_free[7]` | the rest |" in said
