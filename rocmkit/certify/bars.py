"""The run's timeline as bars, as plain data: each phase the watchdog named lasts until the next one starts. The
certificate's text (its start-up line, its wall time) and its picture read the same bars, so the two never say
different things about one run."""

from __future__ import annotations

import re
from dataclasses import dataclass

# The rows of the step part of the chart, by kind, top to bottom.
STEP_ROWS = {"generation": "Generation", "update": "Log-probs and update", "sync": "Weight sync",
             "step": "Training steps", "finishing": "Finishing"}
_STEP_RE = re.compile(r"^step (\d+)")


def run_seconds(timings: dict | None, timeline=(), measured: float | None = None) -> float:
    """The run's time, from the training command's start to its end: the one figure the progress line, the
    certificate (run.wall_s) and its picture say. rocmkit's own clock (timings.run_s, which the timeline's at_s are
    on), never shorter than the last phase the watchdog saw begin; `measured` where there is no run_s (a run that
    never started, an older certificate)."""
    last = max((float(e["at_s"]) for e in timeline or ()), default=0.0)
    return max(float((timings or {}).get("run_s") or measured or 0.0), last)


@dataclass(frozen=True)
class Segment:
    row: str  # the chart's row ("Starting Ray", "Generation")
    kind: str  # a key of KINDS
    start: float  # seconds since the training command started
    end: float
    step: int | None  # the step it belongs to, None for start-up and finishing
    detail: str = ""  # the watchdog's words for the phase ("step 1: first weight sync")


def run_end(cert: dict) -> float:
    """When the run ended on the timeline's clock: the run's time as the certificate says it."""
    return run_seconds(cert.get("timings"), cert.get("timeline"), (cert.get("run") or {}).get("wall_s"))


def segments(cert: dict) -> list[Segment]:
    """The timeline as bars: each phase lasts until the next one starts, the last one until the run ended. A run
    whose steps show no update markers (TRL's, verl's without vLLM's sleep mode: on the CPU) gets whole steps:
    what it printed does not split them."""
    timeline = cert.get("timeline") or []
    split = any(e["phase"] == "update" for e in timeline)
    end = run_end(cert)
    # verl marks step N+1 as it logs step N: in a run that finished (learning proven at step 8, or all steps ran)
    # a step after the last one logged never ran, and its bar is the run's finishing
    run = cert.get("run") or {}
    logged = (cert.get("metrics") or {}).get("steps") if run.get("status") == "finished" else None
    out = []
    for i, e in enumerate(timeline):
        start = float(e["at_s"])
        stop = float(timeline[i + 1]["at_s"]) if i + 1 < len(timeline) else end
        if stop <= start:
            continue  # two markers at once: the later one names the phase
        detail = str(e.get("detail", ""))
        if e["phase"] == "start-up":
            out.append(Segment(detail[:1].upper() + detail[1:], "start-up", start, stop, None, detail))
            continue
        after = timeline[i + 1]["phase"] if i + 1 < len(timeline) else None
        if detail.startswith("finishing"):
            kind = "finishing"
        elif e["phase"] == "weight sync" and after == "update":
            # a wake-up then a sleep with no step line between: vLLM woke, took the weights and generated (verl's
            # first step; in the others the step line follows the wake-up within a second and starts generation)
            kind = "generation"
        elif not split:  # verl's first sync marker comes before step 1 on every device: it holds the whole step
            kind = "step"
        else:
            kind = {"update": "update", "weight sync": "sync"}.get(e["phase"], "generation")
        m = _STEP_RE.match(detail)
        step = int(m.group(1)) if m else None
        if step is not None and logged is not None and step > logged:
            kind, step, detail = "finishing", None, "finishing"
        out.append(Segment(STEP_ROWS[kind], kind, start, stop, step, detail))
    return _first_step(out, cert)


def after_startup(cert: dict) -> Segment | None:
    """The bar that ended the start-up (Ray, the workers, the rollout engine), which lasted until its start: the
    first bar that is not start-up, as the picture draws it (TRL's first step placed inside its last start-up
    phase)."""
    return next((s for s in segments(cert) if s.kind != "start-up"), None)


def _first_step(out: list[Segment], cert: dict) -> list[Segment]:
    """TRL prints nothing when its first step starts, only when it ends: the step ran in the last start-up phase.
    Its own measure (timing_s/step) places it there, ending where the next step begins."""
    steps = [i for i, s in enumerate(out) if s.step is not None]
    rows = (cert.get("metrics") or {}).get("per_step") or []
    if not steps or out[steps[0]].step != 2 or not rows or rows[0].get("step") != 1 or steps[0] == 0:
        return out
    k, took = steps[0], float(rows[0].get("timing_s/step") or 0.0)
    before, at = out[k - 1], out[k].start
    if not 0 < took < at - before.start:
        return out
    return [*out[:k - 1], Segment(before.row, before.kind, before.start, at - took, before.step, before.detail),
            Segment(out[k].row, out[k].kind, at - took, at, 1, "step 1"), *out[k:]]


