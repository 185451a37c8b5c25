"""Issue 71 on the real two-node Slurm CI provisions (marker `slurm`; n1 and n2, two slurmd on this host): Slurm's
word about a node (drained, down, reserved, busy) read and named while the other node is still checked; n2
running another rocmkit, an older one or another build; n2's output untrusted (a banner around its document, a
malformed document, a crash by a signal); a host list in full-width digits.

As in test_fleet_slurm.py, a `rocmkit` shim on PATH gives each node's doctor its own generated tree; here it also
makes n2 misbehave as FLEET_TEST_N2 says. Everything else is the product's: scontrol and srun, the frames on
srun's stdout, the comparison and the files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fleetgen import node_spec

from treegen import write_tree

pytestmark = [pytest.mark.slurm, pytest.mark.usefixtures("ray_host")]
REPO = Path(__file__).resolve().parent.parent
# What n2 does instead of the plain doctor. $R is the doctor's command line for n2's tree.
N2 = {
    "older": 'eval "$R" | "$PY" -c "$OLDER"; exit ${PIPESTATUS[0]}',  # the document of a rocmkit before the fleet
    "build": 'export PYTHONPATH="$OTHER"; eval "$R"; exit $?',  # a copy of rocmkit with one file changed
    "commit": 'export PYTHONPATH="$OLD"; eval "$R"; exit $?',  # rocmkit as it was at an earlier commit
    "banner": 'echo "Welcome to n2 (a login script)"; eval "$R"; rc=$?; echo "module: rocm/7.0 loaded"; exit $rc',
    "oops": 'eval "$R" | "$PY" -c "$MANGLE" oops; exit ${PIPESTATUS[0]}',
    "nostatus": 'eval "$R" | "$PY" -c "$MANGLE" nostatus; exit ${PIPESTATUS[0]}',
    "segv": 'exec "$PY" -c "import ctypes; ctypes.string_at(0)"',  # a real SIGSEGV
}
OLDER = ("import json, sys; d = json.load(sys.stdin); d.pop('rocmkit', None); "
         "d['fingerprint'] = {k: d['fingerprint'][k] for k in ('kernel', 'amdgpu', 'rocm', 'gpus')}; "
         "print(json.dumps(d))")
MANGLE = ("import json, sys; d = json.load(sys.stdin)\n"
          "if sys.argv[1] == 'oops': d['findings'] = 'oops'\n"
          "else: d['findings'][0].pop('status')\n"
          "print(json.dumps(d))")


@pytest.fixture(scope="module")
def trees(tmp_path_factory) -> Path:
    """Both nodes healthy; n2's environment sets NCCL_SOCKET_IFNAME (the issue's case: an older rocmkit there
    reports no environment, so the difference went unseen)."""
    root = tmp_path_factory.mktemp("fleet-trees")
    write_tree(root / "n1", node_spec())
    write_tree(root / "n2", node_spec(env={"NCCL_SOCKET_IFNAME": "eth1"}))
    write_tree(root / "same", node_spec())
    return root


def fleet(tmp_path: Path, trees: Path, *args: str, n2: str = "", n2_tree: str = "n2", nodes: str = "n[1-2]",
          timeout: int = 150) -> tuple[subprocess.CompletedProcess, float]:
    """`rocmkit doctor --nodes n[1-2] --out OUT ARGS`, outside any allocation, with the node shim."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    shim = bindir / "rocmkit"
    cases = "".join(f"    {k}) {v} ;;\n" for k, v in N2.items())
    shim.write_text("#!/bin/bash\n"
                    f'PY={sys.executable}\n'
                    'tree="$SLURMD_NODENAME"; [ "$SLURMD_NODENAME" = n2 ] && tree="$FLEET_TEST_N2_TREE"\n'
                    f'R="$PY -m rocmkit $(printf "%q " "$@") --root {trees}/$tree"\n'
                    'if [ "$SLURMD_NODENAME" = n2 ]; then\n  case "$FLEET_TEST_N2" in\n' + cases + "  esac\nfi\n"
                    'eval "$R"\n')
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{bindir}:{os.environ['PATH']}", "FLEET_TEST_N2": n2, "FLEET_TEST_N2_TREE": n2_tree,
           "OLDER": OLDER, "MANGLE": MANGLE, "OTHER": str(tmp_path / "other"), "OLD": str(tmp_path / "old")}
    for var in ("SLURM_JOB_ID", "SLURM_JOB_NODELIST"):
        env.pop(var, None)
    start = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "rocmkit", "doctor", "--nodes", nodes, "--out", str(tmp_path / "out"),
                        "--node-timeout", "60", *args], capture_output=True, text=True, env=env, cwd=tmp_path,
                       timeout=timeout)
    assert "Traceback" not in r.stdout + r.stderr, r.stderr
    return r, time.monotonic() - start


