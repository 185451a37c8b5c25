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


def fleet(tmp_path: Path, trees: Path, *args: str, hang: str = "", nodes: str = "n[1-2]", wrap: tuple[str, ...] = (),
          env_extra: dict | None = None) -> tuple[subprocess.CompletedProcess, float]:
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
    env.update(env_extra or {})
    start = time.monotonic()
    r = subprocess.run([*wrap, sys.executable, "-m", "rocmkit", "doctor", "--nodes", nodes, "--out",
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
    assert torch["odd_nodes"] == ["n2"]  # no majority of two, but n2 fails on its own: n1, that passes, decides
    out = tmp_path / "out"
    assert (out / "failing_nodes.txt").read_text() == "n2\n" and (out / "passing_nodes.txt").read_text() == "n1\n"
    assert (out / "exclude.txt").read_text() == "n2\n"
    assert json.loads((out / "fleet.json").read_text())["failing_nodes"] == ["n2"]
    # the line the docs show works as written, through a shell: a job step given it runs on n1 only
    ran = subprocess.run(["bash", "-c", f"srun --nodes=1 --exclude=$(cat {out / 'exclude.txt'}) bash -c "
                          "'echo $SLURMD_NODENAME'"], capture_output=True, text=True, timeout=60)
    assert ran.stdout.strip() == "n1", ran.stderr
    # with --min-nodes 1 the same fleet passes: n2 is dropped, not the job
    r, _ = fleet(tmp_path, trees, "--min-nodes", "1")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "fleet: 1 of 2 node(s) pass; failing: n2" in r.stdout and "sbatch --exclude=n2" in r.stdout


@pytest.mark.parametrize(("hang", "state", "why"), [
    ("sleep", "deadline", "its doctor ran past the deadline and was stopped"),
    ("stop", "no answer", "its task began, and nothing came back within 15 s"),
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


def _preflight_job(tmp_path: Path, trees: Path, name: str, extra_bin: dict[str, str] = ()) -> tuple[int, str, str]:
    """`rocmkit slurm --preflight --min-nodes 1` on both nodes, submitted with sbatch --wait: (sbatch's exit, the
    job's id, its log). A `rocmkit` shim gives each node's doctor its tree (and leaves the fleet's own call, on the
    batch node, as it is); `extra_bin` adds more shims by name."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "rocmkit").write_text(
        "#!/bin/bash\n"
        f'for a in "$@"; do [ "$a" = --fleet ] && exec {sys.executable} -m rocmkit "$@"; done\n'
        f'exec {sys.executable} -m rocmkit "$@" --root "{trees}/$SLURMD_NODENAME"\n')
    for shim, text in dict(extra_bin).items():
        (bindir / shim).write_text(text)
    for shim in bindir.iterdir():
        shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{bindir}:{Path(sys.executable).parent}:{os.environ['PATH']}"}
    script = tmp_path / "job.sbatch"
    r = subprocess.run([sys.executable, "-m", "rocmkit", "slurm", "--nodes", "2", "--gpus-per-node", "0",
                        "--runtime", "none", "--job-name", name, "--join-timeout", "60",
                        "--preflight", "--min-nodes", "1", "--entrypoint", "python3 -c pass", "-o", str(script)],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    r = subprocess.run(["sbatch", "--parsable", "--wait", "--time=4", str(script)], capture_output=True, text=True,
                       env=env, cwd=tmp_path, timeout=300)
    job = r.stdout.strip().split(";")[0]
    return r.returncode, job, (tmp_path / f"{name}-{job}.out").read_text()


@pytest.mark.slow
def test_a_slurm_job_goes_on_without_the_failing_node(tmp_path, trees):
    """`rocmkit slurm --preflight --min-nodes 1`: the job's preflight is the fleet doctor; n2 fails it (its kernel
    log, its torch), the job drops it, starts Ray on n1 alone and runs its driver. The shim gives each node's
    doctor its tree, and leaves the fleet's own call (on the batch node) as it is."""
    from rayhost import ray_processes_left

    code, job, log = _preflight_job(tmp_path, trees, "rocmkit-fleetjob")
    assert code == 0, log
    assert "preflight: going on without n2 (next time: sbatch --exclude=n2)" in log, log
    assert "nodes: n1; head n1" in log and "all 1 node(s) joined" in log and "driver exited with 0" in log, log
    report = json.loads((tmp_path / f"rocmkit-fleetjob-{job}" / "preflight" / "fleet.json").read_text())
    assert report["failing_nodes"] == ["n2"] and report["min_nodes"] == 1
    left = ray_processes_left()
    assert not left, left


@pytest.fixture
def busy_nodes():
    """Both nodes held by another job (an exclusive batch job running `sleep`) while the test runs."""
    r = subprocess.run(["sbatch", "--parsable", "-N2", "--exclusive", "-J", "rocmkit-test-hold", "-o", "/dev/null",
                        "--wrap", "sleep 120"], capture_output=True, text=True, timeout=30)
    job = r.stdout.strip().split(";")[0]
    assert r.returncode == 0 and job, r.stderr
    try:
        for _ in range(60):
            q = subprocess.run(["squeue", "-h", "-j", job, "-t", "R", "-o", "%i"], capture_output=True, text=True,
                               timeout=30)
            if q.stdout.strip():
                break
            time.sleep(0.5)
        else:
            pytest.fail("the holding job did not start")
        yield job
    finally:
        subprocess.run(["scancel", job], capture_output=True, timeout=30)


def assert_refused(r: subprocess.CompletedProcess, code: int, srun_said: str, out: Path) -> None:
    """srun's refusal as rocmkit reports it: srun's words quoted, the exit code of a bad request (2) or a missing
    environment (3), no node blamed, no report, no talk of deadlines or slurmd, no traceback."""
    text = r.stdout + r.stderr
    assert r.returncode == code, text
    assert srun_said in r.stderr and "srun refused the fleet's step" in r.stderr, text
    assert "no node was reached" in r.stderr and "hint:" in r.stderr, text
    for wrong in ("nothing came back", "slurmd", "Traceback", "Argument list too long", "--exclude"):
        assert wrong not in text, text
    assert not out.exists(), list(out.iterdir())  # no report, no exclude.txt: no node failed


@pytest.mark.parametrize(("nodes", "srun_said"), [
    ("n[1-2],n9", "Invalid node name specified"),
    ("n[1-100000]", "Too many hosts in range"),  # compressed in argv: no OSError E2BIG
    (",".join(f"x{i}y" for i in range(12000)), "Invalid --nodefile node file"),  # no range: in a --nodefile
])
def test_srun_refusing_a_bad_request_is_exit_2_quoting_srun(tmp_path, trees, nodes, srun_said):
    r, seconds = fleet(tmp_path, trees, "--node-timeout", "5", nodes=nodes)
    assert_refused(r, 2, srun_said, tmp_path / "out")
    assert seconds < 60


def test_more_nodes_than_the_allocation_is_exit_2_quoting_srun(tmp_path, trees):
    r, _ = fleet(tmp_path, trees, "--node-timeout", "5", wrap=("salloc", "-N1", "-w", "n1"))
    assert_refused(r, 2, "Only allocated 1 nodes asked for 2", tmp_path / "out")


def test_no_allocation_is_exit_3_quoting_srun(tmp_path, trees):
    r, _ = fleet(tmp_path, trees, "--node-timeout", "5", env_extra={"SLURM_JOB_ID": "999999"})
    assert_refused(r, 3, "Invalid job id specified", tmp_path / "out")


def test_busy_nodes_are_exit_3_naming_the_job_that_holds_them(tmp_path, trees, busy_nodes):
    """Both nodes held by another job: Slurm's state says so before srun is asked (no wait in the queue); each node
    is named with the job holding it, the report is written, nothing is excluded (busy is not broken), exit 3."""
    r, seconds = fleet(tmp_path, trees, "--node-timeout", "5")
    assert r.returncode == 3 and seconds < 30, r.stdout + r.stderr
    for node in ("n1", "n2"):
        assert f"{node} is busy: all its CPUs are allocated by job {busy_nodes} (rocmkit-test-hold, " in r.stderr
    assert "fleet FAILS: Slurm lets none of the nodes run a job now" in r.stdout and "Traceback" not in r.stderr
    doc = json.loads((tmp_path / "out" / "fleet.json").read_text())
    assert doc["unavailable_nodes"] == ["n1", "n2"] and doc["exclude"] is None
    assert (tmp_path / "out" / "exclude.txt").read_text() == ""


def test_an_empty_node_list_is_a_usage_error(tmp_path, trees):
    r, _ = fleet(tmp_path, trees, nodes="")
    assert r.returncode == 2 and "--nodes is empty" in r.stderr and "Traceback" not in r.stderr, r.stderr
    assert '"schema": "rocmkit.doctor' not in r.stdout and "rocmkit doctor —" not in r.stdout


def test_min_nodes_above_the_fleet_says_why(tmp_path, trees):
    r, _ = fleet(tmp_path, trees, "--min-nodes", "3")
    assert r.returncode == 2 and "--min-nodes 3: the fleet has only 2 node(s)" in r.stderr, r.stderr


def test_two_runs_in_one_second_get_their_own_folders(tmp_path):
    """The default report folder is made by the run that takes it: the next one, in the same second or the same
    job, gets -2."""
    from rocmkit.fleet.cli import new_out_dir

    first, second = new_out_dir(tmp_path), new_out_dir(tmp_path)
    assert first != second and first.is_dir() and second.is_dir() and second.name == f"{first.name}-2"


@pytest.mark.slow
def test_a_variable_set_on_one_node_only_stops_the_job(tmp_path):
    """`rocmkit slurm --preflight --min-nodes 1` on two nodes, NCCL_SOCKET_IFNAME exported on n2 only: no majority,
    so no node passes and the job stops before Ray, saying which value disagrees and how to make it agree."""
    root = tmp_path / "trees"
    write_tree(root / "n1", node_spec())
    write_tree(root / "n2", node_spec(env={"NCCL_SOCKET_IFNAME": "eth1"}))
    ray_calls = tmp_path / "ray-calls"
    code, job, log = _preflight_job(tmp_path, root, "rocmkit-fleetenv",
                                    {"ray": f'#!/bin/bash\necho "$SLURMD_NODENAME $*" >> {ray_calls}\nexit 1\n'})
    assert code != 0, log
    assert "FAIL  env NCCL_SOCKET_IFNAME differs: (unset) on n1; eth1 on n2 (no majority)" in log, log
    assert "fix: set the variable the same way on every node" in log, log
    assert "fleet: 0 of 2 node(s) pass" in log and "fleet FAILS: no majority" in log, log
    assert "ERROR: the preflight failed (exit 1): fewer than 1 node(s) passed" in log, log
    assert "going on without" not in log, log
    assert not ray_calls.exists(), ray_calls.read_text()  # stopped before Ray
    report = json.loads((tmp_path / f"rocmkit-fleetenv-{job}" / "preflight" / "fleet.json").read_text())
    assert report["passing_nodes"] == [] and report["exclude"] is None and report["exit_code"] == 1
    assert (tmp_path / f"rocmkit-fleetenv-{job}" / "preflight" / "exclude.txt").read_text() == ""
