"""The runner every process and container of rocmkit goes through: deadlines that hold while output flows,
whole process trees stopped, signals turned into a clean stop and exit 130/143."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from rocmkit.runtime import proc
from rocmkit.errors import EnvironmentMissing

# A child that prints a line every 50 ms for `seconds`, and starts a grandchild in a session of its own
# (as Ray does) that would outlive it; the grandchild's pid is the first line.
CHATTY = textwrap.dedent("""
    import subprocess, sys, time
    g = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], start_new_session=True)
    print(g.pid, flush=True)
    end = time.time() + float(sys.argv[1])
    while time.time() < end:
        print("working", flush=True)
        time.sleep(0.05)
""")


def _gone(pid: int, within: float = 5.0) -> bool:
    end = time.monotonic() + within
    while time.monotonic() < end:
        if not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
            return True
        time.sleep(0.05)
    return False


def test_output_lines_reach_the_callback_and_the_log(tmp_path):
    seen = []
    log = tmp_path / "run.log"
    r = proc.run([sys.executable, "-c", "print('a'); import sys; print('b', file=sys.stderr)"], on_line=seen.append,
                 log_path=log, timeout=60)
    assert r.ok and r.returncode == 0 and not r.timed_out
    assert sorted(seen) == ["a", "b"] and sorted(log.read_text().split()) == ["a", "b"]


def test_lines_labelled_with_their_stream_and_the_deadline_holds_for_them(tmp_path):
    """on_stream_line gets stdout's lines apart from stderr's, each with its stream's name, in each stream's
    order (the fleet reads srun's tasks on stdout and srun's own errors on stderr); the log still gets both. A
    child that keeps printing past its deadline is stopped there, its lines up to then delivered."""
    seen: list[tuple[str, str]] = []
    log = tmp_path / "run.log"
    script = "for i in 1 2 3; do echo \"0: out $i\"; echo \"err $i\" >&2; done"
    r = proc.run(["bash", "-c", script], on_stream_line=lambda s, line: seen.append((s, line)), log_path=log,
                 timeout=60)
    assert r.ok and r.stdout is None  # labelled lines are streamed, not kept
    assert [x for x in seen if x[0] == "stdout"] == [("stdout", f"0: out {i}") for i in (1, 2, 3)]
    assert [x for x in seen if x[0] == "stderr"] == [("stderr", f"err {i}") for i in (1, 2, 3)]
    assert sorted(log.read_text().splitlines()) == sorted(line for _, line in seen)
    seen.clear()
    start = time.monotonic()
    r = proc.run([sys.executable, "-c", CHATTY, "300"], on_stream_line=lambda s, line: seen.append((s, line)),
                 timeout=1.5, grace_s=2)
    assert r.timed_out and r.returncode is None and time.monotonic() - start < 10
    grandchild = int(seen[0][1])
    assert ("stdout", "working") in seen and _gone(grandchild)


def test_the_deadline_holds_while_output_flows_and_the_whole_tree_stops(tmp_path):
    lines = []
    started = time.monotonic()
    r = proc.run([sys.executable, "-c", CHATTY, "60"], timeout=1.5, on_line=lines.append, log_path=tmp_path / "l",
                 grace_s=2)
    took = time.monotonic() - started
    assert r.timed_out and r.returncode is None and not r.ok
    assert took < 5, took
    assert len(lines) > 5  # it was talking all along
    assert _gone(int(lines[0])), "the grandchild in its own session survived"
    assert "stopped at the deadline" in (tmp_path / "l").read_text()


def test_a_finished_run_leaves_nothing_of_its_group_behind():
    # the child leaves a daemon in its own process group when it exits normally
    code = "import subprocess, sys; p = subprocess.Popen(['sleep', '300']); print(p.pid, flush=True)"
    lines = []
    r = proc.run([sys.executable, "-c", code], timeout=30, on_line=lines.append)
    assert r.ok
    assert _gone(int(lines[0]))


def test_a_missing_program_is_an_environment_error():
    with pytest.raises(EnvironmentMissing, match="cannot start /no/such/program"):
        proc.run(["/no/such/program"], timeout=5)


DRIVER = textwrap.dedent("""
    import sys
    from rocmkit.runtime import proc
    from rocmkit.errors import RocmkitError
    try:
        proc.run([sys.executable, "-c", sys.argv[1], "60"], timeout=120, on_line=lambda l: print(l, flush=True),
                 what="the test child")
    except RocmkitError as exc:
        print("error:", exc.message, flush=True)
        sys.exit(exc.exit_code)
