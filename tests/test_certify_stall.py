"""The watchdog against the real engines: a certification whose trainer is frozen with SIGSTOP after its first
step, under --stall-timeout 30, must end with exit 1 within 90 s of the freeze, its certificate naming the stall,
and nothing it started left running: TRL and verl, on this host and in the CPU images CI builds."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import psutil
import pytest
from provisioned import provisioned
from rayhost import in_this_pid_namespace
from test_certify_runs import need

STALL_S = 30
WITHIN_S = 90
TAG = "ROCMKIT_STALL_TEST_RUN"  # in the environment of every process a test's certification starts


def _trainer(engine: str, started: float, tag: str) -> psutil.Process | None:
    """The training process: TRL's runner (rocmkit.certify.intarget.trl_run), or verl's TaskRunner Ray actor, whose
    loop drives every step. Several processes carry the mark in their command line: TRL's `accelerate launch`
    wrapper, and any child the trainer forks (for an instant before it execs, or for a short job) — those come
    and go. The trainer is the one that has done the work: the most CPU time. Those carrying the run's tag first
    (not another job's trainer on this busy machine); in a container none carries it, and a process of this
    host's pid namespace without it is another run's."""
    mark = "rocmkit.certify.intarget.trl_run" if engine == "trl" else "TaskRunner"
    found = []
    for p in psutil.process_iter(["cmdline", "create_time", "cpu_times", "status"]):
        try:
            cmd = p.info["cmdline"] or []
            # not the host's `docker run … trl_run` client: the trainer itself, in the container or on the host
            if (p.info["create_time"] >= started - 1 and mark in " ".join(cmd) and "docker" not in Path(cmd[0]).name
                    and p.info["status"] != psutil.STATUS_ZOMBIE):
                try:
                    ours = p.environ().get(TAG) == tag
                except psutil.AccessDenied:
                    ours = False
                if not ours and in_this_pid_namespace(p.pid):
                    continue  # another run's trainer on this host (a test beside this one, under xdist)
                found.append((ours, p.info["cpu_times"].user + p.info["cpu_times"].system, p))
        except (psutil.Error, TypeError, IndexError, AttributeError):
            continue
    return max(found, key=lambda x: x[:2])[2] if found else None


def _freeze(engine: str, started: float, tag: str, deadline: float) -> psutil.Process:
    """SIGSTOP to the trainer, once it is seen stopped: a process picked that is gone by the time the signal is
    sent (or is not the trainer any more: psutil checks its start time) is picked again."""
    while True:
        assert time.monotonic() < deadline, "no trainer to freeze"
        p = _trainer(engine, started, tag)
        if p is not None:
            try:
                p.send_signal(signal.SIGSTOP)
                for _ in range(50):  # the kernel marks it stopped at once, or it is gone
                    if p.status() == psutil.STATUS_STOPPED:
                        return p
                    time.sleep(0.1)
            except psutil.NoSuchProcess:
                pass
        time.sleep(0.2)


def _leftovers(started: float, out: Path, tag: str) -> list[str]:
    """Processes the run started that are still there (Ray, vLLM, the trainer), zombies aside: those that carry the
    run's tag in their environment (every process started under certify inherits it), not another job's on this
    busy machine that happens to run rocmkit too. A container's processes carry none: the docker check sees them."""
    marks = ("ray::", "raylet", "gcs_server", "VLLM::", "main_ppo", "trl_run", "rocmkit.certify", str(out))
    found = []
    for p in psutil.process_iter(["cmdline", "create_time", "status", "pid"]):
        try:
            cmd = " ".join(p.info["cmdline"] or [])
            if (p.info["create_time"] >= started - 1 and p.info["status"] != psutil.STATUS_ZOMBIE
                    and p.info["pid"] != os.getpid() and any(m in cmd for m in marks)
                    and p.environ().get(TAG) == tag):
                found.append(f"{p.info['pid']} {cmd[:120]}")
        except psutil.Error:
            continue
    return found


def _gone(p: psutil.Process) -> bool:
    try:
        return p.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _churn(path: Path, stop: threading.Event) -> None:
    """Another job writing to this disk: its free space moves every second (by 4 MiB, within its last digit
    Ray prints)."""
    with open(path, "wb") as f:
        while not stop.wait(1.0):
            f.write(b"\0" * (4 << 20))
            f.flush()
            os.fsync(f.fileno())


def freeze_after_first_step(python: str, out: Path, engine: str, *target: str, env: dict | None = None,
                            churn: Path | None = None) -> dict:
    """`churn`: a file written to beside the frozen run, so a disk-full line Ray prints on a timer says
    something new each time (a CI machine's disk, busy with the other tests)."""
    started = time.time()
    tag = uuid.uuid4().hex
    argv = [python, "-m", "rocmkit", "certify", *target, "--engine", engine, "--gpus", "0", "--steps", "40",
            "--stall-timeout", str(STALL_S), "--out", str(out), "--json"]
    err_path = out.parent / f"{out.name}.stderr"  # a file, not a pipe: a full pipe would stall certify itself
    with open(err_path, "w") as err:
        child = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, text=True,
                                 env={**os.environ, "CI": "true", TAG: tag, **(env or {})})
    log = out / "run.log"
    frozen_at = None
    churning = threading.Event()
    try:
        deadline = time.monotonic() + 900
        while not (log.exists() and "step:1 " in log.read_text(errors="replace")):
            assert child.poll() is None, f"certify ended before its first step: {err_path.read_text()[-3000:]}"
            assert time.monotonic() < deadline, "no first step within 900 s"
            time.sleep(0.5)
        frozen = _freeze(engine, started, tag, time.monotonic() + 60)
        frozen_at = time.monotonic()
        if churn is not None:
            threading.Thread(target=_churn, args=(churn, churning), daemon=True).start()
        try:
            stdout, _ = child.communicate(timeout=WITHIN_S + 60)
        except subprocess.TimeoutExpired:  # what certify was doing, and what the run said last: CI shows only this
            said = log.read_text(errors="replace").splitlines()[-12:] if log.exists() else []
            pytest.fail(f"certify did not end within {WITHIN_S + 60} s of the freeze of pid {frozen.pid}; its "
                        f"stderr ends:\n{err_path.read_text()[-2500:]}\nits run.log ends:\n" + "\n".join(said))
    finally:
        churning.set()
        if child.poll() is None:
            child.kill()
        if churn is not None:
            churn.unlink(missing_ok=True)
    took = time.monotonic() - frozen_at
    stderr = err_path.read_text()
    assert child.returncode == 1, stderr[-3000:]
    assert took <= WITHIN_S, f"certify ended {took:.0f} s after the freeze"
    assert _gone(frozen), f"the frozen trainer {frozen.pid} is still there"
    leftovers = _leftovers(started, out, tag)
    assert leftovers == [], leftovers
    cert = json.loads(stdout)
    assert cert["verdict"] == "fail" and cert["run"]["status"] == "stalled", (cert["verdict"], cert["run"])
    stop = cert["run"]["stop"]
    assert stop["reason"] == "stalled" and stop["quiet_s"] >= STALL_S and stop["phase"] in ("rollout", "update",
                                                                                            "weight sync")
    assert any(c["name"] == "no stall or engine error" and not c["passed"] for c in cert["checks"])
    assert "error: the run stalled in" in stderr and f"--stall-timeout {STALL_S}" in stderr
    assert (out / "certificate.md").read_text().count("stopped by the watchdog: stalled") == 1
    if cert["files"].get("picture"):  # an image's own rocmkit (the CPU venvs) has no matplotlib: a note says so
        assert 'id="stopped-here"' in (out / "certificate.svg").read_text()
    else:
        assert any(n.startswith("no picture (certificate.svg): matplotlib is not installed") for n in cert["notes"])
    return cert


