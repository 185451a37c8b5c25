"""One certification, start to end: check the options and the run folder, resolve the target, set up inside
it (imports, GPUs, model, data, verl's own check of the overrides), measure the GPUs, train under the
deadline, judge, and write the certificate. What a step decides is a pure function below it; what it
touches goes through the workspace, the target and the runner."""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..runtime.container import DOCKER_ERROR
from ..errors import UsageError
from ..fileio import write_atomic
from ..output import dumps
from ..progress import Display
from . import metrics as metrics_mod
from . import settings as settings_mod
from . import setup as setup_mod
from . import verl_overrides, verl_report, watchdog, workspace
from .certificate import build, markdown
from .judge import Reason, RunStatus, Status, Verdict, check, judge, not_certified
from .settings import SERVER_READY_S, TRL_DEFAULTS, TRL_LR, TRL_MAX_MODEL_LEN, Backend, Engine, Rollout, Settings
from .target import NOT_EXECUTABLE, NOT_FOUND, Target, resolve
from .workspace import Workspace

OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1"}
# verl's learning rate on the built-in task; a user's model gets a rate a real model survives. The tiny model
# learns the task in 12 steps at 5e-3 (five CPU runs: the reward rose 0.79-0.93, the judge needs 0.3).
VERL_LR = {"tiny": 5e-3, "0.5b": 2e-5, "user": 1e-5}
# The built-in answer is a number: 16 tokens hold it with room; a user's data gets verl's usual room.
VERL_RESPONSE_TOKENS = {"builtin": 16, "user": 32}


@dataclass
class Outcome:
    exit_code: int
    certificate: dict | None = None
    plan: dict | None = None  # --dry-run
    error: tuple[str, str | None] | None = None  # (message, hint) said after the certificate when it could not run
    files: dict = field(default_factory=dict)
    folder: Path | None = None  # where the certificate was written


# ---- pure: what runs ----

def verl_run(s: Settings, ws: Workspace, target: Target) -> verl_overrides.VerlRun:
    size = s.size if s.model is None else "user"
    return verl_overrides.VerlRun(
        model_dir=str(ws.model_dir), train_file=str(ws.train_file), val_file=str(ws.val_file),
        reward_file=str(ws.reward_file), gpus=s.gpus, steps=s.steps, rollout=s.rollout.value, lr=VERL_LR[size],
        max_response_length=VERL_RESPONSE_TOKENS["builtin" if s.data is None else "user"],
        ray_temp_dir=f"/tmp/rocmkit-ray-{target.run_id[:8]}", backend=s.backend.value, train_tp=s.tp, train_pp=s.pp,
        rollout_graphs=s.rollout_graphs)


def config(s: Settings, ws: Workspace, target: Target) -> dict:
    """certify.json: everything the setup and the run read in the target."""
    cfg = {"engine": s.engine.value, "gpus": s.gpus, "steps": s.steps, "seed": s.seed, "size": s.size,
           "rollout": s.rollout.value, "builtin_model": s.model is None, "builtin_data": s.data is None,
           "model_dir": str(ws.model_dir), "train_file": str(ws.train_file), "val_file": str(ws.val_file),
           "reward_file": str(ws.reward_file), "run_dir": str(ws.run_dir),
           "imports": (["trl"] + (["vllm"] if s.vllm_mode else [])) if s.engine is Engine.TRL else ["verl"]}
    if s.engine is Engine.VERL:
        cfg["verl_overrides"] = verl_overrides.overrides(verl_run(s, ws, target))
        cfg["tune_overrides"] = list(s.tune)
        # the setup picks the attention where it can see what imports; the pool check needs vLLM's sleep mode
        cfg["attention"] = {"asked": s.attn} if s.backend is Backend.FSDP else None
        cfg["sleep_pool"] = s.rollout is Rollout.VLLM and not s.on_cpu
    else:
        cfg["trl"] = {"model_dir": str(ws.model_dir), "train_file": str(ws.train_file), "out_dir": str(ws.run_dir),
                      "steps": s.steps, "seed": s.seed, "device": "cpu" if s.on_cpu else "auto", **TRL_DEFAULTS,
                      "lr": TRL_LR[s.size if s.model is None else "user"],
                      "vllm_mode": s.vllm_mode.value if s.vllm_mode else None, "gpus": s.gpus, "zero": s.zero,
                      "server_log": str(ws.server_log), "server_timeout": min(SERVER_READY_S, s.timeout),
                      "max_model_len": TRL_MAX_MODEL_LEN["builtin" if s.data is None else "user"]}
    return cfg


