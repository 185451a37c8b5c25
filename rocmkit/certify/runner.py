"""Prepare a certification run, validate it, run it on the host or inside an image, and collect the result."""

from __future__ import annotations

import importlib.util
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import EnvironmentMissing, Failed, UsageError
from . import metrics as metrics_mod
from . import task, verl_overrides

ENGINES = ("trl", "verl")
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1"}
# GRPO settings of the built-in TRL run: a group of 8 answers per prompt, 2 prompts a step, a high
# learning rate for a tiny model (the reward rises within about ten steps on a CPU).
TRL_DEFAULTS = {"lr": 5e-3, "beta": 0.04, "num_generations": 8, "batch_size": 16, "max_completion_length": 12}
# A 0.5B model diverges at the tiny model's rate.
LR_BY_SIZE = {"tiny": 5e-3, "0.5b": 2e-5}


@dataclass
class Settings:
    engine: str = "trl"
    image: str | None = None  # None: run on this host
    model: str | None = None  # None: the built-in tiny model
    data: str | None = None  # None: the built-in task
    steps: int = 16
    gpus: int = 1
    out: Path = Path("rocmkit-certify")
    require_learning: bool | None = None  # None: required only on the built-in default
    size: str = "tiny"  # the built-in model's size: tiny | 0.5b
    rollout: str = "vllm"  # verl's rollout engine
    timeout: int = 3600
    seed: int = 0

    @property
    def builtin(self) -> bool:
        return self.model is None and self.data is None

    @property
    def learning_required(self) -> bool:
        return self.builtin if self.require_learning is None else self.require_learning


@dataclass
class Workspace:
    root: Path
    model_dir: Path
    train_file: Path
    val_file: Path
    reward_file: Path
    log: Path
    run_dir: Path
    files: dict = field(default_factory=dict)


def validate_settings(s: Settings) -> None:
    if s.engine not in ENGINES:
        raise UsageError(f"--engine {s.engine!r}", hint=f"one of: {', '.join(ENGINES)}")
    if s.steps < 4:
        raise UsageError(f"--steps {s.steps}: at least 4 (learning is judged over the first and last quarter)")
    if s.gpus < 0 or (s.engine == "verl" and s.gpus < 1):
        raise UsageError(f"--gpus {s.gpus}: the verl engine needs at least 1 GPU")
    if s.model and not Path(s.model, "config.json").is_file():
        raise UsageError(f"--model {s.model}: not a model folder (no config.json)",
                         hint="give a local Hugging Face model folder; nothing is downloaded")
    if s.data and not (Path(s.data).is_file() and s.data.endswith(".parquet")):
        raise UsageError(f"--data {s.data}: not a parquet file",
                         hint="a parquet file with verl's columns: prompt, data_source, reward_model.ground_truth")


def prepare(s: Settings) -> Workspace:
    """The run folder: model, data, reward function and run configuration, all local files."""
    root = s.out.resolve()
    root.mkdir(parents=True, exist_ok=True)
    ws = Workspace(root=root, model_dir=Path(s.model).resolve() if s.model else root / "model",
                   train_file=Path(s.data).resolve() if s.data else root / "data" / "train.parquet",
                   val_file=root / "data" / "test.parquet", reward_file=root / "reward.py",
                   log=root / "run.log", run_dir=root / "run")
    if s.model is None and not (ws.model_dir / "config.json").exists():
        from . import tinymodel

        tinymodel.build(ws.model_dir, size=s.size, seed=s.seed)
    if s.data is None:
        task.write_dataset(root / "data", train_rows=max(64, 4 * s.steps), seed=s.seed)
    elif not ws.val_file.exists():
        shutil.copyfile(ws.train_file, ws.val_file)  # verl builds a val set even when validation is off
    shutil.copyfile(Path(task.__file__), ws.reward_file)  # verl loads the reward function from a file
    if ws.run_dir.exists():
        shutil.rmtree(ws.run_dir)
    ws.run_dir.mkdir()
    return ws


