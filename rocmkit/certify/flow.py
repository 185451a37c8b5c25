"""One certification, start to end: check the options and the run folder, resolve the target, set up inside
it (imports, GPUs, model, data, verl's own check of the overrides), measure the GPUs, train under the
deadline, judge, and write the certificate. What a step decides is a pure function below it; what it
touches goes through the workspace, the target and the runner."""

from __future__ import annotations

import json
import shlex
import time

from ..errors import UsageError
from ..fileio import write_atomic
from ..progress import Display
from ..runtime.container import DOCKER_ERROR
from . import engines
from . import metrics as metrics_mod
from . import settings as settings_mod
from . import setup as setup_mod
from . import verl_report, watchdog, workspace
from .certificate import build
from .judge import Reason, RunStatus, Status, Verdict, check, judge, not_certified
from .outcome import Outcome, host_facts, run_status, write_certificate
from .settings import Settings
from .target import NOT_EXECUTABLE, NOT_FOUND, Target, resolve
from .workspace import Workspace

OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1"}


# ---- pure: what runs ----

def config(s: Settings, ws: Workspace, target: Target) -> dict:
    """certify.json: everything the setup and the run read in the target."""
    engine = engines.of(s)
    cfg = {"engine": s.engine.value, "gpus": s.gpus, "steps": s.steps, "seed": s.seed, "size": s.size,
           "rollout": s.rollout.value, "builtin_model": s.model is None, "builtin_data": s.data is None,
           "model_dir": str(ws.model_dir), "train_file": str(ws.train_file), "val_file": str(ws.val_file),
           "reward_file": str(ws.reward_file), "run_dir": str(ws.run_dir), "imports": engine.imports(s)}
    return {**cfg, **engine.configure(s, ws, target)}


def command(s: Settings, ws: Workspace, target: Target, cfg: dict) -> tuple[list[str], dict[str, str]]:
    """The training command and its environment, as they run in the target."""
    argv, env = engines.of(s).command(s, ws, target, cfg)
    return argv, {**OFFLINE_ENV, **env}


def setup_command(s: Settings, ws: Workspace, target: Target) -> list[str]:
    modules = engines.of(s).required_modules(s)
    return [target.python, "-c", setup_mod.BOOTSTRAP, ",".join(modules), str(ws.config)]


def setup_problem(s: Settings, target: Target, returncode: int | None, report: dict,
                  tail: list[str]) -> tuple[str, str] | None:
    """Why the target cannot run the check (message, hint), or None. Pure, but for torch_advice.host() (this
    host's /dev/kfd, KFD topology and ROCm version), read only when torch sees fewer GPUs than asked."""
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
                engines.of(s).install_hint(s, target.python))
        return f"{where} lacks {missing}", hint
    dev = report.get("devices")
    if dev and s.gpus > dev["visible"]:
        from . import torch_advice

        built = f"HIP {dev['hip']}" if dev.get("hip") else (f"CUDA {dev['cuda']}" if dev.get("cuda") else "the CPU only")
        env = ", ".join(f"{k}={v!r}" for k, v in dev.get("visible_env", {}).items())
        return (f"asked for {s.gpus} GPU(s), but torch {dev['torch']} (built for {built}) in {where} sees "
                f"{dev['visible']}" + (f" ({env})" if env else ""),
                "nothing was trained; " + torch_advice.hint(dev, torch_advice.host(), python=target.python,
                                                            image=target.image, cpu_note=engines.of(s).cpu_hint()))
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
    own = engines.of(s).settings_fields(s)
    return {"engine": s.engine.value, "steps": s.steps, "gpus": s.gpus,
            "model": str(s.model) if s.model else f"built-in {s.size}",
            "data": str(s.data) if s.data else "built-in digits task",
            "rollout": own["rollout"], "timeout_s": s.timeout,
            "stall_timeout_s": s.stall_timeout or None,
            "backend": own["backend"],
            "megatron": {"tp": s.tp, "pp": s.pp} if s.backend.value == "megatron" else None,
            "vllm_mode": s.vllm_mode.value if s.vllm_mode else None, "zero": s.zero,
            "attn": own["attn"], "rollout_graphs": own["rollout_graphs"],
            "learning_required": s.learning_required, "command": argv}


# ---- the edges ----

def probe_figures(s: Settings, target: Target, deadline: float) -> dict | None:
    """The doctor's level-2 GPU probes, measured where the run happens. None on the CPU or with --no-probes."""
    if s.on_cpu or not s.probes:
        return None
    if not target.image:
        from ..host.probes import run as probes

        doc = probes.measure(gpus=list(range(s.gpus)), with_allreduce=s.gpus > 1)
        return {"figures": doc, "findings": [f.to_json() for f in probes.findings_for(doc)]}
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
    if engines.of(s).certifies_itself:
        return engines.of(s).certify(s, display)
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
    base = dict(settings=settings_doc(s, argv), target=target.record, host=host_facts(), timings=timings)

    display.stage("setup", f"in {target.describe()}: imports, GPUs, model and data")
    lines: list[str] = []
    res = target.run(setup_command(s, ws, target), env, ws,
                     timeout=max(1.0, deadline - time.monotonic()), on_line=lines.append, log_path=ws.setup_log,
                     what="the certification's setup")
    report = setup_mod.parse(lines)
    timings.lap("setup")
    if engines.of(s).after_setup(cfg, report):  # verl: the setup chose the attention, the command takes it
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
    follow = watchdog.Follow(display, engines.of(s).watch(s))
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
    verl = engines.of(s).run_record(s, report, ws.log.read_text(errors="replace") if ws.log.exists() else "")
    cert = build(**base, verdict=verdict, run=run_doc, device=device_used(s, report), steps=steps, info=info,
                 setup=report, probes=probes, notes=target.notes, files=files, timeline=watched["timeline"],
                 verl=verl)
    write_certificate(ws, cert)
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
        write_certificate(ws, cert)
    if s.dry_run:
        return Outcome(exit_code=verdict.exit_code, error=error, files=files)
    return Outcome(exit_code=verdict.exit_code, certificate=cert, error=error, files=files, folder=ws.root)


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