def command(s: Settings, ws: Workspace, target: Target, cfg: dict) -> tuple[list[str], dict[str, str]]:
    """The training command and its environment, as they run in the target."""
    env = dict(OFFLINE_ENV)
    if s.engine is Engine.TRL:
        # with vLLM, trl_launch starts the server and/or `accelerate launch` of trl_run, and stops them
        module = "rocmkit.certify.trl_launch" if s.vllm_mode else "rocmkit.certify.trl_run"
        return [target.python, "-m", module, str(ws.config)], env
    env.update(verl_overrides.environment(verl_run(s, ws, target), str(ws.metrics)))
    return [target.python, "-m", "verl.trainer.main_ppo", *cfg.get("run_overrides", cfg["verl_overrides"])], env


def setup_command(s: Settings, ws: Workspace, target: Target) -> list[str]:
    modules = setup_mod.required_modules(s.engine.value, s.rollout.value, s.backend.value)
    modules += (["vllm"] if s.vllm_mode else []) + (["deepspeed"] if s.zero else [])
    return [target.python, "-c", setup_mod.BOOTSTRAP, ",".join(modules), str(ws.config)]


def setup_problem(s: Settings, target: Target, returncode: int | None, report: dict,
                  tail: list[str]) -> tuple[str, str] | None:
    """Why the target cannot run the check (message, hint), or None. Pure."""
    where = f"the image {target.image}" if target.image else f"this host's Python ({target.python})"
    said = " | ".join(line for line in tail[-6:] if line.strip())
    if target.image and returncode == DOCKER_ERROR:
        return (f"the Docker engine could not start a container of {target.image}: {said}",
                "check the engine (`docker info`) and the device flags (`rocmkit run IMAGE --print`)")
    if not report:
        if target.image and returncode in (NOT_EXECUTABLE, NOT_FOUND):
            return (f"{where} has no python3 to run", "certify an image built by `rocmkit build`")
        return (f"the setup could not run in {where} (exit {returncode}): {said}",
                "run the setup's command by hand: `rocmkit certify --dry-run` prints it")
    if report.get("missing"):
        missing = ", ".join(report["missing"])
        hint = ("certify an image built by `rocmkit build` from a stack that has the "
                f"{s.engine.value} engine (`rocmkit stacks`)" if target.image else
                f"pip install 'rocmkit[{'certify' if s.engine is Engine.TRL else 'verl'}]' in {target.python}"
                + (", or the verl-cpu stack's packages for a CPU run" if s.engine is Engine.VERL and s.on_cpu else ""))
        return f"{where} lacks {missing}", hint
    dev = report.get("devices")
    if dev and s.gpus > dev["visible"]:
        built = f"HIP {dev['hip']}" if dev.get("hip") else (f"CUDA {dev['cuda']}" if dev.get("cuda") else "the CPU only")
        env = ", ".join(f"{k}={v!r}" for k, v in dev.get("visible_env", {}).items())
        return (f"asked for {s.gpus} GPU(s), but torch {dev['torch']} (built for {built}) in {where} sees "
                f"{dev['visible']}" + (f" ({env})" if env else ""),
                "nothing was trained; --gpus 0 runs on the CPU" + (" (the verl engine needs the verl-cpu stack for that)"
                                                                   if s.engine is Engine.VERL else "")
                + "; on a GPU host `rocmkit doctor` says why the GPUs are not visible")
    return verl_report.refusal(report)


