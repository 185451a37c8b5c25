"""Containers a killed rocmkit leaves behind (rocmkit/runtime/container.py: OWNER_LABEL, reap_orphans): every
container rocmkit starts names the rocmkit process that started it; a process killed by SIGKILL cannot remove its
own, and the next `certify --image` removes those whose process is gone, saying so in the certificate's notes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rocmkit.runtime import container

REPO = Path(__file__).resolve().parents[1]


def gone_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    p = subprocess.Popen(["true"])
    p.wait()
    return p.pid


def test_an_owner_is_orphaned_only_when_its_process_is_gone_from_this_host():
    assert container.orphaned(container.owner()) is None  # this process
    pid = gone_pid()
    value = f"{container.owner().split()[0]} {pid} 12345"
    assert container.orphaned(value) == pid
    # the same pid alive again with another start time is another process: the owner is gone
    me = container.owner().split()
    assert container.orphaned(f"{me[0]} {me[1]} {float(me[2]) + 1:.2f}") == int(me[1])
    assert container.orphaned(f"another-boot {pid} 12345") is None  # another host's (a shared engine)
    assert container.orphaned("") is None and container.orphaned("a b") is None


STARTER = """import sys
from rocmkit.runtime import container
container.run_container(sys.argv[1], ["sleep", "300"], what="orphan test", timeout=600, host_code=False, gpus=False)
"""


@pytest.mark.docker
@pytest.mark.slow
def test_a_container_left_by_a_killed_rocmkit_is_removed_and_a_living_ones_is_kept(base_image, tmp_path):
    """A real rocmkit process starts a container through the runner and is killed by SIGKILL: the container
    stays (nothing in the process could remove it; its output goes to a file: a closed pipe would end it first). reap_orphans removes it, names it and its process, and leaves
    alone the container of a rocmkit process that lives (this test's own)."""
    from rocmkit.runtime.docker_engine import Engine

    engine = Engine.connect(timeout=30)
    starter = subprocess.Popen([sys.executable, "-c", STARTER, base_image], cwd=REPO,
                               env={**os.environ, "PYTHONPATH": str(REPO)}, start_new_session=True,
                               stdin=subprocess.DEVNULL, stdout=(tmp_path / "starter.log").open("w"),
                               stderr=subprocess.STDOUT)
    living = engine.client.containers.run(base_image, ["sleep", "300"], detach=True, labels={
        container.RUN_LABEL: "orphan-test-living", container.OWNER_LABEL: container.owner()})
    try:
        deadline = time.monotonic() + 60
        def left():
            return [c for c in engine.labelled(container.OWNER_LABEL)
                    if c["labels"][container.OWNER_LABEL].split()[1] == str(starter.pid)]

        while not [c for c in left() if c["status"] == "running"] and time.monotonic() < deadline:
            time.sleep(0.5)
        assert left(), f"no running container within 60 s: {(tmp_path / 'starter.log').read_text()[-2000:]}"
        os.killpg(starter.pid, signal.SIGKILL)
        starter.wait(timeout=30)
        time.sleep(1)
        assert left() and left()[0]["status"] == "running"  # the kill left it running
        said = container.reap_orphans(engine)
        assert not left()
        assert len(said) == 1 and f"rocmkit process {starter.pid}, which started it, is gone" in said[0]
        assert "(orphan test, running, created " in said[0]
        assert engine.client.containers.get(living.id).status == "running"  # its rocmkit lives: kept
        assert engine.remove(living.id) and not engine.remove(living.id)  # the engine's NotFound: already gone
    finally:
        if starter.poll() is None:
            os.killpg(starter.pid, signal.SIGKILL)
        engine.remove(living.id)
        for c in engine.labelled(container.OWNER_LABEL):
            if c["labels"][container.OWNER_LABEL].split()[1] == str(starter.pid):
                engine.remove(c["id"])
