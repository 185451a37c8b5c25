"""One certification, start to end, the same steps for every engine: check the options and the run folder,
resolve the target, set up inside it (imports, GPUs, model, data, the engine's own checks), measure the GPUs,
run under the deadline and the watchdog, judge, and write the certificate. The engine of the run
(certify/engines/) supplies what differs and overrides the steps it does its own way; this module branches on
no engine. What a step decides is a pure function below it; what it touches goes through the workspace, the
target and the runner."""

from __future__ import annotations

import json
import shlex
import time
from dataclasses import replace

from ..errors import UsageError
from ..fileio import write_atomic
from ..progress import Display
from . import cause, early, engines, workspace
from .follow import Follow
from . import metrics as metrics_mod
from . import numerics as numerics_mod
from .beside import Beside
from .bars import run_seconds
from .certificate import build
from .engines.base import OFFLINE_ENV
from .intarget import setup as setup_mod
from .judge import Reason, RunStatus, Status, Verdict, check, not_certified
from .outcome import Outcome, host_facts, run_status, write_certificate
from .refusal import refusal, setup_checks
from .settings import Settings
from .target import Target, resolve
from .validate import validate
from .workspace import Workspace



# ---- pure: what runs ----

def config(s: Settings, ws: Workspace, target: Target) -> dict:
    """certify.json: everything the setup and the run read in the target."""
    engine = engines.of(s)
    cfg = {"engine": s.engine, "gpus": s.gpus, "steps": s.steps, "seed": s.seed, "size": s.size,
           "builtin_model": s.model is None, "builtin_data": s.data is None,
           "model_dir": str(ws.model_dir), "train_file": str(ws.train_file), "val_file": str(ws.val_file),
           "reward_file": str(ws.reward_file), "run_dir": str(ws.run_dir), "imports": engine.imports(s)}
    cfg.update(engine.configure(s, ws, target))
    if engine.setup_in_target and not s.on_cpu:
        cfg["gpu_need"] = engine.gpu_need(s, cfg)  # the setup stops at once when a GPU has less free
    return cfg


def command(s: Settings, ws: Workspace, target: Target, cfg: dict) -> tuple[list[str], dict[str, str]]:
    """The training command and its environment, as they run in the target."""
    argv, env = engines.of(s).command(s, ws, target, cfg)
    return argv, {**OFFLINE_ENV, **env}


def setup_command(s: Settings, ws: Workspace, target: Target, part: str = "all") -> list[str]:
    modules = engines.of(s).required_modules(s)
    return [target.python, "-c", setup_mod.BOOTSTRAP, ",".join(modules), str(ws.config), part]


def settings_doc(s: Settings, argv: list[str]) -> dict:
    """The certificate's settings: what every engine was asked, then the chosen engine's own options."""
    return {"engine": s.engine, "gpus": s.gpus, "timeout_s": s.timeout, "stall_timeout_s": s.stall_timeout or None,
            **engines.of(s).settings_fields(s), "command": argv}


# ---- the edges ----

def wants_probes(s: Settings, engine) -> bool:
    return not s.on_cpu and s.probes and engine.probes


def probe_figures(s: Settings, target: Target, deadline: float) -> dict | None:
    """The doctor's level-2 GPU probes, measured where the run happens. None on the CPU or with --no-probes."""
    if not wants_probes(s, engines.of(s)):
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
    timings = Timings()
    deadline = timings.started + s.timeout
    s = validate(s)
    workspace.inspect(s)  # a folder that cannot be taken is refused before anything runs
    display.stage("target", "resolving" + (f" image {s.image}" if s.image else " this host"))
    target = resolve(s)
    ws = workspace.temporary(s) if s.dry_run else workspace.take(s)
    if ws.previous:
        display.note(f"the folder's previous run is kept whole in {ws.previous}")
    timings.lap("resolve")
    try:
        return _certify(s, target, ws, deadline, display, timings)
    finally:
        workspace.release(ws)


