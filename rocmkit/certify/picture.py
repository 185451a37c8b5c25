"""The certificate's picture (certificate.svg in the run folder): the run's timeline as horizontal bars (start-up,
then each step's generation, log-probs and update, and weight sync, as the watchdog named them) over the reward
per step, and where the run logged them, the rollout's log-probs against the trainer's per step, so a reader sees
at a glance where the time went, whether the model learned, and whether it sampled the policy it trained.

What is drawn is read from the certificate by pure functions (segments, rewards, judged, stop_mark, title);
draw() turns them into an SVG with matplotlib's object API (no pyplot, no display, no global state), and
write() puts it in the folder, or says in one line why it could not."""

from __future__ import annotations

import io
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

from ..fileio import write_atomic
from . import engines
from .bars import STEP_ROWS, Segment, run_end, segments

FILE = "certificate.svg"

# Each kind of bar: its legend text and colour (Okabe-Ito's palette, told apart by colour-blind readers too).
KINDS = {
    "start-up": ("start-up", "#999999"),
    "generation": ("generation (the model answers the prompts)", "#0072B2"),
    "update": ("log-probs and update (training on the answers)", "#E69F00"),
    "sync": ("weight sync (new weights to the generator)", "#009E73"),
    "step": ("training step (generation and update)", "#56B4E9"),
    "finishing": ("finishing (after the last step)", "#CC79A7"),
}
_JUDGED_RE = re.compile(r"reward (-?[\d.]+) \(first (\d+) steps?\) -> (-?[\d.]+) \(last \d+\): [+-][\d.]+, "
                        r"needs >= \+([\d.]+)")
# the watchdog's phase kinds as the picture says them
PHASE_WORDS = {"start-up": "start-up", "rollout": "generation", "update": "log-probs and update",
               "weight sync": "weight sync"}


def rewards(cert: dict) -> list[tuple[int, float]]:
    """(step, mean reward) for each step that logged one (TRL's `reward`, verl's `critic/score/mean`)."""
    out = []
    for row in (cert.get("metrics") or {}).get("per_step") or []:
        value = next((row[k] for k in ("reward", "critic/score/mean") if k in row), None)
        if value is not None:
            out.append((int(row["step"]), float(value)))
    return out


def judged(cert: dict) -> dict | None:
    """How the reward was judged: the means of the first and last `steps` steps and the rise the verdict needed,
    read from the certificate's "reward rose" check; None when it judged none."""
    for c in cert.get("checks") or []:
        if c.get("name") == "reward rose":
            m = _JUDGED_RE.search(str(c.get("detail", "")))
            if m:
                return {"first": float(m.group(1)), "steps": int(m.group(2)), "last": float(m.group(3)),
                        "margin": float(m.group(4)), "passed": bool(c.get("passed")),
                        "required": bool(c.get("required"))}
    return None


def stop_mark(cert: dict) -> tuple[float, str, float] | None:
    """Where the run was stopped or ended badly: (seconds, what to write there, seconds it was quiet before)."""
    run = cert.get("run") or {}
    stop, status, why = run.get("stop"), run.get("status"), cert.get("cause")
    quiet = float((stop or {}).get("quiet_s") or 0.0)
    if stop and stop.get("reason") == "stalled":
        phase = PHASE_WORDS.get(stop.get("phase"), stop.get("phase"))
        return run_end(cert), f"stopped: stalled in {phase} ({stop.get('detail')})", quiet
    if why and status != "timed out":  # a run that died, or an engine error: what ended it
        return run_end(cert), "ended: " + textwrap.shorten(why["summary"], 110, placeholder=" …"), quiet
    if stop:
        phase = PHASE_WORDS.get(stop.get("phase"), stop.get("phase"))
        return run_end(cert), f"stopped: engine error in {phase} ({stop.get('detail')})", quiet
    if status == "timed out":
        return run_end(cert), "stopped: the time limit (--timeout) was reached", 0.0
    if status == "crashed":
        return run_end(cert), f"the training command exited with code {run.get('exit_code')}", 0.0
    return None