""")


@pytest.mark.parametrize("sig,code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_to_rocmkit_alone_stops_the_child_tree_first(sig, code):
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, CHATTY], stdout=subprocess.PIPE, text=True,
                              start_new_session=True)  # only rocmkit gets the signal, not the child's group
    grandchild = int(driver.stdout.readline())
    driver.stdout.readline()  # the child is running
    os.kill(driver.pid, sig)
    out, _ = driver.communicate(timeout=30)
    assert driver.returncode == code, out
    assert f"the test child stopped: rocmkit received {sig.name}" in out
    assert _gone(grandchild)


def test_rocmkit_killed_outright_takes_its_runs_child_with_it():
    """kill -9 leaves rocmkit no time to stop anything: the run's child (verl's driver, whose Ray cleans up after it)
    gets SIGKILL from the kernel as rocmkit dies (PR_SET_PDEATHSIG), instead of training on, unwatched, with the
    GPUs. A grandchild in a session of its own is its parent's to end (Ray's reaper does that for Ray's)."""
    quiet = "import os, sys, time; print(os.getpid(), flush=True); time.sleep(float(sys.argv[1]))"  # writes no more
    driver = subprocess.Popen([sys.executable, "-c", DRIVER, quiet], stdout=subprocess.PIPE, text=True,
                              start_new_session=True)
    child = psutil.Process(int(driver.stdout.readline()))
    os.kill(driver.pid, signal.SIGKILL)
    driver.wait(timeout=30)
    assert _gone(child.pid), child.status()


def test_capture_keeps_every_line():
    r = proc.capture([sys.executable, "-c", "print('\\n'.join(map(str, range(200))))"], timeout=30)
    assert r.ok and r.tail == [str(i) for i in range(200)]


# A child that has closed its output is not done: its exit status comes after. It must be the one reported
# (a git fetch that failed was once reported as exit 0: its output closed as it exited, the cleanup reaped it
# through psutil, and subprocess then read "no such child" as status 0).
CLOSES_OUTPUT_THEN_EXITS = "import os, sys, time; print('fatal: boom', file=sys.stderr, flush=True); " \
                           "os.close(1); os.close(2); time.sleep(0.5); sys.exit(int(sys.argv[1]))"


@pytest.mark.parametrize("keep_stdout", [False, True])
def test_the_exit_status_is_the_childs_even_when_it_closed_its_output_first(keep_stdout):
    r = proc.run([sys.executable, "-c", CLOSES_OUTPUT_THEN_EXITS, "1"], timeout=30, keep_stdout=keep_stdout)
    assert (r.returncode, r.ok, r.tail) == (1, False, ["fatal: boom"])
    r = proc.run([sys.executable, "-c", CLOSES_OUTPUT_THEN_EXITS, "0"], timeout=30, keep_stdout=keep_stdout)
    assert (r.returncode, r.ok) == (0, True)  # waited for, not stopped because its output closed


def test_a_child_that_closed_its_output_still_stops_at_the_deadline():
    code = "import os, time; os.close(1); os.close(2); time.sleep(300)"
    started = time.monotonic()
    r = proc.run([sys.executable, "-c", code], timeout=1, grace_s=5)
    assert r.timed_out and not r.ok and r.returncode is None and time.monotonic() - started < 20


def test_a_stopped_background_process_reports_the_signal_not_success():
    server = proc.Background([sys.executable, "-c", "import time; time.sleep(300)"])
    time.sleep(0.2)
    assert server.poll() is None
    assert server.stop(grace_s=5) == -signal.SIGTERM