def _certify(s: Settings, target: Target, ws: Workspace, deadline: float, display: Display,
             timings: Timings) -> Outcome:
    engine = engines.of(s)
    cfg = config(s, ws, target)
    write_atomic(ws.config, json.dumps(cfg, indent=1) + "\n")
    inner, env = command(s, ws, target, cfg)
    argv = engine.target_argv(s, target, inner, env, ws)
    base = dict(settings=settings_doc(s, argv), target=target.record, host=host_facts(), timings=timings)

    report: dict = {}
    files = {}
    split = engine.setup_in_target and bool(cfg.get("target_steps")) and not s.dry_run  # slow checks beside the run
    if engine.setup_in_target:
        display.stage("setup", f"in {target.describe()}: " + ("imports, GPUs, model and data" if not split else
                                                              "torch, GPUs, model and data; the checks beside the run"))
        res, report, lines = _setup_part(s, ws, target, env, deadline, "first" if split else "all")
        timings.lap("setup")
        if engine.after_setup(cfg, report):  # verl: the setup chose the attention, the command takes it
            inner, _ = command(s, ws, target, cfg)
            argv = base["settings"]["command"] = engine.target_argv(s, target, inner, env, ws)
            write_atomic(ws.config, json.dumps(cfg, indent=1) + "\n")  # the checks beside validate the run's own
        files["setup_log"] = str(ws.setup_log)
        refused = _setup_refusal(s, engine, target, ws, base, files, res, report, lines, cfg.get("gpu_need", []),
                                 judge_checks=False)
        if refused:
            return refused
    measured = engine.extra_checks(report)  # what the setup measured beside the run's checks
    failed_setup = setup_checks(report, measured)
    if s.dry_run:
        plan = {"schema": "rocmkit.certify-plan/v1", "command": argv, "env": env, "shell": shell_line(argv, env, target),
                "target": target.record, "setup": report, "setup_failures": failed_setup,
                **engine.plan_fields(report), "checks": measured, "notes": target.notes}
        return Outcome(exit_code=1 if failed_setup else 0, plan=plan)
    if failed_setup:
        return _stop_early(s, ws, base, Verdict(Status.FAIL, failed_setup), report, target, files, None)

    # the GPU probes, then the setup's slow checks, while the engine's start-up (Ray, imports, data) uses no GPU
    probes_wanted = wants_probes(s, engine)
    side = Beside(checks=(lambda until, stop: _setup_part(s, ws, target, env, until, "beside", stop))
                  if split else None,
                  refuses=lambda checked: getattr(refusal(s, engine, target, *checked), "message", None),
                  probes=(lambda: probe_figures(s, target, deadline)) if probes_wanted else None,
                  pcis={m.get("pci") for m in report.get("gpu_memory") or () if m.get("pci")},
                  deadline=deadline) if split or probes_wanted else None
    device = engine.device(s, report)
    proving = early.applies(s, engine)
    display.stage("training", f"{s.engine}, " + (f"{'up to ' if proving else ''}{s.steps} steps on {device}"
                                                 if engine.setup_in_target else f"on {device}")
                  + (f", {_beside_words(split, probes_wanted)} beside its start-up" if side else ""))
    follow = (early.ProvingFollow if proving else Follow)(display, engine.watch(s), stall_dir=ws.stall_dir)
    follow.also_stop = side.stop_reason if split else None
    run_started = time.monotonic()
    try:
        run = engine.execute(s, target, ws, inner, env, timeout=max(1.0, deadline - time.monotonic()), follow=follow)
    except BaseException:  # a signal or an error ends certify: what runs beside the run goes with it
        if side:
            side.cancel()
        raise
    timings.lap("run")
    probes = side.result(deadline, timings) if side else None
    if split:
        later = side.checked[1] if side.checked else {}
        files["setup_beside_log"] = str(ws.setup_log.with_name("setup-beside.log"))
        report = {**report, **later, "timings": {**report.get("timings", {}), **later.get("timings", {})}}
        if side.refused and not run.timed_out:  # a check beside the start-up failed: the run was stopped for it
            display.done()
            return _refused_beside(s, engine, target, ws, base, files, side, report, run)
        measured = engine.extra_checks(report)
    proof = getattr(follow, "proof", None)  # stopped once learning was proven (early.py), or None
    watched = follow.watch.record()
    display.stage("judging", took=run_seconds(timings, watched["timeline"], run.seconds))  # the certificate's figure
    steps = read_steps(ws)
    info = run_info(ws)
    files.update(log=str(ws.log), metrics=str(ws.metrics))
    if ws.server_log.exists():
        files["server_log"] = str(ws.server_log)
    status = run_status(run)
    run_doc = {"status": status.value, "exit_code": run.returncode, "wall_s": round(run.seconds, 2),
               "stop": watched["stop"], "longest_silence_s": watched["longest_silence_s"],
               "stall_timeout_s": s.stall_timeout or None, "activity": watched["activity"]}
    if status is RunStatus.FINISHED:  # which rule ended it: the learning proof, or the steps asked
        run_doc["ended_by"] = early.ended_by(s.steps, proof)
    if watched["replicas"]:  # several rollout replicas: each one's updates and syncs, apart
        run_doc["replica_timelines"] = watched["replicas"]
    if status is not RunStatus.FINISHED:  # who the run's processes were, and when each ended: the cause's witnesses
        run_doc["processes"] = [{k: v for k, v in r.items() if k != "started"}
                                for r in follow.processes.table.values()]
    if follow.stall_report:  # where every process stood before the stalled run was stopped
        run_doc["stall_report"] = follow.stall_report
        files["stall"] = str(ws.stall_dir)
    stop = follow.watch.stopped
    why = run_cause(s, engine, ws, run, status, follow, run_started)
    why = engine.advise(s, report, why) if why else why
    extra = measured + ([check("no stall or engine error", False, stop.message(s.stall_timeout))] if stop else [])
    numerics = engine.numerics(s, steps, report, ws)  # the rollout against the trainer, and the weight syncs
    extra += numerics_mod.checks(numerics) if numerics else []
    # stopped once proven: the steps up to the proof are all it asked
    verdict = engine.verdict(replace(s, steps=proof.step) if proof else s, steps, status, run, probes, extra, ws)
    if why:  # "run status: crashed" alone tells nothing: the check says what ended the run
        for c in verdict.checks:
            if c["name"] == "run finished":
                c["detail"] = f"run status: {status.value}: {why['summary']}"
    if status is RunStatus.TIMED_OUT:
        verdict = not_certified(Reason.TIMEOUT, verdict.checks)  # setup failures stopped the run above
    timings.lap("judge")
    timings["whole_s"] = round(time.monotonic() - timings.started, 3)
    cert = build(**base, verdict=verdict, run=run_doc, device=device, steps=steps, info=info,
                 setup=report, probes=probes,
                 notes=target.notes + folder_notes(ws) + engine.run_notes(run) + follow.watch.notes(),
                 files=files, cause=why,
                 timeline=watched["timeline"], engine_run=engine.run_record(s, report, run, ws), numerics=numerics)
    write_certificate(ws, cert)
    display.done()
    error = None
    if why:
        server = f"the server's log: {ws.server_log}" if ws.server_log.exists() else None
        error = (why["summary"], "; ".join(x for x in (why.get("hint"), f"the log: {ws.log}", server) if x))
    return Outcome(exit_code=verdict.exit_code, certificate=cert, error=error, files=files, folder=ws.root)


