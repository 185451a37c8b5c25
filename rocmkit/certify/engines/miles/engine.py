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
from pathlib import Path

from ....errors import UsageError
from ...judge import Reason, Status, Verdict, not_certified
from ...settings import MILES_DIR, Settings
from ...watchdog import Watch
from ..base import CertifyEngine, ClusterJob

MILES_COMMIT = "31f1ca961a94cb860cec3b2dea34ec332bfa8f76"
TEST_FILE = "tests/e2e/short/test_qwen2.5_0.5B_gsm8k_short.py"
GPU_COUNTS = {4: "1", 8: "0"}  # --gpus → MILES_TEST_FEW_GPU (the test's NUM_GPUS = 4 if FEW_GPU else 8)
MILES_DIR_RE = re.compile(r"^/[A-Za-z0-9_./-]{1,200}$")
NOT_STARTED = (125, 126, 127)  # docker refused the container / the command cannot run / is not there
# Miles' Ray launch under `rocmkit slurm`, as radixark/miles miles/utils/external_utils/command_utils.py
# execute_train does it (at MILES_COMMIT): `ray job submit` to the head's dashboard, `python3 <repo>/train.py`
# with the job's runtime env. The cluster is already up (its MILES_SCRIPT_EXTERNAL_RAY=1 path), so only the
# submission runs.
MILES_ENTRYPOINT = ("python3", "/root/miles/train.py")
MILES_SUBMIT = ("ray", "job", "submit", "--address=http://127.0.0.1:8265")
MILES_RUNTIME_ENV = (
    ("PYTHONUNBUFFERED", "1"),
    ("CUDA_DEVICE_MAX_CONNECTIONS", "1"),  # Megatron backend
    ("NCCL_NVLS_ENABLE", "0"),  # Miles probes NVLink with nvidia-smi; AMD GPUs have none
    ("no_proxy", "127.0.0.1,%s"),
    ("MASTER_ADDR", "%s"),
    ("PYTHONPATH", "/root/Megatron-LM:/root/miles"),  # execute_train's megatron_path and the repo root
)
MILES_RESERVED = ("--actor-num-nodes", "--actor-num-gpus-per-node")


class MilesJob(ClusterJob):
    def check_argument(self, arg: str) -> None:
        if arg.split("=", 1)[0] in self.reserved:
            raise UsageError(f"argument {arg!r}: rocmkit fills --actor-num-nodes and --actor-num-gpus-per-node from "
                             "--nodes and --gpus-per-node")

    def driver(self, args, entrypoint, nodes, gpus_per_node):
        return [*entrypoint, self.reserved[0], str(nodes), self.reserved[1], str(gpus_per_node), *args]


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
    from ....runtime.container import docker_run_argv

    argv, env = command(gpus, miles_dir)
    return docker_run_argv(image, argv, env=env, mounts=mounts, workdir=miles_dir, docker=docker, nodes=nodes,
                           skip_missing=True, ulimits=ulimits, user=None)


def checks_from_output(returncode: int | None, timed_out: bool, lines: list[str]) -> list[dict]:
    """The certificate's checks: the test's own exit (its --ci-test assertions), and whether Ray's job ended
    SUCCEEDED, read from `ray job submit`'s own closing line."""
    from ...judge import check

    succeeded = any(re.search(r"Job '[^']+' succeeded", line) for line in lines)
    failed = next((line.strip() for line in lines if re.search(r"Job '[^']+' failed", line)), None)
    exit_detail = ("still running at the deadline" if timed_out else f"exit code {returncode}")
    return [
        check(f"Miles' {Path(TEST_FILE).name} passed", returncode == 0 and not timed_out, exit_detail),
        check("Ray job succeeded", succeeded, failed or ("`ray job submit` reported success" if succeeded
                                                          else "no `Job ... succeeded` line in the output")),
    ]