def device_text(device: str | None) -> str:
    if not device:
        return "an unknown device"
    if device == "cpu":
        return "the CPU"
    names = [d.strip() for d in device.split(",")]
    return f"{len(names)} × {names[0]}" if len(set(names)) == 1 and len(names) > 1 else device


def title(cert: dict) -> str:
    verdict = str(cert.get("verdict", "?"))
    label = verdict.upper() if ":" not in verdict else "NOT CERTIFIED ({})".format(verdict.split(":", 1)[1].strip())
    known = engines.registry().get(cert.get("engine"))
    engine = known.title or known.name if known else str(cert.get("engine"))
    return f"{engine} on {device_text(cert.get('device'))}: {label}"


def subtitle(cert: dict) -> str:
    t, mt = cert.get("target") or {}, cert.get("metrics") or {}
    where = f"image {t['image']}" if t.get("image") else "this host's Python"
    steps = f"{mt.get('steps', 0)} of {(cert.get('settings') or {}).get('steps', '?')} training steps"
    if (cert.get("run") or {}).get("status") == "not started":
        return f"GRPO smoke training in {where}: not started"
    return f"GRPO smoke training in {where}; {steps}; {run_end(cert):.1f} s from launch to end"


def _not_started(cert: dict) -> str:
    failed = [c for c in cert.get("checks") or [] if c.get("required") and not c.get("passed")]
    why = failed[0]["detail"] if failed else (cert.get("run") or {}).get("status", "")
    return "The training did not start" + (f":\n{_wrap(str(why), 110)}" if why else ".")


def _wrap(text: str, width: int) -> str:
    return "\n".join(textwrap.wrap(text, width)[:4])


def draw(cert: dict, fmt: str = "svg") -> str | bytes:
    """The picture as SVG text (or another format matplotlib writes, as bytes: "png" to look at it). Needs
    matplotlib (ImportError without it)."""
    from matplotlib import rc_context
    from matplotlib.figure import Figure

    # text stays text (not paths), and the same certificate gives the same bytes (no date, fixed ids)
    with rc_context({"svg.fonttype": "none", "svg.hashsalt": "rocmkit", "font.size": 9}):
        points = mismatch(cert)
        fig = Figure(figsize=(10, 9 if points else 7), layout="constrained")
        axes = fig.subplots(3 if points else 2, 1, height_ratios=[3, 2, 2][:3 if points else 2])
        fig.suptitle(title(cert), fontsize=13, fontweight="bold")
        axes[0].set_title(subtitle(cert), fontsize=9, color="#444444")
        _timeline(axes[0], cert)
        _reward(axes[1], cert)
        if points:
            _mismatch(axes[2], cert, points)
        out = io.StringIO() if fmt == "svg" else io.BytesIO()
        fig.savefig(out, format=fmt, **({"metadata": {"Date": None}} if fmt == "svg" else {"dpi": 110}))
    return out.getvalue()


