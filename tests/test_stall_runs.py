"""Real certifications made to hang in a known place, and the stall report they end with:

- verl on the CPU, its rollout's rank stopped inside the second weight sync (rocmkit/stall/testhook.py):
  under --stall-timeout 30 it must exit 1 within 90 s of the hang, the report naming the stopped process and
  the processes waiting for it, and nothing left running;
- TRL's vLLM server mode on the CPU, the server stopped after the first step: the trainer's request is never
  answered.

Each takes 3-5 minutes of a 2-core machine, so they run only when asked (ROCMKIT_RUN_HANG_TESTS=1), not in CI's
default run; they write the reports they got to tests/data/stall/, which the cheap tests below judge every time
(keep those files in git after running them)."""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import psutil
import pytest
from provisioned import provisioned
from rayhost import in_this_pid_namespace
from test_certify_stall import TAG, _leftovers

DATA = Path(__file__).resolve().parent / "data" / "stall"
STALL_S, WITHIN_S = 30, 90
# TRL's server start-up prints to its own server.log, not the run's log: on a 2-core machine the run's log is
# silent for more than 30 s while vLLM's CPU engine loads, so the TRL hang runs with a longer stall timeout
TRL_STALL_S, TRL_WITHIN_S = 90, 150
hang_tests = pytest.mark.skipif(os.environ.get("ROCMKIT_RUN_HANG_TESTS") != "1",
                                reason="a real hang costs 3-5 minutes: ROCMKIT_RUN_HANG_TESTS=1 runs it")


def _certify(python: str, out: Path, engine: str, *extra: str, env: dict, stall_s: int = STALL_S) -> subprocess.Popen:
    argv = [python, "-m", "rocmkit", "certify", "--host", "--engine", engine, "--gpus", "0", "--steps", "40",
            "--stall-timeout", str(stall_s), "--out", str(out), "--json", *extra]
    err = open(out.parent / f"{out.name}.stderr", "w")  # a file: a full pipe would stall certify itself
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=err, text=True,
                            env={**os.environ, "CI": "true", TAG: str(out), **env})  # tags its processes


def _wait_for(log: Path, pattern: str, child: subprocess.Popen, limit_s: float = 900) -> re.Match:
    deadline = time.monotonic() + limit_s
    while True:
        text = log.read_text(errors="replace") if log.exists() else ""
        m = re.search(pattern, text)
        if m:
            return m
        assert child.poll() is None, f"certify ended before {pattern!r}"
        assert time.monotonic() < deadline, f"no {pattern!r} within {limit_s} s"
        time.sleep(0.5)


