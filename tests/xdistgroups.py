"""Which tests share something on this machine and so run in one pytest-xdist group (one worker, one test after
another) under `--dist loadgroup`; every other test runs on whichever worker is free.

A test says what it touches with the markers and fixtures it needs anyway, so a new test is grouped by the same
declaration that makes it skip where the thing is missing; there is no list of test names to keep:

- `docker`: the `docker` marker or the `base_image` fixture. One Docker engine: the image tags tests build and
  remove, the registry at localhost:5555, the build cache and the engine's disk, and checks that no container
  labelled io.rocmkit.run is left (any run's, not only the test's own). Engines run in containers here too.
- `engines`: the `slurm` or `engine` marker, or the `ray_host` fixture. The two-node Slurm cluster (two CPUs a
  node; its jobs start Ray on this host), Ray on this host (fixed head and agent ports, ~/.ray, checks that no
  raylet is left on the host), and training engines (verl, TRL, vLLM) on the host's CPU, which take both cores
  and much of the memory and are judged by a stall watchdog's seconds: one at a time.
- `module:<file>`: the other tests of a module with a module- or session-scoped fixture of its own (a generated
  tree, a wheel, a built site), so it is made once, on one worker, not once on each.

Under xdist the groups also come first, longest first (`order`): the scheduler hands out whole groups in the order
collected, and a long group started last would be the run's tail. Within each rank, the tests marked `slow` (and the
module groups holding one) come before the rest, for the same reason: a minute-long test among the free ones must
not be the last thing a worker starts while the other waits.

The groups reach xdist's scheduler through a file, not through xdist's own `xdist_group` marker: pytest-xdist 3.8
marks a group by appending `@group` to the test's node id, which pytest 9.2's structured node ids ignore, so
`--dist loadgroup` silently stopped grouping there (https://github.com/pytest-dev/pytest-xdist/issues/1386). Each
worker writes the groups it collected (`write`); the scheduler (`scheduler`) reads them. The marker is still set,
for xdist versions and reports that read it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

DOCKER = "docker"
ENGINES = "engines"

# marker or fixture name -> group. A fixture counts wherever it is requested: by the test, by another fixture, or
# autouse (pytest's closure of the test's fixtures).
BY_MARKER = {"docker": DOCKER, "slurm": ENGINES, "engine": ENGINES}
BY_FIXTURE = {"base_image": DOCKER, "ray_host": ENGINES}
WIDE_SCOPES = ("module", "package", "session")


def shared(markers: set[str], fixtures: set[str]) -> set[str]:
    """The shared groups a test with these markers and fixtures touches."""
    return {BY_MARKER[m] for m in markers if m in BY_MARKER} | {BY_FIXTURE[f] for f in fixtures if f in BY_FIXTURE}


def decide(markers: set[str], fixtures: set[str], module: str, module_fixture: bool) -> str | None:
    """The xdist group of one test, or None for a test that runs anywhere.

    A training engine in a container (`engine` and `docker`) is the engine's: the container has its own network
    and process namespaces, so only the Docker engine is shared. A test that needs the Slurm cluster or Ray on
    the host and the Docker engine at once fits neither group alone: say so rather than race."""
    groups = shared(markers, fixtures)
    if DOCKER in groups:
        if "slurm" in markers or "ray_host" in fixtures:
            raise pytest.UsageError(f"{module}: a test uses both the Docker engine and the Slurm cluster or Ray on "
                                    "this host; tests/xdistgroups.py has no group that holds both (split the test, "
                                    "or give both one group there)")
        return DOCKER
    if ENGINES in groups:
        return ENGINES
    return f"module:{module}" if module_fixture else None


def order(group: str | None) -> int:
    """Where a test goes in the collection under xdist: the long shared groups first, then module groups, then
    the tests that run anywhere (they fill the workers at the end)."""
    return {ENGINES: 0, DOCKER: 1}.get(group, 2 if group else 3)


def _has_module_fixture(item) -> bool:
    """Whether the test uses a module- or session-scoped fixture defined in its own module (not conftest's)."""
    module = item.nodeid.split("::", 1)[0]
    info = getattr(item, "_fixtureinfo", None)
    for name in getattr(item, "fixturenames", ()):
        defs = info.name2fixturedefs.get(name) if info else None
        if defs and defs[-1].scope in WIDE_SCOPES and defs[-1].baseid == module:
            return True
    return False


def group_items(items: list, reorder: bool) -> tuple[list, dict[str, str]]:
    """Mark each item with its xdist_group; the items (with `reorder`, sorted by `order`, then the `slow` ones and
    the groups holding one first; stable) and the group of each grouped test by node id."""
    ranked, groups, slow = [], {}, set()
    for item in items:
        markers = {m.name for m in item.iter_markers()}
        fixtures = set(getattr(item, "fixturenames", ()))
        group = decide(markers, fixtures, item.nodeid.split("::", 1)[0], _has_module_fixture(item))
        if group:
            item.add_marker(pytest.mark.xdist_group(group))
            groups[item.nodeid] = group
        if "slow" in markers:
            slow.add(group or item.nodeid)  # a group moves whole: its tests stay one unit in the scheduler's queue
        ranked.append((order(group), group or item.nodeid, item))
    if reorder:
        items = [item for *_, item in sorted(ranked, key=lambda t: (t[0], t[1] not in slow))]
    return items, groups


def write(folder: str, worker: str, groups: dict[str, str]) -> None:
    """A worker's groups, for the scheduler (atomically: the scheduler reads once every worker has collected)."""
    path = Path(folder) / f"{worker}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(groups))
    os.replace(tmp, path)


def read(folder: str) -> dict[str, str]:
    """The groups a worker wrote (every worker collects the same tests; xdist checks that before scheduling)."""
    for path in sorted(Path(folder).glob("*.json")):
        return json.loads(path.read_text())
    return {}


def worker_minutes(durations: dict[str, float], groups: dict[str, str], workers: int, wall_s: float) -> str:
    """Where pytest's time went under xdist, for the end of the run: the worker-minutes its tests took, beside what
    the workers had (workers x wall), and each shared group's share. A group runs on one worker, one test after
    another, so no run is shorter than its longest group; when the workers were busy throughout, only fewer
    worker-minutes make it shorter."""
    by: dict[str, float] = {}
    for nodeid, seconds in durations.items():
        kind = _kind(groups.get(nodeid))
        by[kind] = by.get(kind, 0.0) + seconds
    used, had = sum(by.values()) / 60, workers * wall_s / 60
    shares = ", ".join(f"{kind} {seconds / 60:.1f}" for kind, seconds in
                       sorted(by.items(), key=lambda pair: -pair[1]))
    return (f"worker-minutes: {used:.1f} used of {had:.1f} ({workers} workers x {wall_s / 60:.1f} min, "
            f"{100 * used / had if had else 0:.0f} % busy); {shares}")


def write_durations(path: Path, durations: dict[str, float], groups: dict[str, str]) -> None:
    """Every test's seconds (setup, call and teardown) and its group, sorted by node id, written whole or not at
    all (a temporary file renamed): `python benchmarks/ci_time.py --tests A.json B.json` puts two runs side by
    side test by test, where --durations' 25 slowest of each say nothing about the rest."""
    tests = {nodeid: {"s": round(seconds, 2), "group": _kind(groups.get(nodeid))}
             for nodeid, seconds in sorted(durations.items())}
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"tests": tests}, indent=1) + "\n")
    tmp.replace(path)


def _kind(group: str | None) -> str:
    return group if group in (ENGINES, DOCKER) else "module groups" if group else "the rest"


def scheduler(config, log, folder: str):
    """xdist's loadgroup scheduler, its groups read from the workers' files: a test's scope is its group, and a
    test in none is a scope of its own, as in loadgroup."""
    from xdist.scheduler import LoadGroupScheduling

    class FileGroupScheduling(LoadGroupScheduling):
        _groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self._groups is None:  # first asked once every worker's collection is in (schedule())
                self._groups = read(folder)
            # xdist itself may have appended "@group" (pytest before 9.2): the file knows the id without it
            plain = nodeid if nodeid in self._groups else nodeid.rsplit("@", 1)[0]
            return self._groups.get(plain) or super()._split_scope(nodeid)

    return FileGroupScheduling(config, log)