def _paths_to_mount(s: Settings, ws: Workspace) -> list[Path]:
    out = [ws.root]
    for p in (ws.model_dir, ws.train_file.parent):
        if not str(p).startswith(str(ws.root)):
            out.append(p)
    return out


def inner_command(s: Settings, ws: Workspace) -> tuple[list[str], dict[str, str]]:
    """The training command and its environment, as they run in the target (host or image)."""
    env = dict(OFFLINE_ENV)
    python = "python3" if s.image else sys.executable
    if s.engine == "trl":
        cfg = {"model_dir": str(ws.model_dir), "train_file": str(ws.train_file), "out_dir": str(ws.run_dir),
               "steps": s.steps, "seed": s.seed, "device": "cpu" if s.gpus == 0 else "auto",
               **TRL_DEFAULTS, "lr": LR_BY_SIZE[s.size] if s.model is None else TRL_DEFAULTS["lr"] / 250}
        (ws.root / "trl-run.json").write_text(json.dumps(cfg, indent=1))
        return [python, "-m", "rocmkit.certify.trl_run", str(ws.root / "trl-run.json")], env
    env["VERL_FILE_LOGGER_PATH"] = str(ws.run_dir / "metrics.jsonl")
    env["PYTORCH_ALLOC_CONF"] = "expandable_segments:True"
    return [python, "-m", "verl.trainer.main_ppo", *verl_args(s, ws)], env


def verl_args(s: Settings, ws: Workspace) -> list[str]:
    return verl_overrides.overrides(verl_overrides.VerlRun(
        model_dir=str(ws.model_dir), train_file=str(ws.train_file), val_file=str(ws.val_file),
        reward_file=str(ws.reward_file), gpus=s.gpus, steps=s.steps, rollout=s.rollout))


def wrap(s: Settings, ws: Workspace, argv: list[str], env: dict[str, str]) -> list[str]:
    """On the host: argv itself. For an image: the `docker run` with the ROCm device flags."""
    if not s.image:
        return argv
    from ..container import docker_run_argv
    from ..engine import CLI_ENV_VAR, candidate_clis

    clis = [os.environ[CLI_ENV_VAR]] if os.environ.get(CLI_ENV_VAR) else candidate_clis()
    mounts = [(str(p), str(p), "rw" if p == ws.root else "ro") for p in _paths_to_mount(s, ws)]
    return docker_run_argv(s.image, argv, env=env, mounts=mounts, workdir=str(ws.root),
                           docker=clis[0] if clis else "docker", skip_missing=True)


def check_target(s: Settings) -> dict:
    """What the run will use, checked before anything runs: the image (id, manifest) or the host's packages."""
    if s.image:
        from ..engine import Engine

        engine = Engine.connect()
        info = engine.image(s.image)
        if info is None:
            raise UsageError(f"image {s.image!r} is not in the Docker engine", hint="rocmkit build it, or docker pull it")
        manifest = engine.read_json(info.id, "/opt/rocmkit/manifest.json")
        return {"image": s.image, "id": info.id, "labels": info.labels, "manifest": manifest}
    needed = ["torch", "transformers"] + (["trl", "datasets"] if s.engine == "trl" else ["verl", "hydra"])
    missing = [m for m in needed if importlib.util.find_spec(m) is None]
    if missing:
        extra = "certify" if s.engine == "trl" else "verl"
        raise EnvironmentMissing(f"the {s.engine} engine needs {', '.join(missing)} on this host",
                                 hint=f"pip install 'rocmkit[{extra}]', or certify an image with --image")
    from importlib.metadata import PackageNotFoundError, version

    versions = {}
    for name in ("torch", "transformers", "trl", "datasets", "verl", "vllm", "sglang", "ray"):
        try:
            versions[name] = version(name)
        except PackageNotFoundError:
            versions[name] = None
    return {"host": True, "python": sys.version.split()[0], "packages": versions}