def test_runs_in_threads_leave_each_others_processes_alone():
    # A run cleans up after itself every process that became rocmkit's own since it began (a daemon its child
    # orphaned); one that another thread's run started is that run's, and must not be stopped with the first.
    import threading

    results = {}

    def run(name: str, seconds: float) -> None:
        results[name] = proc.run([sys.executable, "-c", f"import time; time.sleep({seconds})"], timeout=30)

    before = {p.pid for p in psutil.Process().children()}
    long = threading.Thread(target=run, args=("long", 3.0))
    long.start()
    end = time.monotonic() + 10
    while not {p.pid for p in psutil.Process().children()} - before and time.monotonic() < end:
        time.sleep(0.01)
    # the short run begins just after the long one's child started (within the second of slack a run gives
    # start times, psutil's clock being coarser), and ends first
    run("short", 0.2)
    long.join(timeout=30)
    assert results["short"].returncode == 0
    assert results["long"].returncode == 0, "the short run's cleanup stopped the long run's child"
    assert results["long"].seconds >= 2.5


def test_a_run_leaves_what_another_runs_tree_orphaned_alone(tmp_path):
    # A run's child starts a process and its parent exits at once (git fetch's helpers, a shell's `cmd &`): the
    # orphan is re-parented to rocmkit (the subreaper), out of that run's tree. A run of another thread that ends
    # meanwhile must not take it for its own orphan: it still belongs to the other run's session.
    import threading

    pidfile = tmp_path / "orphan.pid"
    results = {}

    def other() -> None:
        results["other"] = proc.run(["sh", "-c", f"sh -c 'sleep 6 & echo $! > {pidfile}'; sleep 3; "
                                     f"kill -0 \"$(cat {pidfile})\" && echo orphan-alive"], timeout=30,
                                    keep_stdout=True)

    short = threading.Thread(target=lambda: results.update(short=proc.run(["sleep", "1.5"], timeout=30)))
    short.start()  # begins first, so the orphan is younger than it: what its cleanup would adopt
    time.sleep(0.3)
    long = threading.Thread(target=other)
    long.start()
    short.join(timeout=30)
    long.join(timeout=30)
    assert results["short"].returncode == 0
    assert results["other"].stdout == ["orphan-alive"], "the short run's cleanup stopped the other run's orphan"
    assert _gone(int(pidfile.read_text()))  # and the run it belongs to stopped it when it ended


def test_a_run_leaves_a_background_servers_later_processes_alone(tmp_path):
    # A server started beside the run spawns a worker while the run goes on (as vLLM's server does): the
    # worker is the server's, not an orphan of the run.
    ready = tmp_path / "worker.pid"
    server = textwrap.dedent(f"""
        import subprocess, sys, time
        time.sleep(1.0)
        w = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        open({str(ready)!r}, "w").write(str(w.pid))
        time.sleep(300)
    """)
    with proc.Background([sys.executable, "-c", server]) as bg:
        result = proc.run([sys.executable, "-c", "import time; time.sleep(2.5)"], timeout=30)
        assert result.returncode == 0 and ready.exists()
        worker = int(ready.read_text())
        assert bg.poll() is None, "the run's cleanup stopped the server"
        assert psutil.pid_exists(worker) and psutil.Process(worker).status() != psutil.STATUS_ZOMBIE
    assert _gone(worker)


def test_many_runs_in_threads_each_get_their_own_output_and_status():
    # A run's child exists a moment before its tree does; a run of another thread choosing what to adopt in
    # that moment would stop it, and psutil's reaping would make it read as exit 0 with no output (`outdated`'s
    # git lookups, side by side in a thread pool, lost their files so).
    from concurrent.futures import ThreadPoolExecutor

    def one(i: int):
        r = proc.run(["sh", "-c", f"sleep 0.0{i % 5}; echo run-{i}; exit {i % 3}"], timeout=30, keep_stdout=True)
        return i, r.returncode, r.stdout

    with ThreadPoolExecutor(max_workers=8) as pool:
        results = list(pool.map(one, range(80)))
    wrong = [(i, code, out) for i, code, out in results if (code, out) != (i % 3, [f"run-{i}"])]
    assert wrong == []
