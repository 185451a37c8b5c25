"""`.ci/run`'s own plumbing, with stand-ins for its steps (each a few lines of bash): the time table lists every
part, pytest's too when pytest fails, and CI's exit code is the failing part's; 20-docker.sh and 40-doctor-libs.sh
run beside 50-cpu-stacks.sh, the two images build side by side with the resolve gate beside them, the two image gates
certify side by side, and a failure beside another still stops CI. benchmarks/ci_time.py reads the table."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import scriptmodule

REPO = Path(__file__).resolve().parent.parent
STEPS = ("10-python", "20-docker", "30-slurm", "40-doctor-libs", "50-cpu-stacks", "55-megatron")


def _stand_in(path: Path, name: str, body: str = "") -> None:
    """A step that notes when it started and ended (in $ROCMKIT_CI_WORK/order) and exits $FAIL_<name> (0 unset)."""
    var = "FAIL_" + name.replace("-", "_").replace(".", "_")
    path.write_text(f'#!/usr/bin/env bash\necho "start {name}" >> "$ROCMKIT_CI_WORK/order"\n{body}\n'
                    f'echo "end {name}" >> "$ROCMKIT_CI_WORK/order"\nexit "${{{var}:-0}}"\n')


def _ci(tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess, Path]:
    root = tmp_path / "repo"
    (root / ".ci" / "provision").mkdir(parents=True)
    shutil.copy(REPO / ".ci" / "run", root / ".ci" / "run")
    for step in STEPS:
        # 50-cpu-stacks.sh waits until 20-docker.sh and 40-doctor-libs.sh have started (the resolve gate until a
        # build has, each build until the other has, each gate until the other has): run one after the other, they
        # would hang until `timeout` ends CI
        body = ('until grep -q "start 20-docker" "$ROCMKIT_CI_WORK/order" && '
                'grep -q "start 40-doctor-libs" "$ROCMKIT_CI_WORK/order"; do sleep 0.1; done') \
            if step == "50-cpu-stacks" else ""
        _stand_in(root / ".ci" / "provision" / f"{step}.sh", step, body)
    _stand_in(root / ".ci" / "resolve-gate.sh", "resolve",
              'until grep -q "start build" "$ROCMKIT_CI_WORK/order"; do sleep 0.1; done')
    _stand_in(root / ".ci" / "image-build.sh", "build",  # the two builds side by side
              'until [ "$(grep -c "start build" "$ROCMKIT_CI_WORK/order")" = 2 ]; do sleep 0.1; done')
    _stand_in(root / ".ci" / "image-gate.sh", "gate",  # built before; the two gates side by side
              '[ "$IMAGE_GATE_BUILT" = 1 ]\n'
              'until [ "$(grep -c "start gate" "$ROCMKIT_CI_WORK/order")" = 2 ]; do sleep 0.1; done')
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    _stand_in(bin_ / "python", "pytest")
    (bin_ / "python").chmod(0o755)
    work = tmp_path / "work"
    r = subprocess.run(["timeout", "60", "bash", str(root / ".ci" / "run")], capture_output=True, text=True,
                       env={**os.environ, "PATH": f"{bin_}:{os.environ['PATH']}", "ROCMKIT_CI_WORK": str(work),
                            **env})
    return r, work


def test_the_table_lists_every_part_and_the_whole(tmp_path):
    r, work = _ci(tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    table = (work / "times.txt").read_text()
    assert table in r.stdout
    # the log says which CPU ran (the CPU numerics bands were measured on AVX-512)
    assert re.search(r"^cpu: \d+ core\(s\), .*, (AVX-512|no AVX-512)$", r.stdout, re.M), r.stdout[:500]
    parts = [line[:34].strip() for line in table.splitlines()]  # in the order they ended
    assert parts[-2:] == ["pytest", "whole .ci/run"]
    assert sorted(parts[:-2]) == ["TRL gate trl-cpu", "image build trl-cpu", "image build verl-cpu",
                                  "image gate verl-cpu", "provision 10-python.sh", "provision 20-docker.sh",
                                  "provision 30-slurm.sh", "provision 40-doctor-libs.sh", "provision 50-cpu-stacks.sh", "provision 55-megatron.sh",
                                  "resolve gate"]
    assert table.count("beside 50-cpu-stacks.sh") == 2 and "beside the builds" in table
    assert "beside the verl-cpu build" in table and "beside the verl-cpu gate" in table
    assert re.search(r" min  CPU +\d+ %  exit 0, \d{4}-\d\d-\d\d \d\d:\d\d UTC$", table.splitlines()[-1])
    assert all(re.search(r" min  CPU +\d+ %", line) for line in table.splitlines())  # the cores busy meanwhile
    # benchmarks/ci_time.py reads the table as .ci/run writes it
    ci_time = scriptmodule.load("benchmarks/ci_time.py")
    read = ci_time.read(work / "times.txt")
    assert list(read) == parts and read["whole .ci/run"] >= read["pytest"] >= 0
    assert "whole runs 0% apart: within 10%" in ci_time.verdicts([read, read])


def test_pytest_failing_is_in_the_table_and_is_cis_exit_code(tmp_path):
    r, work = _ci(tmp_path, FAIL_pytest="5")
    assert r.returncode == 5
    table = (work / "times.txt").read_text()
    assert "\npytest " in table and "exit 5, " in table


def test_a_step_failing_beside_another_stops_ci_after_both(tmp_path):
    r, work = _ci(tmp_path, FAIL_20_docker="4")
    assert r.returncode == 4 and "20-docker.sh failed, exit 4" in r.stderr
    order = (work / "order").read_text()
    assert "end 50-cpu-stacks" in order and "55-megatron" not in order  # the one beside ended; nothing after ran
    r, work = _ci(tmp_path / "again", FAIL_resolve="2")
    assert r.returncode == 2 and "resolve gate: every built-in stack resolved by pip failed, exit 2" in r.stderr
    assert "image build verl-cpu" in (work / "times.txt").read_text() and "gate" not in (work / "order").read_text()
    r, work = _ci(tmp_path / "doctor-libs", FAIL_40_doctor_libs="3")  # the second step beside, failing
    assert r.returncode == 3 and "40-doctor-libs.sh failed, exit 3" in r.stderr
    assert "end 50-cpu-stacks" in (work / "order").read_text()
    r, work = _ci(tmp_path / "gates", FAIL_gate="6")  # both gates fail: CI stops with their exit code, after both
    assert r.returncode == 6 and (work / "order").read_text().count("end gate") == 2
    assert "pytest" not in (work / "order").read_text()


def test_ci_cpu_counts_the_machines_cpu_over_a_test_run_alone():
    """benchmarks/ci_cpu.py: a test run alone, its wall and the machine's busy CPU meanwhile (every core's, so the
    engines' own processes count), and a failing test said as one."""
    ci_cpu = scriptmodule.load("benchmarks/ci_cpu.py")
    busy, idle = ci_cpu.busy_idle()
    assert busy > 0 and idle >= 0
    row = ci_cpu.measure("tests/test_ci_run.py::test_pytest_failing_is_in_the_table_and_is_cis_exit_code")
    assert row["passed"] and row["wall_s"] > 0 and row["cpu_s"] > 0, row
    assert 0 < row["cores_busy"] <= (os.cpu_count() or 1) + 0.5 and 0 <= row["idle_share"] <= 1
    assert not ci_cpu.measure("tests/test_ci_run.py::no_such_test")["passed"]
