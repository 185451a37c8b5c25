"""`certify --engine miles`: Miles' own short end-to-end test, run inside a Miles image; the certificate is
written from its exit and its output. rocmkit does not re-implement Miles' loop: the test file starts Ray,
the mooncake master, SGLang and Megatron itself (radixark/miles tests/e2e/short/test_qwen2.5_0.5B_gsm8k_short.py
at MILES_COMMIT), and fails on its own `--ci-test` checks.

What the test needs, read from that file and miles/utils/external_utils/command_utils.py at MILES_COMMIT:
4 GPUs with MILES_TEST_FEW_GPU=1 (else 8); the Miles checkout at /root/miles (the test imports `tests.ci`
and runs `train.py` beside it), Megatron-LM at /root/Megatron-LM (execute_train's megatron_path), writes
to /root/models and /root/datasets (so the container runs as root), and the Hugging Face Hub for
Qwen2.5-0.5B-Instruct and zhuzilin/gsm8k (prepare())."""

from __future__ import annotations

import re
import time
from pathlib import Path

from ..errors import UsageError
from .settings import MILES_DIR

MILES_COMMIT = "31f1ca961a94cb860cec3b2dea34ec332bfa8f76"
TEST_FILE = "tests/e2e/short/test_qwen2.5_0.5B_gsm8k_short.py"
GPU_COUNTS = {4: "1", 8: "0"}  # --gpus → MILES_TEST_FEW_GPU (the test's NUM_GPUS = 4 if FEW_GPU else 8)
MILES_DIR_RE = re.compile(r"^/[A-Za-z0-9_./-]{1,200}$")
NOT_STARTED = (125, 126, 127)  # docker refused the container / the command cannot run / is not there


def check(gpus: int, miles_dir: str) -> None:
    if gpus not in GPU_COUNTS:
        raise UsageError(f"--gpus {gpus}: Miles' short test runs on 4 GPUs (MILES_TEST_FEW_GPU=1) or 8",
                         hint="--engine miles --gpus 4 (or 8); it needs AMD GPUs")
    if not MILES_DIR_RE.match(miles_dir) or ".." in miles_dir.split("/"):
        raise UsageError(f"--miles-dir {miles_dir!r}: an absolute path inside the image")


def command(gpus: int, miles_dir: str = MILES_DIR) -> tuple[list[str], dict[str, str]]:
    """The argv and environment that run the test inside the image, from the Miles checkout."""
    check(gpus, miles_dir)
    argv = ["python3", f"{miles_dir}/{TEST_FILE}"]
    env = {
        "MILES_TEST_FEW_GPU": GPU_COUNTS[gpus],
        # `from tests.ci.ci_register import ...` resolves against the checkout, as in Miles' CI.
        "PYTHONPATH": miles_dir,
        "PYTHONUNBUFFERED": "1",
    }
    return argv, env


def docker_argv(image: str, gpus: int, miles_dir: str, mounts: list[tuple[str, str, str]], *, docker: str = "docker",
                nodes=None, ulimits: bool = True) -> list[str]:
    """The `docker run` of the test: root (it writes /root/models), working directory the checkout."""
    from ..runtime.container import docker_run_argv

    argv, env = command(gpus, miles_dir)
    return docker_run_argv(image, argv, env=env, mounts=mounts, workdir=miles_dir, docker=docker, nodes=nodes,
                           skip_missing=True, ulimits=ulimits, user=None)


def checks_from_output(returncode: int | None, timed_out: bool, lines: list[str]) -> list[dict]:
    """The certificate's checks: the test's own exit (its --ci-test assertions), and whether Ray's job ended
    SUCCEEDED, read from `ray job submit`'s own closing line."""
    from .judge import check

    succeeded = any(re.search(r"Job '[^']+' succeeded", line) for line in lines)
    failed = next((line.strip() for line in lines if re.search(r"Job '[^']+' failed", line)), None)
    exit_detail = ("still running at the deadline" if timed_out else f"exit code {returncode}")
    return [
        check(f"Miles' {Path(TEST_FILE).name} passed", returncode == 0 and not timed_out, exit_detail),
        check("Ray job succeeded", succeeded, failed or ("`ray job submit` reported success" if succeeded
                                                          else "no `Job ... succeeded` line in the output")),
    ]