def setup_checks(report: dict) -> list[dict]:
    """Failures of a target that has everything installed: these are the stack's, so they fail the certificate."""
    out = []
    if report.get("import_errors"):
        out.append(check("engine imports", False, "; ".join(f"{k}: {v}" for k, v in report["import_errors"].items())))
    elif report.get("error"):
        out.append(check("setup ran", False, report["error"]))
    return out + [c for c in extra_checks(report) if not c["passed"]]


def tune_checks(report: dict) -> list[dict]:
    """--tune: whether the target's own verl composes and validates the plan (the user's real job, not the smoke
    run's): a plan the stack's verl rejects fails the certificate."""
    v = report.get("tune_validation")
    if not v:
        return []
    detail = (f"verl {v.get('verl')} composes and validates the plan's overrides" if v["ok"]
              else "; ".join(v["errors"])[:600])
    return [check("tuned plan accepted by this stack's verl", v["ok"], detail)]


def extra_checks(report: dict) -> list[dict]:
    """Checks the setup measured that the certificate carries beside the run's: the tuned plan, the sleep pool."""
    pool = verl_report.sleep_pool_check(report)
    return tune_checks(report) + ([pool] if pool else [])


def device_used(s: Settings, report: dict) -> str:
    if s.on_cpu:
        return "cpu"
    names = (report.get("devices") or {}).get("names") or []
    return ", ".join(names[: s.gpus]) or "?"


def settings_doc(s: Settings, argv: list[str]) -> dict:
    return {"engine": s.engine.value, "steps": s.steps, "gpus": s.gpus,
            "model": str(s.model) if s.model else f"built-in {s.size}",
            "data": str(s.data) if s.data else "built-in digits task",
            "rollout": s.rollout.value if s.engine is Engine.VERL else None, "timeout_s": s.timeout,
            "stall_timeout_s": s.stall_timeout or None,
            "backend": s.backend.value if s.engine is Engine.VERL else None,
            "megatron": {"tp": s.tp, "pp": s.pp} if s.backend.value == "megatron" else None,
            "vllm_mode": s.vllm_mode.value if s.vllm_mode else None, "zero": s.zero,
            "attn": s.attn if s.engine is Engine.VERL else None,
            "rollout_graphs": s.rollout_graphs if s.engine is Engine.VERL else None,
            "learning_required": s.learning_required, "command": argv}


# ---- the edges ----

def _host_facts() -> dict:
    from ..host.facts import collect

    facts = collect("/", process=False)
    return {"gpus": [{"pci": d.pci_address, "product": d.product.name if d.product else d.device_id, "gfx": d.gfx,
                      "partitions": d.partitions} for d in facts.devices],
            "rocm": facts.rocm_version, "container": facts.container}


def probe_figures(s: Settings, target: Target, deadline: float) -> dict | None:
    """The doctor's level-2 GPU probes, measured where the run happens. None on the CPU or with --no-probes."""
    if s.on_cpu or not s.probes:
        return None
    if not target.image:
        from ..host.probes import findings_for, measure

        doc = measure(gpus=list(range(s.gpus)), with_allreduce=s.gpus > 1)
        return {"figures": doc, "findings": [f.to_json() for f in findings_for(doc)]}
    import sys

    from ..runtime import proc

    argv = [sys.executable, "-m", "rocmkit", "doctor", "--image", target.image_id, "--level", "2", "--only", "probe",
            "--json"]
    out = proc.capture(argv, timeout=max(1.0, deadline - time.monotonic()))
    text = "\n".join(out.tail)
    try:
        doc = json.loads(text[text.index("{"):])
    except ValueError:
        return {"error": "the probes did not run in the image: " + " ".join(out.tail[-3:])}
    return {"findings": [f for f in doc.get("findings", []) if f["id"].startswith("probe")]}


def _write_certificate(ws: Workspace, cert: dict) -> None:
    write_atomic(ws.root / "certificate.json", dumps(cert))
    write_atomic(ws.root / "certificate.md", markdown(cert))


class Timings(dict):
    """Seconds spent in each part of the certification, for the certificate (and the overhead benchmark)."""

    def __init__(self):
        super().__init__()
        self.started = self._mark = time.monotonic()

    def lap(self, name: str) -> None:
        now = time.monotonic()
        self[f"{name}_s"] = round(now - self._mark, 3)
        self._mark = now