class Miles(CertifyEngine):
    """Miles' own short e2e test in a Miles image, under the shared steps: no setup of rocmkit's runs in the image
    (the test brings everything), the run is the test in the Miles checkout as root, and the verdict is the test's
    own exit and Ray's job status."""

    name = "miles"
    options = ("miles_dir",)
    first_phase = "Miles' test"
    command_name = "Miles' test"
    title = "Miles"
    setup_in_target = False
    probes = False
    cluster = MilesJob(entrypoint=MILES_ENTRYPOINT, reserved=MILES_RESERVED,
                       submit=MILES_SUBMIT, runtime_env=MILES_RUNTIME_ENV)

    cli_rank = 2

    def cli_options(self):
        from ..base import CliOption

        return [CliOption("engine", ("--miles-dir",), dict(
            default=Settings.miles_dir, show_default=True,
            help="With --engine miles: the Miles checkout inside the image (its tests/ and train.py)."))]

    def cli_settings(self, values: dict, ctx) -> dict:
        return {"miles_dir": values["miles_dir"]}

    def check(self, s: Settings) -> None:
        if not s.image:
            raise UsageError("--engine miles runs Miles' test inside a Miles image: give --image",
                             hint="e.g. an image built from the miles stack, or Miles' own rocm/sgl-dev:miles-* images")
        check(s.gpus, s.miles_dir)

    def refuse_foreign(self, s: Settings) -> None:
        if s.miles_dir != MILES_DIR:
            raise UsageError("--miles-dir names the Miles checkout inside a Miles image: it needs --engine miles",
                             hint="add --engine miles, or leave out --miles-dir")

    def settings_fields(self, s: Settings) -> dict:
        _, env = command(s.gpus, s.miles_dir)
        return {"test": TEST_FILE, "miles_commit_read": MILES_COMMIT, "miles_dir": s.miles_dir, "env": env}

    def command(self, s: Settings, ws, target, cfg: dict) -> tuple[list[str], dict[str, str]]:
        return command(s.gpus, s.miles_dir)

    def target_argv(self, s: Settings, target, inner, env, ws) -> list[str]:
        return docker_argv(target.image_id or s.image, s.gpus, s.miles_dir, ws.mounts(),
                           docker=target.docker or "docker", nodes=target.nodes)

    def watch(self, s: Settings) -> Watch:
        # Miles' output has no step lines rocmkit reads and its own retries print tracebacks: the stall rule only
        return Watch(0, stall_s=s.stall_timeout or float("inf"), first_phase=self.first_phase, fatal=False)

    def execute(self, s: Settings, target, ws, inner, env, *, timeout: float, follow):
        from ....runtime.container import run_container

        result, _ = run_container(target.image_id, inner, what="Miles' short e2e test", timeout=timeout,
                                  docker=target.docker or "docker", on_line=follow.line, log_path=ws.log,
                                  stop_when=follow.tick, on_stop=follow.before_stop, env=env, mounts=ws.mounts(), workdir=s.miles_dir,
                                  nodes=target.nodes, skip_missing=True, user=None,
                                  host_code=False)  # Miles' test: no rocmkit code in the image
        return result

    def device(self, s: Settings, report: dict) -> str | None:
        return f"{s.gpus} GPU(s) in the image"

    def verdict(self, s, steps, status, run, probes, extra, ws) -> Verdict:
        checks = extra + checks_from_output(run.returncode, run.timed_out, _lines(ws))
        if run.timed_out:
            return not_certified(Reason.TIMEOUT, checks)
        if run.returncode in NOT_STARTED:
            return not_certified(Reason.SETUP, checks)
        return Verdict(Status.PASS if all(c["passed"] for c in checks) else Status.FAIL, checks)

    def run_record(self, s: Settings, report: dict, run, ws) -> dict | None:
        return {"tail": _lines(ws)[-40:]}

    def run_notes(self, run) -> list[str]:
        return ([f"docker exit {run.returncode}: the test could not start in the image"]
                if run.returncode in NOT_STARTED else [])


def _lines(ws) -> list[str]:
    return ws.log.read_text(errors="replace").splitlines() if ws.log.exists() else []


ENGINE = Miles
