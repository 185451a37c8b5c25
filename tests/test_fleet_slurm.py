"""`rocmkit doctor --fleet` on the real two-node Slurm CI provisions (marker `slurm`; nodes n1 and n2, two slurmd
on this host, .ci/provision/30-slurm.sh).

Both slurmd nodes share this host, so each node's doctor reads its own captured tree (tests/treegen.py, through
tests/fleetgen.py): a `rocmkit` on PATH adds `--root <trees>/$SLURMD_NODENAME` to the command srun runs there,
and can make n2 hang. Everything else is the product's: one srun step over both nodes, each node's deadline,
the frames coming back on srun's stdout, the real doctor on each node, the comparison, the files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fleetgen import node_spec

from treegen import write_tree

pytestmark = [pytest.mark.slurm, pytest.mark.usefixtures("ray_host")]


@pytest.fixture(scope="module")
def trees(tmp_path_factory) -> Path:
    """n1 healthy; n2 with another torch and a failed GPU reset in its kernel log."""
    root = tmp_path_factory.mktemp("fleet-trees")
    write_tree(root / "n1", node_spec())
    write_tree(root / "n2", node_spec(torch="2.8.0+rocm6.4", fault=True))
    return root


def fleet(tmp_path: Path, trees: Path, *args: str, hang: str = "") -> tuple[subprocess.CompletedProcess, float]:
    """`rocmkit doctor --nodes n[1-2] ARGS` with the node shim; hang "sleep": n2's doctor sleeps past its
    deadline; "stop": n2's task is stopped whole (SIGSTOP to the `timeout` that guards it), so nothing comes back."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    shim = bindir / "rocmkit"
    shim.write_text("#!/bin/bash\n"
                    'if [ "$SLURMD_NODENAME" = n2 ] && [ "$FLEET_TEST_HANG" = stop ]; then kill -STOP "$PPID"; fi\n'
                    'if [ "$SLURMD_NODENAME" = n2 ] && [ "$FLEET_TEST_HANG" = sleep ]; then exec sleep 300; fi\n'
                    f'exec {sys.executable} -m rocmkit "$@" --root "{trees}/$SLURMD_NODENAME"\n')
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "FLEET_TEST_HANG": hang}
    for var in ("SLURM_JOB_ID", "SLURM_JOB_NODELIST"):
        env.pop(var, None)
    start = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "rocmkit", "doctor", "--nodes", "n[1-2]", "--out",
                        str(tmp_path / "out"), *args], capture_output=True, text=True, env=env, cwd=tmp_path,
                       timeout=120)
    return r, time.monotonic() - start


def test_both_nodes_report_and_the_failing_one_is_excluded(tmp_path, trees):
    r, _ = fleet(tmp_path, trees, "--json")
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert [(n["node"], n["state"], n["verdict"]) for n in doc["nodes"]] == [("n1", "answered", "pass"),
                                                                            ("n2", "answered", "fail")]
    fails = {(f["id"], " ".join(f["nodes"])) for f in doc["findings"] if f["status"] == "fail"}
    assert ("kernel.log.gpu_reset_failed", "n2") in fails  # n2's own doctor, on n2
    torch = next(d for d in doc["differences"] if d["id"] == "fleet.differs.packages.torch")
    assert torch["values"] == [{"value": "2.8.0+rocm6.4", "nodes": ["n2"]},
                               {"value": "2.9.1+rocm7.0.2", "nodes": ["n1"]}]
    assert torch["odd_nodes"] == []  # two nodes that disagree: no majority, and the fleet fails
    out = tmp_path / "out"
    assert (out / "failing_nodes.txt").read_text() == "n2\n" and (out / "passing_nodes.txt").read_text() == "n1\n"
    assert (out / "exclude.txt").read_text() == "--exclude=n2\n"
    assert json.loads((out / "fleet.json").read_text())["failing_nodes"] == ["n2"]
    # the line works as written: a job step given it runs on n1 only
    ran = subprocess.run(["srun", "--nodes=1", (out / "exclude.txt").read_text().strip(), "bash", "-c",
                          "echo $SLURMD_NODENAME"], capture_output=True, text=True, timeout=60)
    assert ran.stdout.strip() == "n1", ran.stderr
    # with --min-nodes 1 the same fleet passes: n2 is dropped, not the job
    r, _ = fleet(tmp_path, trees, "--min-nodes", "1")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "fleet: 1 of 2 node(s) pass; failing: n2" in r.stdout and "sbatch --exclude=n2" in r.stdout