def _setup_part(s: Settings, ws: Workspace, target: Target, env: dict, deadline: float, part: str, stop_when=None):
    """One part of the setup in the target (intarget/setup.py's PARTS): its result, report and output lines."""
    lines: list[str] = []
    log = ws.setup_log if part != "beside" else ws.setup_log.with_name("setup-beside.log")
    res = target.run(setup_command(s, ws, target, part), env, ws, timeout=max(1.0, deadline - time.monotonic()),
                     on_line=lines.append, log_path=log, stop_when=stop_when,
                     what="the certification's setup" + (" beside the run" if part == "beside" else ""))
    return res, setup_mod.parse(lines), lines


def _setup_refusal(s: Settings, engine, target: Target, ws: Workspace, base: dict, files: dict, res, report: dict,
                   lines: list[str], need, *, judge_checks: bool, run: dict | None = None) -> Outcome | None:
    """The outcome of a setup (or of its part beside the run, `run` then says how the run was stopped) that refuses
    the target; None when it does not."""
    why = refusal(s, engine, target, res, report, lines, need, judge_checks=judge_checks)
    if why is None:
        return None
    stopped = f"; the run was stopped {run['wall_s']:.0f} s into its start-up" if run else ""
    if why.kind == "timeout":
        return _stop_early(s, ws, base, not_certified(Reason.TIMEOUT, [check("setup finished", False, why.message)]),
                           report, target, files,
                           (f"the certification ran past --timeout {s.timeout} s during setup and was stopped", None),
                           run=run)
    if why.kind == "input":
        raise UsageError(why.message, hint="nothing was started; " + (
            "fix the script's model folder, its data.train_files, or the keys naming their columns (data.prompt_key, "
            "data.reward_fn_key)" if s.job else "give a whole model folder (--model) and a parquet file with the "
            "columns named (--data)"))
    if why.kind == "problem":
        verdict = not_certified(Reason.SETUP, [check("target can run the check", False, why.message)])
        return _stop_early(s, ws, base, verdict, report, target, files, (why.message, (why.hint or "") + stopped),
                           run=run)
    if why.kind == "rejection":
        raise UsageError(why.message, hint=why.hint.replace("nothing was launched", "the run was stopped")
                         if run else why.hint)
    return _stop_early(s, ws, base, Verdict(Status.FAIL, list(why.failed)), report, target, files, None, run=run)