def validate_verl(s: Settings, ws: Workspace) -> dict:
    """Run rocmkit.certify.verl_check in the target against its own verl; invalid overrides are an error
    before anything is launched."""
    ov_file = ws.root / "verl-overrides.json"
    ov_file.write_text(json.dumps(verl_args(s, ws), indent=1))
    python = "python3" if s.image else sys.executable
    argv = wrap(s, ws, [python, "-m", "rocmkit.certify.verl_check", str(ov_file)], dict(OFFLINE_ENV))
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=600,
                              env={**os.environ, **OFFLINE_ENV} if not s.image else None)
    except subprocess.TimeoutExpired:
        raise Failed("validating the verl overrides took over 600 s") from None
    result = None
    for line in reversed(proc.stdout.strip().splitlines()):
        try:
            result = json.loads(line)
            break
        except ValueError:
            continue
    if result is None:
        raise Failed(f"the verl override check did not run (exit {proc.returncode})",
                     hint="\n".join((proc.stderr or proc.stdout).strip().splitlines()[-8:]))
    if not result["ok"]:
        raise UsageError(f"verl {result.get('verl')} rejects the run's configuration: " + "; ".join(result["errors"]),
                         hint="nothing was launched")
    return result


def execute(s: Settings, ws: Workspace, argv: list[str], env: dict[str, str]) -> dict:
    """Run it; the whole output goes to run.log (and to the terminal). Returns status and timings."""
    started = time.monotonic()
    with open(ws.log, "w") as log:
        try:
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                    env={**os.environ, **env} if not s.image else None, cwd=ws.root)
        except FileNotFoundError as exc:
            raise EnvironmentMissing(f"cannot start {argv[0]}: {exc}") from None
        try:
            for line in proc.stdout:
                log.write(line)
                if os.environ.get("ROCMKIT_CERTIFY_ECHO", "1") == "1":
                    sys.stderr.write(line)
            proc.wait(timeout=max(1, s.timeout - (time.monotonic() - started)))
        except subprocess.TimeoutExpired:
            proc.kill()
            return {"status": "timed out", "exit_code": None, "wall_s": time.monotonic() - started}
    status = "finished" if proc.returncode == 0 else "crashed"
    return {"status": status, "exit_code": proc.returncode, "wall_s": time.monotonic() - started}


def read_steps(s: Settings, ws: Workspace) -> dict[int, dict[str, float]]:
    jsonl = ws.run_dir / "metrics.jsonl"
    steps = metrics_mod.read_jsonl(jsonl) if jsonl.exists() else {}
    if not steps and ws.log.exists():  # verl without its file logger: fall back to the console lines
        steps = metrics_mod.read_console(ws.log.read_text(errors="replace"))
    return steps


def run_info(ws: Workspace) -> dict:
    p = ws.run_dir / "run.json"
    try:
        return json.loads(p.read_text()) if p.exists() else {}
    except ValueError:
        return {}


def probe_figures(s: Settings) -> dict | None:
    """Level-2 GPU probes of the doctor (GEMM, HBM, host links, all-reduce) for the certificate: measured
    where the run happens (in-process on the host, `rocmkit doctor --image` for an image). None on the CPU."""
    if s.gpus == 0:
        return None
    if not s.image:
        from ..doctor.probes import findings_for, measure

        doc = measure(gpus=list(range(s.gpus)), with_allreduce=s.gpus > 1)
        return {"figures": doc, "findings": [f.to_json() for f in findings_for(doc)]}
    proc = subprocess.run([sys.executable, "-m", "rocmkit", "doctor", "--image", s.image, "--level", "2", "--only",
                           "probe", "--json"], capture_output=True, text=True, timeout=900)
    try:
        doc = json.loads(proc.stdout)
    except ValueError:
        return {"error": "the probes did not run in the image: " + " ".join(proc.stderr.strip().splitlines()[-3:])}
    return {"findings": [f for f in doc.get("findings", []) if f["id"].startswith("probe")]}


def shell_line(argv: list[str], env: dict[str, str], image: bool) -> str:
    prefix = "" if image else " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + " "
    return prefix + shlex.join(argv)
