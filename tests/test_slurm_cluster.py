"""The rendered sbatch script on a real Slurm cluster (marker `slurm`; CI provisions Debian's slurm-wlm and
munge as two nodes n1, n2 on one host, and Ray from PyPI, with .ci/provision/30-slurm.sh)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rayhost import ray_processes, ray_processes_left

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.usefixtures("ray_host")]

DRIVER = '''
import os, sys, time, ray
ray.init(address=os.environ["RAY_ADDRESS"])
names = sorted(n["NodeName"] for n in ray.nodes() if n["Alive"])
print("driver sees", names)

@ray.remote
def where():
    import time
    time.sleep(0.5)
    return ray.get_runtime_context().get_node_id()

placed = set(ray.get([where.remote() for _ in range(8)]))
print("tasks ran on", len(placed), "node(s)")
if os.environ.get("WAIT_FOR_STALL_REPORT"):  # the job runs past --stall-report-after: its reports, then the end
    from pathlib import Path
    Path("ray-is-up").touch()  # the test's rocmkit waits for it: `--stalled ray` wants the raylets started
    stall = Path(f"rocmkit-test-{os.environ['SLURM_JOB_ID']}/stall")
    deadline = time.monotonic() + 120
    while not all((stall / node / "report.json").exists() for node in sys.argv[1:]):
        if time.monotonic() > deadline:
            sys.exit("driver: no stall report within 120 s")
        time.sleep(0.5)
    print("driver: the stall reports are written, the job runs on")
sys.exit(0 if names == sorted(sys.argv[1:]) else 3)
'''


def submit(tmp_path: Path, join_timeout: int, env_extra: dict | None = None,
           job_args: tuple[str, ...] = ()) -> tuple[int, str, float]:
    driver = tmp_path / "driver.py"
    driver.write_text(DRIVER)
    script = tmp_path / "job.sbatch"
    bindir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", **(env_extra or {})}
    r = subprocess.run([sys.executable, "-m", "rocmkit", "slurm", "--nodes", "2", "--gpus-per-node", "0",
                        "--runtime", "none", "--job-name", "rocmkit-test", "--join-timeout", str(join_timeout),
                        "--entrypoint", f"python3 {driver} n1 n2", *job_args, "-o", str(script)],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    start = time.monotonic()
    r = subprocess.run(["sbatch", "--parsable", "--wait", str(script)], capture_output=True, text=True, env=env,
                       cwd=tmp_path, timeout=join_timeout + 240)
    elapsed = time.monotonic() - start
    job = r.stdout.strip().split(";")[0]
    log = (tmp_path / f"rocmkit-test-{job}.out").read_text()
    return r.returncode, log, elapsed


@pytest.mark.parametrize("token", [False, True], ids=["no-ray-token", "ray-token-in-home"])
def test_two_node_ray_cluster_runs_the_driver_and_leaves_nothing(tmp_path, token):
    # A home with ~/.ray/auth_token, as Ray 2.60 leaves after one ray.init() (verl's own start) on the host.
    home = tmp_path / "home"
    (home / ".ray").mkdir(parents=True)
    if token:
        import secrets

        (home / ".ray" / "auth_token").write_text(secrets.token_hex(32))
    assert not ray_processes(), "Ray is already running on this host"
    # Without a token, the job also takes a stall report 6 s in (--stall-report-after 0.1) and runs on, at no cost
    # of a job of its own. Ray starts in 20-40 s here, so the real rocmkit on the nodes' PATH starts once the
    # driver runs, and the driver ends once both reports are written.
    env_extra = {"HOME": str(home)}
    stall_args = ()
    if not token:
        bindir = tmp_path / "bin"
        bindir.mkdir()
        (bindir / "rocmkit").write_text(f"#!/bin/bash\nuntil [ -e {tmp_path}/ray-is-up ]; do sleep 0.5; done\n"
                                        f'exec {Path(sys.executable).parent}/rocmkit "$@"\n')
        (bindir / "rocmkit").chmod(0o755)
        env_extra.update(WAIT_FOR_STALL_REPORT="1", PATH=f"{bindir}:{Path(sys.executable).parent}:{os.environ['PATH']}")
        stall_args = ("--time", "4", "--stall-report-after", "0.1")
    rc, log, _ = submit(tmp_path, join_timeout=90, job_args=stall_args, env_extra=env_extra)
    assert rc == 0, log
    assert f"Ray token authentication: {'token' if token else 'disabled'}" in log
    assert "all 2 node(s) joined: ['n1', 'n2']" in log
    assert "driver sees ['n1', 'n2']" in log and "tasks ran on 2 node(s)" in log
    assert "driver exited with 0" in log
    if not token:
        stall_report_on_every_node(tmp_path, log)
    # the teardown ends them; on a loaded machine that takes seconds: wait for the state asserted, up to 30 s
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and (ray_processes() or timers_alive()):
        time.sleep(1)
    assert not ray_processes(), ray_processes()
    assert not timers_alive(), "the stall report's timer outlived the job"


def timers_alive() -> list:
    return [c for c in Path("/proc").glob("[0-9]*/cmdline") if b"stall_report" in read_or_nothing(c)]


def stall_report_on_every_node(tmp_path: Path, log: str) -> None:
    """Each node's real `rocmkit doctor --stalled ray`, run by the script's timer, wrote its report and its lines
    (its stall.log), and the job went on to its driver's end."""
    job = log.split("rocmkit-test-", 1)[1].split("/", 1)[0]
    stall = tmp_path / f"rocmkit-test-{job}" / "stall"
    assert f"the job has run 6s: stall report of 2 node(s) into {stall} (the job runs on)" in log, log
    assert "driver: the stall reports are written, the job runs on" in log, log
    stall_log = (stall / "stall.log").read_text()
    for node in ("n1", "n2"):
        doc = json.loads((stall / node / "report.json").read_text())
        assert doc["label"] == "rocmkit doctor --stalled ray", doc
        assert any(p["role"] == "Ray raylet" for p in doc["processes"]), doc["processes"]
        assert (stall / node / "stacks.txt").exists()
        assert f"[{node}] stall report (" in stall_log and f"[{node}] exit " in stall_log, stall_log


def read_or_nothing(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:  # the process ended meanwhile
        return b""


def test_a_worker_that_cannot_join_fails_the_job_within_the_deadline(tmp_path):
    # On node n2 `ray start` fails (as with a broken install there); everything else is real.
    shim = tmp_path / "bin"
    shim.mkdir()
    real_ray = Path(sys.executable).parent / "ray"
    (shim / "ray").write_text(f'#!/bin/bash\nif [ "$SLURMD_NODENAME" = n2 ] && [ "$1" = start ]; then\n'
                              f'  echo "ray start broken on n2" >&2; exit 1\nfi\nexec {real_ray} "$@"\n')
    (shim / "ray").chmod(0o755)
    deadline = 12  # --join-timeout: at least 10 s; it also bounds the head's port, open in about 3 s here
    rc, log, elapsed = submit(tmp_path, join_timeout=deadline,
                              env_extra={"PATH": f"{shim}:{Path(sys.executable).parent}:{os.environ['PATH']}"})
    assert rc != 0, log
    assert f"node(s) ['n2'] did not join the Ray cluster within {deadline}s" in log
    assert "the Ray cluster is incomplete" in log and "driver exited" not in log
    # the job ends by its own deadline (plus Ray/Slurm start-up and teardown), not by a scheduler limit
    assert elapsed < deadline + 120, elapsed
    left = ray_processes_left()
    assert not left, left
