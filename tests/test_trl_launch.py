"""TRL's vLLM modes (`certify --engine trl --vllm-mode server|colocate`): the launch's argv and device sets,
the background process groups and the server's health wait against real processes and a real HTTP server,
and (with the trl-cpu venv of .ci/provision/50-cpu-stacks.sh) a real server-mode run on this host's CPU whose
server is killed mid-run. CI sets ROCMKIT_REQUIRE_TRL_CPU=1, so a missing venv fails. The run that certifies
is CI's TRL gate (.ci/image-gate.sh trl-cpu), inside the trl-cpu image: repeating it here would add minutes to CI."""

from __future__ import annotations

import http.server
import json
import os
import signal
import subprocess
import sys
import threading
import time

import psutil
import pytest
from provisioned import provisioned

from rocmkit.runtime import proc
from rocmkit.certify.intarget import trl_launch
from rocmkit.certify.intarget import vllm_cpu_serve


def trl_cpu_python() -> str:
    return provisioned("ROCMKIT_TRL_CPU_PYTHON", ".ci/provision/50-cpu-stacks.sh makes the trl-cpu venv", "TRL_CPU")


def cfg(device="cpu", zero=None):
    return {"model_dir": "/m", "max_model_len": 256, "device": device, "zero": zero}


def test_the_seed_004_shape_server_on_the_first_gpu_trainer_on_the_rest():
    assert trl_launch.device_sets(8, "server") == ("0", "1,2,3,4,5,6,7")
    assert trl_launch.device_sets(2, "colocate") == (None, "0,1")
    assert trl_launch.device_sets(0, "server") == (None, None)
    argv = trl_launch.trainer_argv("py", "c.json", cfg("auto", zero=2), 7)
    s = " ".join(argv)
    assert "accelerate.commands.launch --num_processes 7" in s and "--multi_gpu" in argv
    assert "--use_deepspeed --zero_stage 2" in s and s.endswith("-m rocmkit.certify.intarget.trl_run c.json")
    cpu = trl_launch.trainer_argv("py", "c.json", cfg(), 1)
    assert "--cpu" in cpu and "--multi_gpu" not in cpu and "--use_deepspeed" not in cpu
    server = trl_launch.server_argv("py", cfg(), 8123)
    assert server[:3] == ["py", "-m", "rocmkit.certify.intarget.vllm_cpu_serve"] and "127.0.0.1" in server and "8123" in server
    assert "rocmkit.certify.intarget.file_weights.FileWeightsWorker" in server  # the CPU's weight sync
    gpu = trl_launch.server_argv("py", cfg("auto"), 8123)
    assert gpu[:4] == ["py", "-m", "trl.cli.main", "vllm-serve"] and "--worker-extension-cls" not in gpu
    # TRL's own command, with vLLM's CLI (which needs a distribution named vllm) swapped for its api_server
    trl_cmd = ["py", "-m", "vllm.entrypoints.cli.main", "serve", "/m", "--host", "h", "--max-logprobs", "-1"]
    assert vllm_cpu_serve.api_server_command(trl_cmd) == [
        "py", "-m", "vllm.entrypoints.openai.api_server", "--model", "/m", "--host", "h", "--max-logprobs", "-1"]
    # ROCm's torch applies HIP_VISIBLE_DEVICES, then CUDA_VISIBLE_DEVICES on top: exactly one is set
    assert trl_launch.visible_env("1,2", hip=True) == {"HIP_VISIBLE_DEVICES": "1,2"}
    assert trl_launch.visible_env("0", hip=False) == {"CUDA_VISIBLE_DEVICES": "0"}


