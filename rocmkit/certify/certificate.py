"""The certificate: what ran (image or host, engine, settings), what it measured, and the verdict —
as JSON (`rocmkit.certificate/v2`) and a short markdown summary.

v2 gains `run.stall_report` (rocmkit.stall-report/v1: where every process stood when the watchdog stopped a
stalled run), present only then: an added field, so the version stays 2 and readers of v2 are unchanged.
v2 also gains `run.activity` (what the watchdog read beside the output: `read`, `samples`, `longest_idle_s`) and,
in `run.stop`, `read`, `busy_s`, `capped`, `spinning` and `working` (certify/watchdog.py): added fields, same version.

v2 (from v1): the engine's own record of the run is `engine_run` (v1 called verl's `verl`), and `settings` holds
the chosen engine's options only (v1 held every engine's, None where they did not apply). `upgrade` reads a v1
certificate as v2."""

from __future__ import annotations

import datetime as dt
import statistics
from pathlib import PurePath

from .. import __version__, archs, tinymodel
from ..output import document
from ..tune import measured
from . import bars, engines
from . import metrics as m
from .judge import Verdict

SCHEMA_VERSION = 2

PHASES = {"generation": "timing_s/gen", "reference_log_probs": "timing_s/ref", "old_log_probs": "timing_s/old_log_prob",
          "reward": "timing_s/reward", "update": "timing_s/update_actor", "step": "timing_s/step"}


def _peak_tflops(device: str | None, precision: str | None) -> float | None:
    """Datasheet dense peak for the device at the precision trained in, from the arch table."""
    product = archs.product_for_torch_name(device) if precision == "bf16" else None
    return product.peak_bf16_tflops if product and product.peak_bf16_tflops else None


def completion_tokens(row: dict[str, float]) -> float:
    """Tokens generated in a step: TRL's count, or verl's generation time over its time per token."""
    if "perf/completion_tokens" in row:
        return row["perf/completion_tokens"]
    per_token_ms = row.get("timing_per_token_ms/gen")
    return row.get("timing_s/gen", 0.0) * 1000 / per_token_ms if per_token_ms else 0.0


def steady(rows: list) -> list:
    """The steps throughput counts: the first includes one-off warm-up (compilation, allocator, caches), so it is
    left out where enough steps remain."""
    return rows[1:] if len(rows) > 2 else rows