def _timeline(ax, cert: dict) -> None:
    from matplotlib.patches import Patch

    segs = segments(cert)
    ax.set_xlabel("seconds since the training command started")
    if not segs:
        ax.set_axis_off()
        ax.text(0.5, 0.5, _not_started(cert) if (cert.get("run") or {}).get("status") == "not started"
                else "No phases were recorded.", ha="center", va="center", transform=ax.transAxes, fontsize=10)
        return
    rows: list[str] = []
    for s in segs:  # start-up rows in the order they began, then the step rows in a fixed order
        if s.kind == "start-up" and s.row not in rows:
            rows.append(s.row)
    rows += [r for k, r in STEP_ROWS.items() if any(s.kind == k for s in segs)]
    for i, s in enumerate(segs):  # each bar's id names its kind: the SVG can be read back (tests/test_certify_picture)
        ax.broken_barh([(s.start, s.end - s.start)], (rows.index(s.row) - 0.35, 0.7), facecolors=KINDS[s.kind][1],
                       edgecolor="white", linewidth=0.3, gid=f"bar-{s.kind}-{i}")
    ax.set_yticks(range(len(rows)), rows)
    ax.set_ylim(len(rows) - 0.4, -0.9)  # top to bottom in time order; room above for the step numbers
    end = run_end(cert)
    ax.set_xlim(0, end * 1.02 or 1)
    ax.grid(axis="x", color="#dddddd", linewidth=0.5)
    ax.set_axisbelow(True)
    _step_numbers(ax, segs, rows, end)
    handles = [Patch(facecolor=KINDS[k][1], label=KINDS[k][0]) for k in KINDS if any(s.kind == k for s in segs)]
    mark = stop_mark(cert)
    if mark:
        at, text, quiet = mark
        if quiet > 0:
            ax.axvspan(max(0.0, at - quiet), at, color="#D55E00", alpha=0.12, linewidth=0)
        ax.axvline(at, color="#D55E00", linewidth=1.5, gid="stopped-here")
        right = at > end / 2  # the words on the side of the line with room, in the top row's free space
        ax.annotate(text + (f"\n(no new output for {quiet:.0f} s, shaded)" if quiet > 0 else ""), (at, -0.85),
                    xytext=(-6 if right else 6, 0), textcoords="offset points", ha="right" if right else "left",
                    va="top", color="#D55E00", fontsize=9)
        handles.append(Patch(facecolor="#D55E00", label="where the run ended" if text.startswith("ended")
                             else "where the run was stopped"))
    ax.legend(handles=handles, loc="lower left", fontsize=8, framealpha=0.9)


def numbered_steps(starts: dict[int, float], end: float) -> tuple[int, list[int]]:
    """Which steps get their number over the bars: every one where they fit without touching (1.8 % of the run
    apart), else the first step and every k-th (k = 2, 5, 10, 20, 50, ...), the smallest k that fits. A number is
    never dropped here and there: a reader counts on the ones between being the same distance apart."""
    gap = end * 0.018
    every = 1
    while True:
        shown = [n for n in sorted(starts) if n == min(starts) or n % every == 0]
        if all(starts[b] - starts[a] >= gap for a, b in zip(shown, shown[1:])):  # at last the first step alone
            return every, shown
        every = next(k * m for k in (1, 10, 100, 1000, 10**4, 10**5, 10**6) for m in (2, 5, 10) if k * m > every)


def _step_numbers(ax, segs: list[Segment], rows: list[str], end: float) -> None:
    """Each step's number above its first bar (numbered_steps: all of them, or every k-th, said before them)."""
    starts: dict[int, float] = {}
    for s in segs:
        if s.step is not None and s.kind != "start-up":
            starts.setdefault(s.step, s.start)
    if not starts:
        return
    first_row = min(rows.index(s.row) for s in segs if s.step is not None)
    every, shown = numbered_steps(starts, end)
    for n in shown:
        ax.text(starts[n], first_row - 0.37, str(n), ha="left", va="bottom", fontsize=7, color="#333333",
                gid=f"step-number-{n}")
    ordinal = "" if every == 1 else f" (every {every}{'nd' if every == 2 else 'th'})"
    # set off by points, not a trailing space: SVG collapses a text's trailing whitespace ("step (every 2nd)1")
    ax.annotate(f"step{ordinal}", (min(starts.values()), first_row - 0.37), xytext=(-3, 0), textcoords="offset points",
                ha="right", va="bottom", fontsize=7, color="#333333", gid="step-numbers")