def _finish(child: subprocess.Popen, hung_at: float, out: Path, started: float, name: str,
            within_s: int = WITHIN_S) -> dict:
    try:
        stdout, _ = child.communicate(timeout=within_s + 60)
    finally:
        if child.poll() is None:
            child.kill()
    took = time.monotonic() - hung_at
    assert child.returncode == 1, (out.parent / f"{out.name}.stderr").read_text()[-3000:]
    assert took <= within_s, f"certify ended {took:.0f} s after the hang"
    assert _leftovers(started, out, str(out)) == []
    cert = json.loads(stdout)
    report = cert["run"]["stall_report"]
    DATA.mkdir(parents=True, exist_ok=True)  # kept for the cheap tests below and the docs
    (DATA / f"{name}.json").write_text(json.dumps({"exit_code": cert["exit_code"], "ended_after_hang_s": round(took, 1),
                                                    "stop": cert["run"]["stop"], "stall_report": report}, indent=1) + "\n")
    with open(out / "stall" / "stacks.txt", "rb") as src, gzip.open(DATA / f"{name}.stacks.txt.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    return cert


@pytest.mark.slow
@hang_tests
def test_verl_hung_in_its_weight_sync_names_the_stopped_rollout(tmp_path, ray_host):
    python = provisioned("ROCMKIT_VERL_CPU_PYTHON", ".ci/provision/50-cpu-stacks.sh makes the verl-cpu venv",
                         "VERL_CPU")
    home = tmp_path / "home"  # Ray's token must not land in this user's home
    home.mkdir()
    out, started = tmp_path / "c", time.time()
    child = _certify(python, out, "verl", env={"HOME": str(home), "ROCMKIT_TEST_STALL": "weight-sync:0:2"})
    m = _wait_for(out / "run.log", r"rocmkit test hook: pid (\d+) stops itself in weight-sync", child)
    cert = _finish(child, time.monotonic(), out, started, "verl-weight-sync")
    judge_verl(cert["run"]["stall_report"], int(m.group(1)))


@pytest.mark.slow
@pytest.mark.engine
@hang_tests
def test_trl_server_that_never_answers_is_named(tmp_path):
    python = provisioned("ROCMKIT_TRL_CPU_PYTHON", ".ci/provision/50-cpu-stacks.sh makes the trl-cpu venv",
                         "TRL_CPU")
    out, started = tmp_path / "c", time.time()
    child = _certify(python, out, "trl", "--vllm-mode", "server", env={}, stall_s=TRL_STALL_S)
    _wait_for(out / "run.log", r"step:1 ", child)
    # the server trl_launch started: on the CPU, vLLM's OpenAI server with the weights through a file
    # (certify/intarget/file_weights.py); TRL's `vllm-serve` (or rocmkit's CPU wrapper of it) elsewhere
    server = next(p for p in psutil.process_iter(["cmdline", "create_time"])
                  if p.info["create_time"] >= started - 1 and in_this_pid_namespace(p.pid)  # not a container's
                  and re.search(r"vllm_cpu_serve|vllm-serve|vllm\.entrypoints", " ".join(p.info["cmdline"] or [])))
    server.send_signal(signal.SIGSTOP)
    cert = _finish(child, time.monotonic(), out, started, "trl-server", within_s=TRL_WITHIN_S)
    judge_trl(cert["run"]["stall_report"], server.pid)


# ---- the kept reports, judged on every run (cheap)

def judge_verl(report: dict, stopped_pid: int) -> None:
    v = report["verdict"]
    assert v["health"] == "stuck"
    assert [w["pid"] for w in v["waits_for"]] == [stopped_pid], v
    if "lines" in v:  # today's verdict: the stopped process first, the plumbing (driver, storage units) folded
        assert v["lines"][0].startswith(f"the job waits for pid {stopped_pid} (vLLM"), v["lines"]
        assert v["lines"][-1].startswith("and ") and "verl driver" in v["lines"][-1] and len(v["lines"]) <= 6
    assert v["waits_for"][0]["role"].startswith("vLLM") or "Worker" in v["waits_for"][0]["role"], v["waits_for"]
    waiting = {w["role"]: w["kind"] for w in v["waiting"]}
    assert waiting.get("Ray actor WorkerDict") in ("socket read", "queue get", "lock"), waiting  # verl's sender
    assert waiting.get("Ray actor TaskRunnerV1") == "ray get" or waiting.get("verl driver") == "ray get", waiting
    assert report["took_s"] <= 30


def judge_trl(report: dict, stopped_pid: int) -> None:
    v = report["verdict"]
    assert [w["pid"] for w in v["waits_for"]] == [stopped_pid], v
    if "lines" in v:
        assert v["lines"][0].startswith(f"the job waits for pid {stopped_pid} ("), v["lines"]
    assert v["waits_for"][0]["role"] in ("TRL's vLLM server", "vLLM server")
    trainer = [w for w in v["waiting"] if w["role"] == "TRL trainer"]
    assert trainer and trainer[0]["kind"] == "socket read", v["waiting"]
    assert report["took_s"] <= 30


def _kept(name: str) -> dict:
    path = DATA / f"{name}.json"
    if not path.exists():
        pytest.skip(f"{path} not recorded yet: ROCMKIT_RUN_HANG_TESTS=1 pytest tests/test_stall_runs.py")
    return json.loads(path.read_text())


def _rejudged(kept: dict) -> dict:
    """The kept report with its verdict as today's code gives it (the processes as they were recorded)."""
    from rocmkit.stall.verdict import judge

    return {**kept["stall_report"], "verdict": judge(kept["stall_report"]["processes"])}


def test_the_kept_verl_report_names_the_stopped_rollout():
    kept = _kept("verl-weight-sync")
    judge_verl(_rejudged(kept), next(p["pid"] for p in kept["stall_report"]["processes"] if p["state"] == "stopped"))
    assert kept["exit_code"] == 1 and kept["ended_after_hang_s"] <= WITHIN_S and kept["stop"]["reason"] == "stalled"
    stopped = [p["pid"] for p in kept["stall_report"]["processes"] if p["state"] == "stopped"]
    judge_verl(kept["stall_report"], stopped[0])
    with gzip.open(DATA / "verl-weight-sync.stacks.txt.gz", "rt") as f:
        dumps = f.read()
    # the stopped process's own stack: verl's weight sync into vLLM (the hook replaced the receiver, so its frame
    # is the hook's, called from verl's update_weights_from_ipc)
    own = dumps.split(f"=== pid {stopped[0]} ", 1)[1].split("\n=== ", 1)[0]
    assert "[stopped]" in own and "update_weights_from_ipc" in own


def test_the_kept_trl_report_names_the_silent_server():
    kept = _kept("trl-server")
    judge_trl(_rejudged(kept), next(p["pid"] for p in kept["stall_report"]["processes"] if p["state"] == "stopped"))
    assert kept["exit_code"] == 1 and kept["ended_after_hang_s"] <= TRL_WITHIN_S
    stopped = [p["pid"] for p in kept["stall_report"]["processes"] if p["state"] == "stopped"]
    judge_trl(kept["stall_report"], stopped[0])
