"""`rocmkit slurm --preflight` on the real two-node Slurm CI provisions (marker `slurm`; nodes n1 and n2,
two slurmd on this host, .ci/provision/30-slurm.sh).

Both slurmd nodes share this host's kernel, so no real per-node fault can be made live: each node's doctor
reads its own host tree instead (the `--root` capture format, written by tests/treegen.py: two ACTIVE RoCE
ports, and n2's kernel log holding an amdgpu "GPU reset failed" record). A `rocmkit` on the job's PATH adds
`--root <trees>/$SLURMD_NODENAME` to the real command; everything else is the product's: the sbatch script,
srun on each node, the real doctor deciding, the job's verdict. A `ray` on PATH records every call, so the test
sees that no `ray start` ran."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rayhost import ray_processes_left

from rocmkit.host.facts import kernlog
from treegen import HEALTHY_KMSG, HostSpec, format_records, healthy_ports, healthy_process, write_tree

pytestmark = [pytest.mark.slurm, pytest.mark.slow, pytest.mark.usefixtures("ray_host")]

FAULT = "amdgpu 0000:05:00.0: amdgpu: GPU reset(2) failed"


def shim(bindir: Path, name: str, body: str) -> None:
    (bindir / name).write_text("#!/bin/bash\n" + body)
    (bindir / name).chmod(0o755)


def run_job(tmp_path: Path, faulty: tuple[str, ...], ports=None, job_args: tuple[str, ...] = (),
            tree_env: dict | None = None) -> tuple[int, str, float, Path]:
    """Submits a 2-node --preflight job whose nodes in `faulty` carry the kernel-log fault, each node with `ports`
    (two ACTIVE RoCE ports unless given) and `tree_env` in its captured process environment; (rc, log, seconds,
    the file of `ray` calls). The `rocmkit` shim records each node's NCCL_IB_DISABLE in tmp_path/node-env."""
    healthy = [(r.level, r.message) for r in kernlog.parse(HEALTHY_KMSG)]
    trees = tmp_path / "trees"
    for node in ("n1", "n2"):
        kmsg = format_records([*healthy, (3, FAULT)]) if node in faulty else HEALTHY_KMSG
        process = healthy_process(env={**healthy_process()["env"], **(tree_env or {})})
        write_tree(trees / node, HostSpec(rdma=healthy_ports(2) if ports is None else ports, kmsg=kmsg,
                                          process=process))
    venv_bin = Path(sys.executable).parent
    bindir = tmp_path / "bin"
    bindir.mkdir()
    ray_calls = tmp_path / "ray-calls"
    shim(bindir, "rocmkit", f'echo "$SLURMD_NODENAME ${{NCCL_IB_DISABLE:-unset}}" >> {tmp_path}/node-env\n'
                            f'exec {venv_bin}/rocmkit "$@" --root "{trees}/$SLURMD_NODENAME"\n')
    shim(bindir, "ray", f'echo "$SLURMD_NODENAME $*" >> {ray_calls}\nexec {venv_bin}/ray "$@"\n')
    env = {**os.environ, "PATH": f"{bindir}:{venv_bin}:{os.environ['PATH']}"}

    script = tmp_path / "job.sbatch"
    r = subprocess.run([sys.executable, "-m", "rocmkit", "slurm", "--nodes", "2", "--gpus-per-node", "0",
                        "--runtime", "none", "--job-name", "rocmkit-preflight", "--join-timeout", "60",
                        "--preflight", "--entrypoint", "python3 -c pass", *job_args, "-o", str(script)],
                       capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    start = time.monotonic()
    r = subprocess.run(["sbatch", "--parsable", "--wait", "--time=4", str(script)], capture_output=True,
                       text=True, env=env, cwd=tmp_path, timeout=300)
    elapsed = time.monotonic() - start
    job = r.stdout.strip().split(";")[0]
    log = (tmp_path / f"rocmkit-preflight-{job}.out").read_text()
    return r.returncode, log, elapsed, ray_calls


def test_a_node_whose_doctor_fails_fails_the_job_by_name_before_ray(tmp_path):
    rc, log, elapsed, ray_calls = run_job(tmp_path, faulty=("n2",))
    assert rc != 0, log
    assert "preflight on 2 node(s): rocmkit doctor --multi-node --only rdma,kernel.log" in log
    # each node's own doctor ran and said so under its name
    assert "[n1] doctor passed: 4 pass" in log, log
    assert "[n2] doctor FAILED" in log and "[n2]   FAIL  kernel.log.gpu_reset_failed" in log, log
    assert "[n1]   FAIL" not in log, log
    assert "ERROR: preflight failed on node(s): n2 (their lines above say why)" in log, log
    # no Ray: the script stopped before the head's step, and no `ray` command ran anywhere
    assert "waiting up to" not in log and "starting:" not in log, log
    assert not ray_calls.exists(), ray_calls.read_text()
    assert elapsed < 120, elapsed


def test_healthy_nodes_pass_the_preflight_and_ray_starts(tmp_path):
    rc, log, _, ray_calls = run_job(tmp_path, faulty=())
    assert rc == 0, log
    assert "[n1] doctor passed" in log and "[n2] doctor passed" in log, log
    assert "preflight passed on 2 node(s)" in log and "all 2 node(s) joined" in log, log
    assert "driver exited with 0" in log, log
    starts = sorted(line.split()[0] for line in ray_calls.read_text().splitlines() if " start " in f"{line} ")
    assert starts == ["n1", "n2"], ray_calls.read_text()
    left = ray_processes_left()
    assert not left, left  # the teardown stopped them


def test_a_tcp_cluster_passes_when_the_job_says_so(tmp_path):
    """Nodes without RDMA: the preflight fails them, unless the job tells RCCL to use TCP. Two links of that chain:
    `--env NCCL_IB_DISABLE=1` reaches the doctor's process on every node (the shim records it), and a node whose
    environment holds it passes. (Under --root the doctor judges the tree's captured environment, not its own, so
    the tree carries the variable as the live node's process would.)"""
    for sub in ("rdma", "tcp"):
        (tmp_path / sub).mkdir()
    rc, log, _, _ = run_job(tmp_path / "rdma", faulty=(), ports=())
    assert rc != 0 and "ERROR: preflight failed on node(s): n1 n2" in log, log
    assert "[n1]   FAIL  rdma.port" in log, log
    assert sorted((tmp_path / "rdma/node-env").read_text().split("\n")[:-1]) == ["n1 unset", "n2 unset"]
    rc, log, _, _ = run_job(tmp_path / "tcp", faulty=(), ports=(), job_args=("--env", "NCCL_IB_DISABLE=1"),
                            tree_env={"NCCL_IB_DISABLE": "1"})
    assert rc == 0, log
    assert sorted((tmp_path / "tcp/node-env").read_text().split("\n")[:-1]) == ["n1 1", "n2 1"]
    assert "[n1] doctor passed" in log and "[n2] doctor passed" in log and "preflight passed on 2 node(s)" in log, log
    assert "[n1]   PASS  rdma.port" in log and "TCP sockets" in log, log