def certify(s: Settings, display: Display) -> Outcome:
    timings = Timings()
    deadline = timings.started + s.timeout
    s = settings_mod.check(s)
    workspace.inspect(s)  # a folder that cannot be taken is refused before anything runs
    display.stage("target", "resolving" + (f" image {s.image}" if s.image else " this host"))
    target = resolve(s)
    ws = workspace.temporary(s) if s.dry_run else workspace.take(s)
    timings.lap("resolve")
    try:
        return _certify(s, target, ws, deadline, display, timings)
    finally:
        workspace.release(ws)


def _certify(s: Settings, target: Target, ws: Workspace, deadline: float, display: Display,
             timings: Timings) -> Outcome:
    cfg = config(s, ws, target)
    write_atomic(ws.config, json.dumps(cfg, indent=1) + "\n")
    inner, env = command(s, ws, target, cfg)
    argv = target.command(inner, env, ws)
    base = dict(settings=settings_doc(s, argv), target=target.record, host=_host_facts(), timings=timings)

    display.stage("setup", f"in {target.describe()}: imports, GPUs, model and data")
    lines: list[str] = []
    res = target.run(setup_command(s, ws, target), env, ws,
                     timeout=max(1.0, deadline - time.monotonic()), on_line=lines.append, log_path=ws.setup_log,
                     what="the certification's setup")
    report = setup_mod.parse(lines)
    timings.lap("setup")
    if s.engine is Engine.VERL and report:  # the setup chose the attention: the run's command takes it
        cfg["run_overrides"] = verl_report.run_overrides(cfg, report)
        inner, _ = command(s, ws, target, cfg)
        argv = base["settings"]["command"] = target.command(inner, env, ws)
    files = {"setup_log": str(ws.setup_log)}
    if res.timed_out:
        return _stop_early(s, ws, base, not_certified(Reason.TIMEOUT, [check("setup finished", False,
                           f"setup still running at the --timeout of {s.timeout} s")]), report, target, files,
                           (f"the certification ran past --timeout {s.timeout} s during setup and was stopped", None))
    problem = setup_problem(s, target, res.returncode, report, lines)
    if problem:
        message, hint = problem
        verdict = not_certified(Reason.SETUP, [check("target can run the check", False, message)])
        return _stop_early(s, ws, base, verdict, report, target, files, (message, hint))
    validation = report.get("verl_validation")
    if validation and not validation["ok"]:
        raise UsageError(f"verl {validation.get('verl')} rejects the run's configuration: "
                         + "; ".join(validation["errors"]), hint="nothing was launched")
    failed_setup = setup_checks(report)
    if s.dry_run:
        plan = {"schema": "rocmkit.certify-plan/v1", "command": argv, "env": env, "shell": shell_line(argv, env, target),
                "target": target.record, "setup": report, "setup_failures": failed_setup,
                "verl_validation": validation, "tune_validation": report.get("tune_validation"),
                "attention": report.get("attention"), "checks": extra_checks(report), "notes": target.notes}
        return Outcome(exit_code=1 if failed_setup else 0, plan=plan)
    if failed_setup:
        return _stop_early(s, ws, base, Verdict(Status.FAIL, failed_setup), report, target, files, None)

    if not s.on_cpu and s.probes:
        display.stage("probes", "GPU figures where the run happens")
    probes = probe_figures(s, target, deadline)
    timings.lap("probes")
    display.stage("training", f"{s.engine.value}, {s.steps} steps on {device_used(s, report)}")
    follow = watchdog.Follow(display, watchdog.Watch(s.steps, stall_s=s.stall_timeout or float("inf"),
                                            first_phase="starting Ray" if s.engine is Engine.VERL else
                                            "starting the trainer"))
    run = target.run(inner, env, ws, timeout=max(1.0, deadline - time.monotonic()), on_line=follow.line,
                     log_path=ws.log, what="the certification run", stop_when=follow.tick)
    timings.lap("run")
    display.stage("judging")
    steps = read_steps(ws)
    info = run_info(ws)
    files.update(log=str(ws.log), metrics=str(ws.metrics))
    if ws.server_log.exists():
        files["server_log"] = str(ws.server_log)
    status = run_status(run)
    watched = follow.watch.record()
    run_doc = {"status": status.value, "exit_code": run.returncode, "wall_s": round(run.seconds, 2),
               "stop": watched["stop"], "longest_silence_s": watched["longest_silence_s"],
               "stall_timeout_s": s.stall_timeout or None}
    stop = follow.watch.stopped
    extra = extra_checks(report) + ([check("no stall or engine error", False, stop.message(s.stall_timeout))]
                                   if stop else [])
    verdict = judge(steps, s.steps, status, require_learning=s.learning_required, probes=probes, extra=extra)
    if status is RunStatus.TIMED_OUT:
        verdict = not_certified(Reason.TIMEOUT, verdict.checks)  # setup failures stopped the run above
    timings.lap("judge")
    timings["whole_s"] = round(time.monotonic() - timings.started, 3)
    verl = (verl_report.record(report, ws.log.read_text(errors="replace") if ws.log.exists() else "",
                               s.rollout_graphs) if s.engine is Engine.VERL else None)
    cert = build(**base, verdict=verdict, run=run_doc, device=device_used(s, report), steps=steps, info=info,
                 setup=report, probes=probes, notes=target.notes, files=files, timeline=watched["timeline"],
                 verl=verl)
    _write_certificate(ws, cert)
    display.done()
    if status is RunStatus.TIMED_OUT:
        error = (f"the certification ran past --timeout {s.timeout} s and was stopped", f"its log: {ws.log}")
    elif stop:
        error = (stop.message(s.stall_timeout), f"the last lines are in the certificate (run.stop.lines); the log: {ws.log}")
    else:
        error = launch_error(ws)
    return Outcome(exit_code=verdict.exit_code, certificate=cert, error=error, files=files, folder=ws.root)