def scontrol(*args: str) -> None:
    r = subprocess.run(["scontrol", *args], capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr


def wait_idle(node: str) -> None:
    for _ in range(60):
        r = subprocess.run(["sinfo", "-h", "-N", "-n", node, "-o", "%T"], capture_output=True, text=True, timeout=30)
        if r.stdout.strip() == "idle":
            return
        time.sleep(0.5)


@pytest.fixture
def slurm_says():
    """Sets nodes' Slurm states for a test (scontrol update … state=drain|down reason=…), resumed in the end."""
    touched = []

    def put(node: str, state: str, reason: str) -> None:
        touched.append(node)
        scontrol("update", f"nodename={node}", f"state={state}", f"reason={reason}")

    try:
        yield put
    finally:
        for node in touched:
            subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"], capture_output=True, timeout=30)
        for node in touched:
            wait_idle(node)


def nodes_of(doc: dict) -> dict:
    return {n["node"]: n for n in doc["nodes"]}


@pytest.mark.parametrize(("state", "kind"), [("drain", "drained"), ("down", "down")])
def test_a_drained_or_down_node_is_named_and_the_other_still_checked(tmp_path, trees, slurm_says, state, kind):
    """Before: srun waited 30 s, "Requested nodes are busy", exit 3, no report. Now n2 is named with Slurm's state
    and reason and not asked; n1 is checked; the report is written; exit 1 (a node fails), 0 with --min-nodes 1."""
    slurm_says("n2", state, "t7")
    r, seconds = fleet(tmp_path, trees, "--json", n2_tree="same")
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    n = nodes_of(doc)
    assert (n["n1"]["state"], n["n1"]["verdict"]) == ("answered", "pass")
    assert (n["n2"]["state"], n["n2"]["slurm"]) == ("unavailable", kind)
    assert n["n2"]["error"].startswith(f"n2 is {kind} in Slurm (Slurm's reason: t7, set by ") and seconds < 25, n
    f = next(f for f in doc["findings"] if f["nodes"] == ["n2"])
    assert f["id"] == f"fleet.slurm.{kind}" and f["status"] == "fail"
    out = tmp_path / "out"
    assert json.loads((out / "fleet.json").read_text())["failing_nodes"] == ["n2"]
    assert (out / "exclude.txt").read_text() == "n2\n" and (out / "passing_nodes.txt").read_text() == "n1\n"
    assert f"n2 is {kind} in Slurm" in r.stderr  # said while it runs, too
    r, _ = fleet(tmp_path, trees, "--min-nodes", "1", n2_tree="same")
    assert r.returncode == 0, r.stdout + r.stderr
    assert f"n2    {kind}" in r.stdout and "fleet: 1 of 2 node(s) pass; failing: n2" in r.stdout, r.stdout


def test_no_node_slurm_lets_run_is_exit_3_with_the_report(tmp_path, trees, slurm_says):
    slurm_says("n1", "drain", "t7a")
    slurm_says("n2", "down", "t7b")
    r, seconds = fleet(tmp_path, trees)
    assert r.returncode == 3 and seconds < 25, r.stdout + r.stderr
    assert "fleet FAILS: Slurm lets none of the nodes run a job now" in r.stdout, r.stdout
    doc = json.loads((tmp_path / "out" / "fleet.json").read_text())
    assert doc["unavailable_nodes"] == ["n1", "n2"] and doc["exit_code"] == 3
    assert {f["id"] for f in doc["findings"]} == {"fleet.slurm.drained", "fleet.slurm.down"}


def test_a_reserved_node_is_named_and_not_excluded(tmp_path, trees):
    name = f"rocmkit-t71-{os.getpid()}"
    scontrol("create", "reservation", f"reservationname={name}", "users=root", "nodes=n2", "starttime=now",
             "duration=10", "flags=ignore_jobs")
    try:
        r, _ = fleet(tmp_path, trees, "--json", n2_tree="same")
    finally:
        subprocess.run(["scontrol", "delete", f"reservationname={name}"], capture_output=True, timeout=30)
    doc = json.loads(r.stdout)
    n2 = nodes_of(doc)["n2"]
    assert (n2["state"], n2["slurm"]) == ("unavailable", "reserved") and "--reservation=NAME" in n2["error"]
    assert doc["failing_nodes"] == ["n2"] and doc["exclude"] is None and r.returncode == 1  # taken, not broken


@pytest.mark.parametrize("tree", ["n2", "same"])
def test_an_older_rocmkit_on_n2_fails_the_fleet_naming_what_it_did_not_report(tmp_path, trees, tree):
    """Before: n2's older document had no environment (and no torch), so `differences: []` and exit 0. Now the
    rocmkit n2 runs is the difference that fails it, and so is each fact it did not report."""
    r, _ = fleet(tmp_path, trees, "--json", n2="older", n2_tree=tree)
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    diffs = {d["id"]: d for d in doc["differences"]}
    tool = diffs["fleet.differs.rocmkit"]
    assert tool["odd_nodes"] == ["n2"] and "an older rocmkit (no build identity) on n2" in tool["title"]
    assert "on n2: pip install --upgrade" in tool["fix"], tool["fix"]
    assert "n2 did not report torch: its rocmkit is older" in diffs["fleet.differs.packages.torch"]["title"]
    assert doc["failing_nodes"] == ["n2"] and doc["passing_nodes"] == ["n1"]
    assert (tmp_path / "out" / "exclude.txt").read_text() == "n2\n"


# The last commit before the fleet: its fingerprint has kernel, amdgpu, ROCm and GPUs only (the n2)
BEFORE_FLEET = "eef410a^"


def test_the_rocmkit_of_an_earlier_commit_on_n2_fails_the_fleet(tmp_path, trees):
    """n2 runs rocmkit as it was before the fleet (its own code, from git: no build identity, no torch, no
    environment in its document); n2's environment sets NCCL_SOCKET_IFNAME. Before: exit 0, "2 of 2 pass"."""
    old = tmp_path / "old"
    old.mkdir()
    archive = subprocess.run(["git", "-C", str(REPO), "archive", BEFORE_FLEET, "rocmkit"], capture_output=True,
                             timeout=60)
    if archive.returncode:
        pytest.skip(f"{BEFORE_FLEET} is not in this clone (a shallow checkout): {archive.stderr.decode()[-200:]}")
    subprocess.run(["tar", "-x", "-C", str(old)], input=archive.stdout, check=True, timeout=60)
    r, _ = fleet(tmp_path, trees, "--json", n2="commit")
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    assert "rocmkit" not in nodes_of(doc)["n2"]["doctor"] and nodes_of(doc)["n2"]["state"] == "answered"
    diffs = {d["id"]: d for d in doc["differences"]}
    assert diffs["fleet.differs.rocmkit"]["odd_nodes"] == ["n2"]
    assert "n2 did not report torch: its rocmkit is older" in diffs["fleet.differs.packages.torch"]["title"]
    assert doc["failing_nodes"] == ["n2"] and doc["passing_nodes"] == ["n1"] and doc["exclude"] == "--exclude=n2"


def test_another_build_on_n2_fails_the_fleet_naming_who_runs_what(tmp_path, trees):
    other = tmp_path / "other"
    shutil.copytree(REPO / "rocmkit", other / "rocmkit", ignore=shutil.ignore_patterns("__pycache__"))
    with open(other / "rocmkit" / "fleet" / "__init__.py", "a", encoding="utf-8") as f:
        f.write("# another commit\n")
    r, _ = fleet(tmp_path, trees, "--json", n2="build", n2_tree="same")
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    tool = {d["id"]: d for d in doc["differences"]}["fleet.differs.rocmkit"]
    builds = {v["nodes"][0]: v["value"] for v in tool["values"]}
    assert set(builds) == {"n1", "n2"} and builds["n1"] != builds["n2"], tool
    assert all(v.startswith("0.1.0 (build ") or "(build " in v for v in builds.values())
    assert f"n1 runs {builds['n1']}" in tool["fix"] and f"n2 runs {builds['n2']}" in tool["fix"], tool["fix"]
    assert doc["passing_nodes"] == [] and doc["exclude"] is None  # one each: no majority, the fleet fails


def test_a_banner_around_n2s_document_is_tolerated(tmp_path, trees):
    r, _ = fleet(tmp_path, trees, "--json", n2="banner", n2_tree="same")
    assert r.returncode == 0, r.stdout + r.stderr
    n2 = nodes_of(json.loads(r.stdout))["n2"]
    assert n2["state"] == "answered" and n2["verdict"] == "pass"
    assert "Welcome to n2" in n2["stdout_around"] and "module: rocm/7.0 loaded" in n2["stdout_around"]


@pytest.mark.parametrize(("n2", "said"), [("oops", "findings: a string, not a list"),
                                          ("nostatus", "findings[0].status: missing")])
def test_a_malformed_document_names_n2_and_n1_stands(tmp_path, trees, n2, said):
    r, _ = fleet(tmp_path, trees, n2=n2, n2_tree="same")
    assert r.returncode == 1, r.stdout + r.stderr
    doc = json.loads((tmp_path / "out" / "fleet.json").read_text())
    n = nodes_of(doc)
    assert n["n1"]["verdict"] == "pass" and n["n2"]["state"] == "invalid"
    assert n["n2"]["error"] == f"n2's doctor document is malformed: {said}"
    assert "fleet.invalid" in r.stdout and doc["exclude"] == "--exclude=n2"


def test_a_crash_by_a_signal_is_named(tmp_path, trees):
    r, _ = fleet(tmp_path, trees, "--json", n2="segv", n2_tree="same")
    assert r.returncode == 1, r.stderr
    doc = json.loads(r.stdout)
    n = nodes_of(doc)
    assert n["n2"]["state"] == "crashed" and n["n2"]["error"] == "rocmkit crashed on n2 (SIGSEGV)", n["n2"]
    assert n["n2"]["exit_code"] == 139 and n["n1"]["verdict"] == "pass"
    assert any(f["title"] == "rocmkit crashed on n2 (SIGSEGV)" for f in doc["findings"])


def test_full_width_digits_are_refused(tmp_path, trees):
    r, _ = fleet(tmp_path, trees, nodes="n[１-２]")
    assert r.returncode == 2 and "is not plain ASCII" in r.stderr and "U+FF11" in r.stderr, r.stderr
    assert not (tmp_path / "out").exists()


def test_a_bounded_wait_for_resources_names_the_nodes_and_the_jobs(tmp_path, trees):
    """Another job holds one CPU of each node (both MIXED: Slurm's state alone cannot say the step will not fit),
    and the fleet's step asks for two CPUs a node: srun waits, gives up at the grace (--immediate), and the
    refusal names each node with the job that holds it, instead of "the nodes run other jobs"."""
    r = subprocess.run(["sbatch", "--parsable", "-N2", "--ntasks-per-node=1", "-c1", "-J", "rocmkit-test-half",
                        "-o", "/dev/null", "--wrap", "sleep 120"], capture_output=True, text=True, timeout=30)
    job = r.stdout.strip().split(";")[0]
    assert r.returncode == 0 and job, r.stderr
    try:
        for _ in range(60):
            if subprocess.run(["squeue", "-h", "-j", job, "-t", "R", "-o", "%i"], capture_output=True, text=True,
                              timeout=30).stdout.strip():
                break
            time.sleep(0.5)
        r, seconds = fleet(tmp_path, trees, "--srun-arg=--cpus-per-task=2", "--node-timeout", "5", n2_tree="same")
    finally:
        subprocess.run(["scancel", job], capture_output=True, timeout=30)
    assert r.returncode == 3 and seconds < 45, r.stdout + r.stderr
    assert "srun refused the fleet's step" in r.stderr and "Requested nodes are busy" in r.stderr, r.stderr
    for node in ("n1", "n2"):
        assert f"{node} mixed, job {job} (rocmkit-test-half, " in r.stderr, r.stderr
