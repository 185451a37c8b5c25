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
collected, and a long group started last would be the run's tail."""

from __future__ import annotations

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


def group_items(items: list, reorder: bool) -> list:
    """Mark each item with its xdist_group; with `reorder`, the items sorted by `order` (stable)."""
    ranked = []
    for item in items:
        markers = {m.name for m in item.iter_markers()}
        fixtures = set(getattr(item, "fixturenames", ()))
        group = decide(markers, fixtures, item.nodeid.split("::", 1)[0], _has_module_fixture(item))
        if group:
            item.add_marker(pytest.mark.xdist_group(group))
        ranked.append((order(group), item))
    if not reorder:
        return items
    return [item for _, item in sorted(ranked, key=lambda pair: pair[0])]