def _stop_early(s: Settings, ws: Workspace, base: dict, verdict: Verdict, report: dict, target: Target, files: dict,
                error: tuple[str, str | None] | None) -> Outcome:
    """A certificate for a check that never trained (setup or deadline), unless this is a dry run."""
    cert = build(**base, verdict=verdict, run={"status": "not started", "exit_code": None, "wall_s": 0.0},
                 device=device_used(s, report) if report.get("devices") else None, setup=report,
                 notes=target.notes, files=files)
    if not s.dry_run:
        _write_certificate(ws, cert)
    if s.dry_run:
        return Outcome(exit_code=verdict.exit_code, error=error, files=files)
    return Outcome(exit_code=verdict.exit_code, certificate=cert, error=error, files=files, folder=ws.root)


def run_status(run) -> RunStatus:
    if run.timed_out:
        return RunStatus.TIMED_OUT
    if run.stopped:
        return RunStatus(run.stopped)  # the watchdog's reason: stalled, or engine error
    return RunStatus.FINISHED if run.returncode == 0 else RunStatus.CRASHED


def read_steps(ws: Workspace) -> dict[int, dict[str, float]]:
    steps = metrics_mod.read_jsonl(ws.metrics) if ws.metrics.exists() else {}
    if not steps and ws.log.exists():  # verl without its file logger: fall back to the console lines
        steps = metrics_mod.read_console(ws.log.read_text(errors="replace"))
    return steps


def launch_error(ws: Workspace) -> tuple[str, str] | None:
    """What trl_launch said went wrong around the trainer (the vLLM server died or never became healthy)."""
    if not ws.log.exists():
        return None
    said = [line.split("rocmkit: error: ", 1)[1] for line in ws.log.read_text(errors="replace").splitlines()
            if "rocmkit: error: " in line]
    return (said[-1], f"the server's log: {ws.server_log}") if said else None


def run_info(ws: Workspace) -> dict:
    try:
        return json.loads((ws.run_dir / "run.json").read_text())
    except (OSError, ValueError):
        return {}


def shell_line(argv: list[str], env: dict[str, str], target: Target) -> str:
    prefix = "" if target.image else " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + " "
    return prefix + shlex.join(argv)