def _refused_beside(s: Settings, engine, target: Target, ws: Workspace, base: dict, files: dict, side: Beside,
                    report: dict, run) -> Outcome:
    """The certificate of a run stopped because a check beside its start-up failed: the check's own outcome."""
    if ws.log.exists():  # the run's start-up, up to its stop
        files["log"] = str(ws.log)
    doc = {"status": "stopped", "exit_code": run.returncode, "wall_s": round(run.seconds, 2),
           "stopped_by": f"a setup check beside its start-up: {side.refused}"}
    if side.checked is not None:
        res, _, lines = side.checked
        out = _setup_refusal(s, engine, target, ws, base, files, res, report, lines, (), judge_checks=True, run=doc)
        if out is not None:
            return out
    message = side.refused or "the setup's checks beside the run did not finish"
    verdict = not_certified(Reason.SETUP, [check("target can run the check", False, message)])
    return _stop_early(s, ws, base, verdict, report, target, files, (message, None), run=doc)


def _beside_words(checks: bool, probes: bool) -> str:
    return " and ".join(w for w, on in (("the GPU probes", probes), ("the setup's checks", checks)) if on)


def _stop_early(s: Settings, ws: Workspace, base: dict, verdict: Verdict, report: dict, target: Target, files: dict,
                error: tuple[str, str | None] | None, run: dict | None = None) -> Outcome:
    """A certificate for a check that never trained (setup or deadline; or a run stopped at its start-up, `run`),
    unless this is a dry run."""
    cert = build(**base, verdict=verdict, run=run or {"status": "not started", "exit_code": None, "wall_s": 0.0},
                 device=engines.of(s).device(s, report) if report.get("devices") else None, setup=report,
                 notes=target.notes + folder_notes(ws), files=files,
                 cause=cause.refused(*(error or ("; ".join(c["detail"] for c in verdict.checks if not c["passed"]),
                                                 None))))
    if not s.dry_run:
        write_certificate(ws, cert)
    if s.dry_run:
        return Outcome(exit_code=verdict.exit_code, error=error, files=files)
    return Outcome(exit_code=verdict.exit_code, certificate=cert, error=error, files=files, folder=ws.root)


def folder_notes(ws: Workspace) -> list[str]:
    return [f"the run folder's previous run is kept whole in {ws.previous}"] if ws.previous else []


def stall_hint(stall: dict | None, ws: Workspace) -> str:
    """What to read after a stop: the stall report's verdict when there is one, else the last lines."""
    if stall and stall.get("verdict"):
        return f"{stall['verdict']['summary']}; the full stacks: {ws.stall_dir / 'stacks.txt'}"
    if stall:
        return f"{stall.get('error')}; the last lines are in the certificate (run.stop.lines)"
    return "the last lines are in the certificate (run.stop.lines)"


def read_steps(ws: Workspace) -> dict[int, dict[str, float]]:
    steps = metrics_mod.read_jsonl(ws.metrics) if ws.metrics.exists() else {}
    if ws.log.exists():  # verl without its file logger, or a step it printed but had not yet filed when stopped
        steps = {**metrics_mod.read_console(ws.log.read_text(errors="replace")), **steps}
    return steps


def run_cause(s: Settings, engine, ws: Workspace, run, status: RunStatus, follow, started: float) -> dict | None:
    """What ended a run that did not finish well (cause.py decides; this reads the logs, the processes the watchdog
    noted and, for a run that died, the kernel's log since the run started)."""
    if status is RunStatus.FINISHED:
        return None
    logs = {}
    for name, path in (("run.log", ws.log), ("server.log", ws.server_log)):
        if path.exists():
            logs[name] = path.read_text(errors="replace").splitlines()
    kernel: list[str] = []
    faults: list[dict] = []
    if status in (RunStatus.CRASHED, RunStatus.ENGINE_ERROR):  # the kernel's word, where its log is readable
        from ..stall.report import faults_of, kernel_records

        records, _ = kernel_records(started - 1.0)
        kernel, faults = ([r.message for r in records], faults_of(records)) if records else ([], [])
    stop = follow.watch.stopped
    return cause.name(status=status, returncode=run.returncode, logs=logs, processes=follow.processes,
                      kernel=kernel, kernel_faults=faults, extra=engine.signatures(), where=follow.watch.detail,
                      command=engine.command_name, stop=stop.to_json() if stop else None,
                      stop_message=stop.message(s.stall_timeout) if stop else None,
                      stop_hint=stall_hint(follow.stall_report, ws), timeout_s=s.timeout)


def run_info(ws: Workspace) -> dict:
    try:
        return json.loads((ws.run_dir / "run.json").read_text())
    except (OSError, ValueError):
        return {}


def shell_line(argv: list[str], env: dict[str, str], target: Target) -> str:
    prefix = "" if target.image else " ".join(f"{k}={shlex.quote(v)}" for k, v in env.items()) + " "
    return prefix + shlex.join(argv)
