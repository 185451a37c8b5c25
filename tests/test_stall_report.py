"""The stall report on real processes: two torch.distributed (gloo) ranks where one is stopped or elsewhere while
the other waits in an all_reduce, a tree with no Python process, processes that exit while being dumped, and
py-spy missing or not permitted (ptrace). Every report must finish within its budget and stop nothing.
The reports of real hung certifications (verl, TRL) are judged in tests/test_stall_runs.py."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from rocmkit.stall import report, stacks, verdict
from nobody import as_nobody

HERE = Path(__file__).resolve().parent
REPO = HERE.parent


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start_pair(mode: str) -> list[subprocess.Popen]:
    port = _port()
    return [subprocess.Popen([sys.executable, str(HERE / "stall_ranks.py"), str(rank), str(port), mode],
                             stdout=subprocess.PIPE, text=True, env={**os.environ, "RANK": str(rank)})
            for rank in (0, 1)]


def _joined(pair: list[subprocess.Popen], deadline: float) -> None:
    for p in pair:
        line = ""
        while not line.startswith("joined"):
            assert time.monotonic() < deadline and p.poll() is None, "the ranks did not join within 120 s"
            line = p.stdout.readline()


@pytest.fixture(scope="module")
def pairs():
    """Two ranks, rank 1 stopped (one pair: each rank's torch import costs seconds of this machine's 2 cores)."""
    started = {"stop": _start_pair("stop")}
    try:
        deadline = time.monotonic() + 120
        for pair in started.values():
            _joined(pair, deadline)
        while psutil.Process(started["stop"][1].pid).status() != psutil.STATUS_STOPPED:
            assert time.monotonic() < deadline
            time.sleep(0.1)
        time.sleep(1.0)  # rank 0 reaches its all_reduce
        yield started
    finally:
        for pair in started.values():
            for p in pair:
                if p.poll() is None:
                    p.kill()
                p.wait()


def _proc(doc: dict, pid: int) -> dict:
    return next(p for p in doc["processes"] if p["pid"] == pid)


def test_a_stopped_rank_is_the_one_a_collective_waits_for(pairs, tmp_path):
    r0, r1 = pairs["stop"]
    doc = report.take([r0.pid, r1.pid], out_dir=tmp_path / "s")
    v = doc["verdict"]
    assert v["health"] == "stuck"
    assert [(w["pid"], w["rank"], w["kind"]) for w in v["waiting"]] == [(r0.pid, "0", "collective")]
    assert "all_reduce (torch/distributed/distributed_c10d.py" in v["waiting"][0]["at"]
    assert "stall_ranks.py" in v["waiting"][0]["caller"]
    assert [(w["pid"], w["rank"]) for w in v["waits_for"]] == [(r1.pid, "1")]
    assert "stopped (SIGSTOP" in v["waits_for"][0]["why"]
    assert v["lines"][0].startswith(f"the job waits for rank 1 (pid {r1.pid}")
    assert v["summary"].startswith(v["lines"][0])
    stopped = _proc(doc, r1.pid)
    assert stopped["state"] == "stopped" and stopped["stack"] == "Python" and "stopped" in stopped["note"]
    assert _proc(doc, r0.pid)["stack"] == "native + Python"  # c10d::Work::wait and below
    assert "c10d::Work::wait" in (tmp_path / "s" / "stacks.txt").read_text()
    assert json.loads((tmp_path / "s" / "report.json").read_text())["verdict"] == v
    assert doc["took_s"] <= report.BUDGET_S
    # the report stopped nothing and resumed nothing
    assert psutil.Process(r1.pid).status() == psutil.STATUS_STOPPED and r0.poll() is None


def test_a_rank_elsewhere_is_the_straggler_its_peer_waits_for(pairs):
    """The same two ranks read as if rank 1 were running and sleeping elsewhere (its record changed, the rest as
    taken): the verdict names it as the straggler its peer's collective waits for."""
    r0, r1 = pairs["stop"]
    doc = report.take([r0.pid, r1.pid], out_dir=None)
    assert doc["files"] == {}
    procs = [dict(p) for p in doc["processes"]]
    straggler = next(p for p in procs if p["pid"] == r1.pid)
    straggler.update(state="sleeping", wait={"kind": "sleep", "at": "sleep (time)", "caller": "<module> (train.py:6)"})
    v = verdict.judge(procs)
    assert [w["pid"] for w in v["waiting"]] == [r0.pid] and v["health"] == "waiting"
    assert [w["pid"] for w in v["waits_for"]] == [r1.pid]
    assert v["waits_for"][0]["why"] == ("its peers wait in a collective and it is not in one: it is idle (0 % CPU) in "
                                        "a sleep at <module> (train.py:6) (innermost: sleep (time))")