@pytest.mark.parametrize(("hang", "state", "why"), [
    ("sleep", "deadline", "its doctor ran past the deadline and was stopped"),
    ("stop", "no answer", "nothing came back within 15 s"),
])
def test_a_hung_node_is_named_at_its_deadline(tmp_path, trees, hang, state, why):
    """A doctor that sleeps is stopped on the node at its deadline (5 s); a task that hangs whole is given up
    by this side at the deadline plus srun's grace (10 s). n1 reports either way (the run is bounded by the
    subprocess's own timeout, far above both), and no step is left behind."""
    r, _ = fleet(tmp_path, trees, "--node-timeout", "5", "--json", hang=hang)
    doc = json.loads(r.stdout)
    assert r.returncode == 124, r.stderr  # only a node that did not answer in time: the deadline's exit code
    nodes = {n["node"]: n for n in doc["nodes"]}
    assert (nodes["n1"]["state"], nodes["n2"]["state"]) == ("answered", state), r.stderr
    assert nodes["n2"]["error"] == why
    if hang == "sleep":
        assert nodes["n2"]["exit_code"] == 124  # coreutils' timeout stopped it, on the node
    assert doc["failing_nodes"] == ["n2"] and doc["exclude"] == "--exclude=n2"
    time.sleep(1)
    left = subprocess.run(["squeue", "-h", "-n", "rocmkit-fleet"], capture_output=True, text=True, timeout=30)
    assert left.stdout.strip() == "", left.stdout


@pytest.mark.slow
def test_a_slurm_job_goes_on_without_the_failing_node(tmp_path, trees):
    """`rocmkit slurm --preflight --min-nodes 1`: the job's preflight is the fleet doctor; n2 fails it (its kernel
    log, its torch), the job drops it, starts Ray on n1 alone and runs its driver. The shim gives each node's
    doctor its tree, and leaves the fleet's own call (on the batch node) as it is."""
    from rayhost import ray_processes

    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "rocmkit").write_text(
        "#!/bin/bash\n"
        f'for a in "$@"; do [ "$a" = --fleet ] && exec {sys.executable} -m rocmkit "$@"; done\n'
        f'exec {sys.executable} -m rocmkit "$@" --root "{trees}/$SLURMD_NODENAME"\n')
    (bindir / "rocmkit").chmod(0o755)
    env = {**os.environ, "PATH": f"{bindir}:{Path(sys.executable).parent}:{os.environ['PATH']}"}
    script = tmp_path / "job.sbatch"
    r = subprocess.run([sys.executable, "-m", "rocmkit", "slurm", "--nodes", "2", "--gpus-per-node", "0",
                        "--runtime", "none", "--job-name", "rocmkit-fleetjob", "--join-timeout", "60",
                        "--preflight", "--min-nodes", "1", "--entrypoint", "python3 -c pass", "-o", str(script)],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    r = subprocess.run(["sbatch", "--parsable", "--wait", "--time=4", str(script)], capture_output=True, text=True,
                       env=env, cwd=tmp_path, timeout=300)
    job = r.stdout.strip().split(";")[0]
    log = (tmp_path / f"rocmkit-fleetjob-{job}.out").read_text()
    assert r.returncode == 0, log
    assert "preflight: going on without n2 (next time: sbatch --exclude=n2)" in log, log
    assert "nodes: n1; head n1" in log and "all 1 node(s) joined" in log and "driver exited with 0" in log, log
    report = json.loads((tmp_path / f"rocmkit-fleetjob-{job}" / "preflight" / "fleet.json").read_text())
    assert report["failing_nodes"] == ["n2"] and report["min_nodes"] == 1
    time.sleep(2)
    assert not ray_processes(), ray_processes()