@pytest.mark.slow
@pytest.mark.engine
def test_trl_frozen_on_the_host_is_stopped_as_a_stall(tmp_path):
    need("trl")
    freeze_after_first_step(sys.executable, tmp_path / "c", "trl", "--host")


@pytest.mark.slow
def test_verl_frozen_on_the_host_is_stopped_as_a_stall(tmp_path, ray_host):
    python = provisioned("ROCMKIT_VERL_CPU_PYTHON", ".ci/provision/50-cpu-stacks.sh makes the verl-cpu venv",
                         "VERL_CPU")
    home = tmp_path / "home"  # Ray's token must not land in this user's home
    home.mkdir()
    # As on a CI machine whose disk is over 95 % full while other tests write to it: Ray's raylet says so every
    # 10 s, naming a free space that moves. A timer's line is not progress: the stall is still seen in time.
    cert = freeze_after_first_step(python, tmp_path / "c", "verl", "--host", churn=tmp_path / "churn",
                                   env={"HOME": str(home), "RAY_local_fs_capacity_threshold": "0.01"})
    stop = cert["run"]["stop"]
    said = [re.sub(r".*available space: ", "", line) for line in stop["lines"] if "% full, available space: " in line]
    assert stop["waiting_lines"] >= 2 and len(said) >= 2, stop["lines"]
    assert len(set(said)) >= 2, said  # the free space moved: the repeat rule alone took each line for news
    assert any(n.startswith("Ray warned that the disk holding ") for n in cert["notes"]), cert["notes"]


def _image(stack: str) -> str:
    var = stack.upper().replace("-", "_")
    return provisioned(f"ROCMKIT_TEST_{var}_IMAGE", f".ci/image-gate.sh {stack} builds and certifies the image",
                       var)


@pytest.mark.slow
@pytest.mark.docker
@pytest.mark.parametrize("engine, stack", [("trl", "trl-cpu"), ("verl", "verl-cpu")])
def test_a_trainer_frozen_in_its_image_is_stopped_as_a_stall(tmp_path, engine, stack):
    freeze_after_first_step(sys.executable, tmp_path / "c", engine, "--image", _image(stack))
    assert subprocess.run(["docker", "ps", "-q", "--filter", "label=io.rocmkit.run"], capture_output=True,
                          text=True).stdout.strip() == ""