def test_the_command_reports_without_stopping_and_says_it_is_stuck(pairs, tmp_path):
    r0, r1 = pairs["stop"]
    out = tmp_path / "cli"
    r = subprocess.run([sys.executable, "-m", "rocmkit", "doctor", "--stalled", str(r0.pid), "--stalled",
                        str(r1.pid), "--stall-out", str(out)], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert r.returncode == 1, r.stderr
    assert f"the job waits for rank 1 (pid {r1.pid}" in r.stdout and (out / "stacks.txt").exists()
    assert r0.poll() is None and psutil.Process(r1.pid).status() == psutil.STATUS_STOPPED


def test_a_job_at_work_is_healthy(tmp_path):
    busy = subprocess.Popen([sys.executable, "-c", "import time\nend = time.time() + 60\nwhile time.time() < end: pass"])
    try:
        time.sleep(0.5)
        r = subprocess.run([sys.executable, "-m", "rocmkit", "doctor", "--stalled", str(busy.pid), "--json",
                            "--stall-out", str(tmp_path / "o")], capture_output=True, text=True, cwd=REPO, timeout=60)
        doc = json.loads(r.stdout)
        assert r.returncode == 0 and doc["verdict"]["health"] == "working", doc["verdict"]
        assert doc["schema"] == "rocmkit.stall-report/v1" and doc["verdict"]["summary"].startswith("at work: pid")
    finally:
        busy.kill()
        busy.wait()


def test_a_tree_without_python_says_so():
    sleeper = subprocess.Popen(["sleep", "60"])
    try:
        doc = report.take([sleeper.pid], out_dir=None)
        assert "no Python process in the tree: no stacks to take" in doc["notes"]
        assert _proc(doc, sleeper.pid)["role"] == "sleep" and _proc(doc, sleeper.pid)["note"] == "not a Python process"
        assert doc["verdict"]["health"] == "idle"
    finally:
        sleeper.kill()
        sleeper.wait()


def test_processes_that_exit_while_being_dumped_give_notes(monkeypatch):
    """Children that exit between the report's listing of the tree and their dump (timed here, so that the test
    does not depend on the machine's speed: each child is killed and reaped by its parent just before py-spy is
    run on it) give a note each; the report goes on and its parent's own stack is still read."""
    # SIGCHLD ignored: the kernel reaps a killed child at once, even while py-spy holds the parent paused
    code = ("import signal, subprocess, sys, time\n"
            "signal.signal(signal.SIGCHLD, signal.SIG_IGN)\n"
            "kids = [subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']) for _ in range(4)]\n"
            "time.sleep(120)\n")
    parent = subprocess.Popen([sys.executable, "-c", code])
    real_dump = stacks.dump

    def exit_first(py_spy, pid, **kw):
        if pid != parent.pid:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:  # gone already (a loaded machine): the dump must say so all the same
                pass
            end = time.monotonic() + 10
            while os.path.exists(f"/proc/{pid}") and time.monotonic() < end:
                time.sleep(0.01)
        return real_dump(py_spy, pid, **kw)

    try:
        end = time.monotonic() + 30
        while len(psutil.Process(parent.pid).children()) < 4 and time.monotonic() < end:
            time.sleep(0.05)
        monkeypatch.setattr(stacks, "dump", exit_first)
        doc = report.take([parent.pid], out_dir=None, budget_s=20)
        assert doc["took_s"] <= 20
        notes = [p.get("note") for p in doc["processes"] if p["pid"] != parent.pid]
        assert notes == ["it exited while being dumped"] * 4, doc["processes"]
        assert _proc(doc, parent.pid)["role"] == "python -c" and _proc(doc, parent.pid).get("wait")
    finally:
        parent.kill()
        parent.wait()


def test_a_process_gone_before_its_dump_is_named_so():
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    py_spy, _ = stacks.find_py_spy()
    d = stacks.dump(py_spy, gone.pid, stopped=False, deadline=time.monotonic() + 10)
    assert d == stacks.Dump([], False, "it exited while being dumped")


def test_no_py_spy_is_a_note_not_a_failure(tmp_path):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        r = subprocess.run([sys.executable, "-m", "rocmkit", "doctor", "--stalled", str(sleeper.pid), "--json",
                            "--stall-out", str(tmp_path / "o")], capture_output=True, text=True, cwd=REPO, timeout=60,
                           env={**os.environ, "ROCMKIT_PY_SPY": str(tmp_path / "no-py-spy")})
        doc = json.loads(r.stdout)
        assert r.returncode == 1 and doc["notes"] == [f"no stacks: ROCMKIT_PY_SPY={tmp_path / 'no-py-spy'} is not "
                                                      "an executable"]
        assert doc["processes"][0]["role"] == "-c" or doc["processes"][0]["pid"] == sleeper.pid
    finally:
        sleeper.kill()
        sleeper.wait()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root, to drop to nobody")
def test_ptrace_not_permitted_is_a_note():
    """As nobody against root's process (in a child that dropped root, as the kernel-log tests do: this machine's
    Python lies under /root, which nobody cannot enter, so no fresh interpreter): py-spy is refused, and the
    note says how to get permission."""
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    py_spy, _ = stacks.find_py_spy()
    try:
        note = as_nobody(lambda: stacks.dump(py_spy, sleeper.pid, stopped=False, deadline=time.monotonic() + 20).note
                         or "")
        assert note.startswith("not permitted to read it (ptrace): run as root"), note
    finally:
        sleeper.kill()
        sleeper.wait()


def test_py_spy_installed_with_pip_target_is_found(tmp_path):
    """`pip install --target DIR py-spy` puts the program in DIR/bin, on no PATH; a Python whose path holds DIR
    finds it there (the layout is copied from this venv's own py-spy install)."""
    import importlib.metadata
    import shutil

    system_python = shutil.which("python3", path="/usr/bin")
    dist = importlib.metadata.distribution("py-spy")  # the test venv's (tests need py-spy for the stall report)
    program = stacks.find_py_spy()[0]
    if system_python is None or program is None:
        pytest.skip("needs /usr/bin/python3 and py-spy in the test venv")
    site = tmp_path / "site"
    shutil.copytree(dist._path, site / Path(dist._path).name)
    (site / "bin").mkdir()
    shutil.copy2(program, site / "bin" / "py-spy")
    root = Path(stacks.__file__).parents[2]
    code = "from rocmkit.stall import stacks; print(stacks.find_py_spy()[0])"
    out = subprocess.run([system_python, "-c", code], capture_output=True, text=True, timeout=60,
                         env={"PATH": "/usr/bin:/bin", "PYTHONPATH": f"{site}:{root}"})
    assert out.stdout.strip() == str((site / "bin" / "py-spy").resolve()), out.stderr