@pytest.mark.parametrize("args,said", [
    (["--vllm-mode", "server", "--gpus", "1"], "leaves none to train on"),
    (["--engine", "verl", "--vllm-mode", "server"], "is TRL's"),
    (["--vllm-mode", "server", "--gpus", "0", "--zero", "2"], "on GPUs"),
    (["--zero", "3", "--gpus", "2"], "add --vllm-mode"),
    (["--vllm-mode", "colocate", "--gpus", "0"], "colocate needs GPUs"),
])
def test_impossible_combinations_are_usage_errors(tmp_path, args, said):
    r = subprocess.run([sys.executable, "-m", "rocmkit", "certify", "--out", str(tmp_path / "c"), *args],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and said in r.stderr, r.stderr
    assert not (tmp_path / "c").exists() and "Traceback" not in r.stderr


def test_a_background_process_is_stopped_with_everything_it_started(tmp_path):
    with proc.Background(["sh", "-c", "sleep 300 & sleep 300 & wait"], log_path=tmp_path / "a.log") as a, \
            proc.Background(["sleep", "300"]) as b:
        time.sleep(0.5)
        assert a.poll() is None
        tree = [p.pid for p in psutil.Process(a.child.pid).children(recursive=True)]
        assert len(tree) == 2
        a.stop(grace_s=2)
        assert b.poll() is None  # a sibling is not part of a's tree
    assert b.child.returncode is not None
    assert not [pid for pid in tree + [a.child.pid, b.child.pid] if psutil.pid_exists(pid)
                and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]


class _Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health/" else 404)
        self.end_headers()

    def log_message(self, *args):
        pass


def test_the_health_wait_answers_ready_gone_or_late(tmp_path):
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Health)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        with proc.Background(["sleep", "60"]) as alive:
            url = f"http://127.0.0.1:{httpd.server_address[1]}/health/"
            assert trl_launch.wait_healthy(url, alive, 10) is None
            late = trl_launch.wait_healthy(f"http://127.0.0.1:{trl_launch.free_port()}/health/", alive, 1)
            assert "was not healthy" in late and "within 1 s" in late
    finally:
        httpd.shutdown()
    with proc.Background(["sh", "-c", "exit 7"]) as gone:
        why = trl_launch.wait_healthy("http://127.0.0.1:9/health/", gone, 30)
    assert why == "the vLLM server (trl vllm-serve) exited with 7 before it was ready"


def _certify(python, out, *extra):
    return [python, "-m", "rocmkit", "certify", "--host", "--engine", "trl", "--vllm-mode", "server", "--gpus", "0",
            "--out", str(out), "--progress", "plain", *extra]


def _left(out) -> list[str]:
    found = []
    for p in psutil.process_iter(["cmdline"]):
        with __import__("contextlib").suppress(psutil.Error):
            if str(out) in " ".join(p.info["cmdline"] or []) and p.status() != psutil.STATUS_ZOMBIE:
                found.append(" ".join(p.info["cmdline"])[:200])
    return found


@pytest.mark.slow
@pytest.mark.engine
def test_killing_the_server_mid_run_fails_naming_it_and_leaves_nothing(tmp_path):
    python = trl_cpu_python()
    out = tmp_path / "cert"
    run = subprocess.Popen(_certify(python, out, "--steps", "40"), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, env={**os.environ, "CI": "true"})
    try:
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline and run.poll() is None:
            log = (out / "run.log").read_text(errors="replace") if (out / "run.log").exists() else ""
            if "step:1 " in log:
                break
            time.sleep(1)
        assert run.poll() is None, run.communicate()[1][-3000:]
        # the API server (vllm_cpu_serve execs vLLM's api_server module in its place), by its model path
        servers = [p for p in psutil.process_iter(["cmdline"])
                   if "vllm.entrypoints.openai.api_server" in (p.info["cmdline"] or [])
                   and str(out) in " ".join(p.info["cmdline"] or [])]
        assert servers, "no vLLM server process found"
        for p in servers:
            os.kill(p.pid, signal.SIGKILL)
        _, stderr = run.communicate(timeout=300)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 1, stderr[-3000:]
    said = next(x for x in stderr.splitlines() if x.startswith("error: "))
    assert said.startswith("error: TRL's launcher stopped the run in step ") and (
        f"the vLLM server (trl vllm-serve) (pid {servers[0].pid}) was killed by SIGKILL during training; the trainer "
        "was stopped") in said, stderr[-3000:]
    assert json.loads((out / "certificate.json").read_text())["cause"]["ended"]["signal"] == "SIGKILL"
    assert str(out / "server.log") in stderr
    assert json.loads((out / "certificate.json").read_text())["verdict"] == "fail"
    assert not _left(out)