def _reward(ax, cert: dict) -> None:
    points = rewards(cert)
    ax.set_xlabel("training step")
    ax.set_ylabel("mean reward of the step's answers")
    if not points:
        ax.text(0.5, 0.5, "No step logged a reward.", ha="center", va="center", transform=ax.transAxes, fontsize=10)
        ax.set_xticks([])
        ax.set_yticks([])
        return
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    ax.plot(xs, ys, marker="o", markersize=4, color="#0072B2", label="reward per step", gid="reward-per-step")
    ax.grid(color="#dddddd", linewidth=0.5)
    ax.set_xlim(min(xs) - 0.5, max(xs) + 0.5)
    if len(xs) <= 24:
        ax.set_xticks(xs)
    j = judged(cert)
    if j:
        q = j["steps"]
        ax.hlines(j["first"], xs[0] - 0.3, xs[min(q, len(xs)) - 1] + 0.3, colors="#555555", linestyles="--",
                  label=f"mean of the first {_steps(q)}: {j['first']:.2f}")
        ax.hlines(j["last"], xs[-min(q, len(xs))] - 0.3, xs[-1] + 0.3, colors="#009E73", linestyles="--",
                  label=f"mean of the last {_steps(q)}: {j['last']:.2f}")
        needed = j["first"] + j["margin"]
        verdict = "reached" if j["passed"] else "not reached"
        ax.axhline(needed, color="#D55E00", linestyle=":", linewidth=1,
                   label=f"needed for a pass: first + {j['margin']:g} = {needed:.2f} ({verdict})"
                   + ("" if j["required"] else "; reported only"))
    ax.legend(loc="best", fontsize=8, framealpha=0.9)


def mismatch(cert: dict) -> list[tuple[int, float]]:
    """The judged rollout-trainer figure per step (certify/numerics.py), where the run logged one."""
    doc = cert.get("numerics") or {}
    f = doc.get("figure")
    return [(r["step"], r[f]) for r in doc.get("per_step") or () if f and f in r and r[f] > 0]


def _mismatch(ax, cert: dict, points: list[tuple[int, float]]) -> None:
    """The rollout's log-probs against the trainer's per step, on a log scale, under the band's limit; a weight
    sync the witness found broken is marked at the step it fed."""
    doc = cert["numerics"]
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    ax.set_yscale("log")
    ax.set_xlabel("training step")
    ax.set_ylabel("rollout vs trainer")
    ax.plot(xs, ys, marker="o", markersize=4, color="#CC79A7", label=doc.get("what") or doc["figure"],
            gid="rollout-vs-trainer")
    limit = (doc.get("band") or {}).get("limit")
    if limit:
        ax.axhline(limit, color="#D55E00", linestyle=":", linewidth=1, label=f"band: at most {limit:.2g} "
                   f"({doc['status']})")
    broken = sorted({p["sync"] for p in ((doc.get("sync") or {}).get("problems") or ())})
    fed = [(n, y) for n, y in points if n in broken]  # sync N feeds step N (sync 1 came before step 1)
    if fed:
        ax.plot([n for n, _ in fed], [y for _, y in fed], "x", color="#D55E00", markersize=9, mew=2,
                label="a weight sync that did not reach the rollout", gid="broken-sync")
    ax.grid(color="#dddddd", linewidth=0.5)
    ax.set_xlim(min(xs) - 0.5, max(xs) + 0.5)
    if len(xs) <= 24:
        ax.set_xticks(xs)
    ax.legend(loc="best", fontsize=8, framealpha=0.9)


def _steps(n: int) -> str:
    return "step" if n == 1 else f"{n} steps"


def write(cert: dict, folder: Path) -> str | None:
    """Draw the certificate's picture into `folder`; None when written, else why not (one line). The certificate
    is written either way: a picture that cannot be drawn must never cost the certificate."""
    try:
        svg = draw(cert)
    except ImportError as exc:
        missing = exc.name or "matplotlib"
        return (f"{missing} is not installed in {sys.executable}"
                + ("" if missing == "matplotlib" else " (matplotlib needs it)")
                + ": `pip install 'matplotlib>=3.6'` there draws it next time")
    except Exception as exc:  # noqa: BLE001 — a certificate with a bug in its picture still beats none
        return f"drawing it failed: {type(exc).__name__}: {exc}"
    write_atomic(folder / FILE, svg)
    return None


if __name__ == "__main__":  # `python -m rocmkit.certify.picture CERTIFICATE.json PICTURE.svg`: redraw one
    import json

    source, dest = sys.argv[1:3]
    write_atomic(dest, draw(json.loads(Path(source).read_text())))