def summarize(steps: dict[int, dict[str, float]], info: dict, engine=None) -> dict:
    """Throughput, per-phase times and MFU from the per-step metrics (the engine's own MFU where it reports one)."""
    ordered = [steps[s] for s in sorted(steps)]
    steady_rows = steady(ordered)

    def total(key, rows=steady_rows):
        return sum(r.get(key, 0.0) for r in rows)

    phases = {name: round(total(key, ordered), 4) for name, key in PHASES.items()}
    gen_time, gen_tokens = total("timing_s/gen"), sum(completion_tokens(r) for r in steady_rows)
    train_time = total("timing_s/update_actor") + total("timing_s/ref") + total("timing_s/old_log_prob")
    all_tokens = total("perf/total_num_tokens")
    out = {
        "steps": len(ordered),
        "phases_s": phases,
        "rollout_tokens_per_s": round(gen_tokens / gen_time, 2) if gen_time > 0 and gen_tokens else None,
        "training_tokens_per_s": round(all_tokens / train_time, 2) if train_time > 0 and all_tokens else None,
        "reward": {"first": None, "last": None},
        "mfu": None,
    }
    rewards = m.series(steps, "reward", "critic/score/mean")
    if rewards:
        q = max(1, len(rewards) // 4)
        out["reward"] = {"first": round(statistics.fmean(rewards[:q]), 4), "last": round(statistics.fmean(rewards[-q:]), 4)}
    reported = engine.reported_mfu(lambda key: m.series(steps, key)) if engine else None
    peak = _peak_tflops(info.get("device"), info.get("precision"))
    params = info.get("parameters")
    if reported:
        out["mfu"] = reported
    elif peak and params and total("timing_s/update_actor") > 0:
        # forward + backward of every token of the step: 6 x parameters x tokens (decoder-only, no attention term)
        flops = 6 * params * all_tokens
        out["mfu"] = {"update": float(f"{flops / total('timing_s/update_actor') / (peak * 1e12):.4g}"),
                      "peak_tflops": peak, "source": "6 x parameters x tokens / update time / datasheet bf16 peak"}
    return out


PER_STEP_KEYS = ("critic/score/mean", "reward", "actor/pg_loss", "loss", "actor/kl_loss", "response_length/mean",
                 "timing_s/step", "timing_s/gen", "timing_s/update_actor", "perf/throughput", "perf/mfu/actor",
                 "actor/perf/max_memory_allocated_gb", "actor/perf/max_memory_reserved_gb")


def per_step(steps: dict[int, dict[str, float]]) -> list[dict]:
    """The engine's own figures for each step (the subset a reader compares runs by)."""
    return [{"step": n, **{k: round(steps[n][k], 6) for k in PER_STEP_KEYS if k in steps[n]}} for n in sorted(steps)]


def build(*, settings: dict, target: dict, host: dict, verdict: Verdict, run: dict, device: str | None,
          steps: dict | None = None, info: dict | None = None, setup: dict | None = None, probes: dict | None = None,
          notes: list[str] = (), files: dict | None = None, timings: dict | None = None,
          timeline: list[dict] = (), engine_run: dict | None = None, cause: dict | None = None,
          numerics: dict | None = None) -> dict:
    steps, info = steps or {}, info or {}
    run = {**run, **{k: v for k, v in info.items() if k not in ("status", "wall_s")}}
    if info.get("wall_s") is not None:  # the engine's own time (TRL's trainer.train()), without its start-up
        run["engine_s"] = round(float(info["wall_s"]), 2)
    run["wall_s"] = round(bars.run_seconds(timings, timeline, run.get("wall_s")), 2)
    metrics = summarize(steps, {**info, "device": device}, engines.registry().get(settings["engine"]))
    metrics["per_step"] = per_step(steps)
    # the actor's measured peak beside tune's model for the same shape, and the GPU's capacity (a job's question:
    # will it fit, with how much to spare)
    side = measured.side_by_side({"settings": settings, "metrics": metrics, "setup": setup, "engine": settings["engine"]})
    if side:
        metrics["actor_memory"] = side
    return document("certificate", {
        "rocmkit": __version__,
        "created": dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds"),
        "verdict": verdict.label,
        "exit_code": verdict.exit_code,
        "cause": cause,  # why the run did not finish well (cause.py); None when it did
        "checks": verdict.checks,
        "engine": settings["engine"],
        "settings": settings,
        "target": target,
        "host": host,
        "device": device,
        "setup": setup,
        "run": run,
        "metrics": metrics,
        "probes": probes,
        "engine_run": engine_run,  # the engine's own record (verl: the attention, rollout graphs, sleep mode)
        "numerics": numerics,  # the rollout's log-probs against the trainer's, and the weight syncs (numerics.py)
        "notes": list(notes),
        "timings": dict(timings or {}),
        "timeline": list(timeline),  # the run's phases as the watchdog named them, with their start (s into the run)
        "files": files or {},
    }, version=SCHEMA_VERSION)


def _trained_line(settings: dict) -> list[str]:
    """What was trained, in words: the model and the data (the built-in ones described), and whether learning was
    judged (a job with random weights: not)."""
    model, data = settings.get("model"), settings.get("data")
    if not model:
        return []
    size = model.removeprefix("built-in ")
    if size != model and size in tinymodel.SIZES:
        hidden, _, layers, *_ = tinymodel.SIZES[size]
        model = f"the built-in {size} model ({tinymodel.ARCHITECTURE}, {layers} layers, hidden {hidden}, made here)"
    judged = "" if settings.get("learning_required", True) else "; learning not judged (its reward means nothing)"
    data = f"the {data}" if data and data.startswith("built-in") else data or "its own data"
    return [f"- trained: {model} on {data}{judged}"]


def _phases_line(phases: dict, steps: int) -> list[str]:
    """The time in each phase, summed over the steps; the steps' whole time (the engines' timing_s/step) said
    apart: it holds the phases and what lies between them, it is not a phase beside them."""
    if not phases:
        return []
    parts = ", ".join(f"{k} {v}" for k, v in phases.items() if k != "step")
    whole = f"{'; ' if parts else ''}the steps in all {phases['step']}" if "step" in phases else ""
    return [f"- time in each phase over the {steps} step(s) (s): {parts}{whole}"]


FIRST_STEP_SLOW = 3.0  # step 1 over the others' median: worth a line of its own


def _first_step_line(per_step: list[dict]) -> list[str]:
    """Step 1 said apart where it took several times the others: its one-off warm-up (kernels compiled, caches
    filled; SGLang's JIT, 88 of its 110 s on an H100) is in the phase totals above, and a reader comparing steps
    should not take it for the pace. Said only where the throughput figures leave it out (steady)."""
    times = [r.get("timing_s/step") for r in per_step]
    rest = steady(times)
    if None in times or len(rest) == len(times):
        return []
    rest = sorted(rest)
    median = statistics.median(rest)
    if median <= 0 or times[0] < FIRST_STEP_SLOW * median:
        return []

    def s(x: float) -> str:
        return f"{x:.1f}" if x >= 1 else f"{x:.2g}"

    gen = per_step[0].get("timing_s/gen")
    of_it = f", generation {s(gen)} s of it" if gen else ""
    return [f"- step 1: {s(times[0])} s{of_it}, the later steps {s(rest[0])}–{s(rest[-1])} s (median {s(median)} s): "
            "one-off warm-up (compilation, allocator, caches), which the throughput figures leave out"]


def upgrade(cert: dict) -> dict:
    """A certificate of an earlier schema read as this one (the fields renamed; nothing is made up)."""
    if cert.get("schema") == "rocmkit.certificate/v1":
        cert = {("engine_run" if k == "verl" else k): v for k, v in cert.items()}
        cert["schema"] = f"rocmkit.certificate/v{SCHEMA_VERSION}"
    return cert


def meaningful_mfu(mfu: dict | None) -> bool:
    """Whether the MFU figure says something: below 0.1 % (the tiny model, a CPU) it prints as 0.0 % and only
    misleads, so the summary leaves it out; the JSON keeps the figure."""
    return bool(mfu) and mfu.get("update") is not None and mfu["update"] >= 0.001


def _result(c: dict) -> str:
    if c.get("skipped") or (not c["required"] and str(c.get("detail", "")).startswith("skipped:")):
        return "skipped"  # a probe that did not run has no result (earlier certificates: by their detail)
    if c["required"]:
        return "pass" if c["passed"] else "FAIL"
    return "yes (reported)" if c["passed"] else "no (reported)"


UNDER = 0.95  # tune's model below verl's measured peak by more than its error on the kept full-parameter jobs


def _memory_line(side: dict | None) -> list[str]:
    """certificate.md's line for metrics.actor_memory (tune/measured.py, side_by_side)."""
    if not side:
        return []
    text = f"- actor memory per GPU (verl's peak by step {side['step']}): {side['measured_gib']} GiB"
    if "predicted_gib" in side:
        text += f"; rocmkit tune's model: {side['predicted_gib']} GiB ({side['ratio']:.2f}x"
        if side["ratio"] < UNDER:  # say what it leaves out, or the figure reads as the job's whole peak
            text += ": it counts the update and the weight syncs, not the log-prob passes"
        text += ")"
    else:
        text += f"; rocmkit tune's model not compared: {side['not_compared']}"
    if "capacity_gib" in side:
        text += f"; GPU {side['capacity_gib']} GiB, {side['headroom_gib']} GiB above the actor's peak"
    return [text]


def _own_time_line(t: dict | None) -> list[str]:
    """rocmkit's own seconds before the run started, and the GPU probes' (in series before the run in older
    certificates, beside its start-up since)."""
    if not t or not t.get("setup_s"):
        return []
    if t.get("checks_beside_s"):  # the probes, then the setup's slow checks, beside the run's start-up
        side = ([f"GPU probes {t['probes_beside_s']:.1f} s"] if t.get("probes_beside_s") else []) + [
            f"the setup's checks {t['checks_beside_s']:.1f} s"]
        return [f"- rocmkit before the run: setup {t['setup_s']:.1f} s; beside the run's start-up: {', '.join(side)}"]
    probes = (f"; GPU probes {t['probes_beside_s']:.1f} s, beside the run's start-up" if t.get("probes_beside_s")
              else f"; GPU probes {t['probes_s']:.1f} s" if t.get("probes_s") else "")
    return [f"- rocmkit before the run: setup {t['setup_s']:.1f} s{probes}"]


def _numerics_lines(doc: dict | None, job: bool) -> list[str]:
    """certificate.md's lines for `numerics`: does the rollout run the policy the trainer trains."""
    if not doc:
        return []
    out = []
    if doc.get("status") != "not measured":
        out.append(f"- rollout vs trainer ({doc['status']}): {doc['summary']}")
    sync = doc.get("sync") or {}
    if sync.get("observed"):
        out.append(f"- weight syncs: {sync['summary']}")
    if job and doc.get("status") == "in band" and sync.get("observed") and not sync.get("problems"):
        out.append("- for this job (random weights: its reward means nothing): the rollout generated with the weights "
                   "the trainer trained at every sync, and its log-probs matched the trainer's")
    return out


def markdown(cert: dict) -> str:
    cert = upgrade(cert)
    t, mt, run = cert["target"], cert["metrics"], cert["run"]
    what = (f"image `{t['image']}` ({t.get('id', '')[:19]})" if t.get("image")
            else f"this host (Python {t.get('python')}, torch {t.get('packages', {}).get('torch')})")
    why = cert.get("cause")
    lines = [
        f"# rocmkit certificate: {cert['verdict'].upper()}" + (f" — {why['summary']}" if why else ""),
        "",
        *([f"- what to do: {why['hint']}"] if why and why.get("hint") else []),
        *([f"- evidence ({ev.get('file')}" + (f", line {ev['line']}" if ev.get("line") else "") + f"): `{ev['text'][:300]}`"
           for ev in (why or {}).get("evidence", [])[-3:]]),
        f"- engine: {cert['engine']}; target: {what}",
        *_trained_line(cert.get("settings") or {}),
    ]
    if run.get("status") == "not started":  # nothing trained: no device, steps, reward or throughput to show
        lines.append(f"- nothing was trained (of {cert['settings'].get('steps', '?')} steps asked)"
                     + (f"; device: {cert['device']}" if cert.get("device") else ""))
    else:
        began = bars.after_startup(cert)
        lines += [
            f"- device: {cert.get('device') or 'not reported'}; steps: {mt['steps']} of {cert['settings']['steps']}; "
            f"wall: {bars.run_end(cert):.1f} s",
            *([f"- start-up: {began.start:.1f} s, until {began.detail or began.row.lower()}"] if began else []),
            *_own_time_line(cert.get("timings")),
            *([f"- ended by: {run['ended_by']}"] if run.get("ended_by") else []),
            f"- reward: {mt['reward']['first']} → {mt['reward']['last']}",
            f"- rollout: {mt['rollout_tokens_per_s']} tokens/s; training: {mt['training_tokens_per_s']} tokens/s"
            + (f"; MFU (update): {mt['mfu']['update']:.1%}" if meaningful_mfu(mt.get("mfu")) else ""),
            *_phases_line(mt["phases_s"], mt["steps"]),
            *_first_step_line(mt.get("per_step") or []),
            *_memory_line(mt.get("actor_memory")),
        ]
    lines += _numerics_lines(cert.get("numerics"), job=bool((cert.get("engine_run") or {}).get("job")))
    engine = engines.registry().get(cert["engine"])
    lines += engine.summary_lines(cert.get("engine_run")) if engine else []
    stop = run.get("stop")
    if stop:
        lines.append(f"- stopped by the watchdog: {stop['reason']} in {stop['phase']} ({stop['detail']}), "
                     f"{stop['quiet_s']} s" + (f"; pattern {stop['pattern']}" if stop.get("pattern") else "")
                     + (f"; read: {', '.join(f'{k} ({v})' for k, v in stop['read'].items() if k != 'output')}"
                        if len(stop.get("read") or {}) > 1 else ""))
        lines += ["", "```", *stop["lines"][-12:], "```"]
    lines += [f"- note: {n}" for n in cert.get("notes", [])]
    if (cert.get("files") or {}).get("picture"):  # beside this file in the run folder
        lines += ["", f"![The run's phases over time, and the reward per step]({PurePath(cert['files']['picture']).name})"]
    lines += ["", "| check | result | detail |", "|---|---|---|"]
    lines += [f"| {c['name']} | {_result(c)} | {c['detail']} |" for c in cert["checks"]]
    stall = run.get("stall_report")
    if stall:  # after the checks: the table of every process is long
        from ..stall.report import markdown as stall_markdown

        lines += stall_markdown(stall) if stall.get("verdict") else ["", f"Stall report: {stall.get('error')}"]
    gpus = cert["host"].get("gpus") or []
    lines += ["", f"Host: {len(gpus)} AMD GPU(s) in the KFD topology" + (f" ({gpus[0].get('product')})" if gpus else "")
              + f"; ROCm {cert['host'].get('rocm') or 'n/a'}."]
    lines += engine.settings_section(cert["settings"]) if engine else []  # verl: its start-up cuts
    return "\n".join(lines) + "\n"