def certify(s, display, watch):
    """Run the test in s.image (in s.miles_dir) under `watch` and write the certificate (Outcome as
    flow.certify)."""
    from ..runtime.container import run_container
    from . import settings as settings_mod
    from . import workspace
    from .certificate import build
    from .judge import Reason, Status, Verdict, not_certified
    from .judge import check as judge_check
    from .outcome import Outcome, host_facts, run_status, write_certificate
    from .target import resolve
    from .watchdog import Follow

    miles_dir = s.miles_dir

    started = time.monotonic()
    if not s.image:
        raise UsageError("--engine miles runs Miles' test inside a Miles image: give --image",
                         hint="e.g. an image built from the miles stack, or Miles' own rocm/sgl-dev:miles-* images")
    s = settings_mod.check(s)
    check(s.gpus, miles_dir)
    workspace.inspect(s)
    display.stage("target", f"resolving image {s.image}")
    target = resolve(s)
    ws = workspace.temporary(s) if s.dry_run else workspace.take(s)
    try:
        inner, env = command(s.gpus, miles_dir)
        argv = docker_argv(target.image_id, s.gpus, miles_dir, ws.mounts(), docker=target.docker or "docker",
                           nodes=target.nodes)
        settings = {"engine": "miles", "gpus": s.gpus, "test": TEST_FILE, "miles_commit_read": MILES_COMMIT,
                    "miles_dir": miles_dir, "timeout_s": s.timeout, "command": argv, "env": env}
        if s.dry_run:
            import shlex

            plan = {"schema": "rocmkit.certify-plan/v1", "command": argv, "env": env, "shell": shlex.join(argv),
                    "target": target.record, "setup": {}, "setup_failures": [], "verl_validation": None,
                    "tune_validation": None, "notes": target.notes}
            return Outcome(exit_code=0, plan=plan)
        display.stage("training", f"Miles {TEST_FILE} on {s.gpus} GPUs")
        lines: list[str] = []
        follow = Follow(display, watch)

        def on_line(text: str) -> None:
            lines.append(text)
            follow.line(text)

        result, _ = run_container(target.image_id, inner, what="Miles' short e2e test",
                                  timeout=max(1.0, s.timeout - (time.monotonic() - started)),
                                  docker=target.docker or "docker", on_line=on_line, log_path=ws.log,
                                  stop_when=follow.tick,
                                  env=env, mounts=ws.mounts(), workdir=miles_dir, nodes=target.nodes,
                                  skip_missing=True, user=None, host_code=False)  # Miles' test: no rocmkit code
        checks = checks_from_output(result.returncode, result.timed_out, lines)
        stop = follow.watch.stopped
        if stop:
            checks.insert(0, judge_check("no stall or engine error", False, stop.message(s.stall_timeout)))
        if result.timed_out:
            verdict = not_certified(Reason.TIMEOUT, checks)
        elif result.returncode in NOT_STARTED:
            verdict = not_certified(Reason.SETUP, checks)
        else:
            verdict = Verdict(Status.PASS if all(c["passed"] for c in checks) else Status.FAIL, checks)
        run_doc = {"status": run_status(result).value, "exit_code": result.returncode, "wall_s": round(result.seconds, 2),
                   "tail": lines[-40:], "stop": stop.to_json() if stop else None,
                   "longest_silence_s": follow.watch.record()["longest_silence_s"]}
        cert = build(settings=settings, target=target.record, host=host_facts(), verdict=verdict, run=run_doc,
                     device=f"{s.gpus} GPU(s) in the image", notes=target.notes + [
                         f"docker exit {r}: the test could not start in the image" for r in [result.returncode]
                         if r in NOT_STARTED], files={"log": str(ws.log)},
                     timings={"whole_s": round(time.monotonic() - started, 3)}, timeline=follow.watch.timeline)
        write_certificate(ws, cert)
        display.done()
        error = (f"Miles' test ran past --timeout {s.timeout} s and was stopped", f"its log: {ws.log}") \
            if result.timed_out else (stop.message(s.stall_timeout), f"its log: {ws.log}") if stop else None
        return Outcome(exit_code=verdict.exit_code, certificate=cert, error=error, files={"log": str(ws.log)},
                       folder=ws.root)
    finally:
        workspace.release(ws)
