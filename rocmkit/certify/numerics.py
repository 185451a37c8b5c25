"""Does the rollout sample from the policy the trainer trains? The figures verl and TRL compute every step from
the rollout's log-probs of the tokens it generated and the trainer's log-probs of the same tokens, read from the
run's metrics, judged against bands measured on healthy runs and on runs with a broken weight sync
(resources/numerics_bands.toml), and what a mismatch most likely comes from. Pure: takes data, returns data.

verl 0.9.1 (every step with its default rollout.calculate_log_probs=True, verl/utils/debug/metrics.py and
verl/trainer/ppo/rollout_corr_helper.py): `training/rollout_probs_diff_{mean,max}` (|p_rollout - p_trainer| over
the response tokens, in probability), `training/rollout_actor_probs_pearson_corr`, and `rollout_corr/kl` (the mean
of log p_rollout - log p_trainer), `rollout_corr/k3_kl` (the k3 estimate of KL, never negative),
`rollout_corr/log_ppl_diff{,_min,_max}` (the sequences' log-perplexity differences). TRL 1.x with vLLM
(trl/trainer/grpo_trainer.py): `sampling/sampling_logp_difference/{mean,max}` (|log p_trainer - log p_vllm|) and
`sampling/importance_sampling_ratio/{min,mean,max}`."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from functools import cache

# our name: (the engine's metric, what it is, for the certificate: no "|", which would split certificate.md's table)
FIGURES = {
    "k3_kl": ("rollout_corr/k3_kl", "KL per token (k3 estimate)"),
    "kl": ("rollout_corr/kl", "mean log-prob difference, rollout - trainer"),
    "prob_diff_mean": ("training/rollout_probs_diff_mean", "mean absolute probability difference, rollout - trainer"),
    "prob_diff_max": ("training/rollout_probs_diff_max", "max absolute probability difference, rollout - trainer"),
    "pearson": ("training/rollout_actor_probs_pearson_corr", "correlation of the probabilities"),
    "log_ppl_diff": ("rollout_corr/log_ppl_diff", "log-perplexity difference"),
    "log_ppl_diff_min": ("rollout_corr/log_ppl_diff_min", "its smallest over the sequences"),
    "log_ppl_diff_max": ("rollout_corr/log_ppl_diff_max", "its largest"),
    "logp_diff_mean": ("sampling/sampling_logp_difference/mean", "mean absolute log-prob difference, trainer - rollout"),
    "logp_diff_max": ("sampling/sampling_logp_difference/max", "max absolute log-prob difference, trainer - rollout"),
    "is_ratio_min": ("sampling/importance_sampling_ratio/min", "importance-sampling ratio, smallest"),
    "is_ratio_max": ("sampling/importance_sampling_ratio/max", "importance-sampling ratio, largest"),
}
# The figure each engine is judged by, the first of these it logged: a log-space one where there is one (a
# probability difference hides a mismatch on unlikely tokens).
JUDGED = ("k3_kl", "logp_diff_mean", "prob_diff_mean")
# Every sequence off by nearly the same log-ratio (its spread over the sequences under this share of the mean
# difference) is a normalisation difference, not noise: the two softmaxes span different sets of tokens.
SAME_RATIO = 0.1


@dataclass(frozen=True)
class Band:
    engine: str
    rollout: str
    device: str  # "cpu" or "gpu"
    figure: str
    healthy: tuple[tuple[float, str], ...]  # (the figure of a run that trained as it should, where it was measured)
    faults: tuple[tuple[float, str], ...]  # (the figure of a run with a broken sync, the fault and where)
    # "all": each run's largest figure over its steps; "first": the first step's, where both sides hold the same
    # weights and nothing was trained yet, so the rollout's own numerics show alone (a fault there: another dtype)
    steps: str = "all"

    @property
    def healthy_max(self) -> float:
        return max(v for v, _ in self.healthy)

    @property
    def fault_min(self) -> float | None:
        return min((v for v, _ in self.faults), default=None)

    @property
    def limit(self) -> float | None:
        """Half-way between the worst healthy run and the mildest fault, on a log scale (their geometric mean): as
        far from each as the measurements allow. None without a measured fault: the figure is reported, not judged."""
        f = self.fault_min
        return math.sqrt(self.healthy_max * f) if f is not None and f > self.healthy_max > 0 else None

    def doc(self) -> dict:
        return {"limit": self.limit, "healthy_max": self.healthy_max, "fault_min": self.fault_min,
                "runs": len(self.healthy), "sources": [s for _, s in self.healthy + self.faults]}


def _band(row: dict, origin: str) -> Band:
    from ..errors import InputFileError

    for key in ("engine", "rollout", "device", "figure", "healthy"):
        if key not in row:
            raise InputFileError(origin, key, "missing")
    if row["figure"] not in FIGURES:
        raise InputFileError(origin, "figure", f"{row['figure']!r} is none of {', '.join(FIGURES)}")

    def runs(key: str) -> tuple[tuple[float, str], ...]:
        out = []
        for i, r in enumerate(row.get(key, [])):
            if not isinstance(r.get("value"), (int, float)) or not isinstance(r.get("source"), str):
                raise InputFileError(origin, f"{key}[{i}]", "needs a number `value` and a `source`")
            out.append((float(r["value"]), r["source"]))
        return tuple(out)

    if row.get("steps", "all") not in ("all", "first"):
        raise InputFileError(origin, "steps", f"{row['steps']!r}: all or first")
    return Band(row["engine"], row["rollout"], row["device"], row["figure"], runs("healthy"), runs("faults"),
                row.get("steps", "all"))


@cache
def bands() -> tuple[Band, ...]:
    from importlib import resources

    from ..tomlread import load_toml_text

    origin = "rocmkit/resources/numerics_bands.toml"
    text = resources.files("rocmkit.resources").joinpath("numerics_bands.toml").read_text()
    return tuple(_band(row, origin) for row in load_toml_text(text, origin).get("band", []))


def find_band(engine: str, rollout: str | None, device: str, figure: str, steps: str = "all") -> Band | None:
    return next((b for b in bands() if (b.engine, b.rollout, b.device, b.figure, b.steps)
                 == (engine, rollout, device, figure, steps)), None)


def per_step(steps: dict[int, dict[str, float]]) -> list[dict]:
    """The figures each step logged, under our names."""
    out = []
    for n in sorted(steps):
        row = {name: steps[n][key] for name, (key, _) in FIGURES.items() if key in steps[n]}
        if row:
            out.append({"step": n, **{k: float(f"{v:.6g}") for k, v in row.items()}})
    return out


def judged_series(rows: list[dict]) -> tuple[str | None, list[tuple[int, float]]]:
    """The figure an engine is judged by (the first of JUDGED its rows hold) and its finite values, step by step."""
    figure = next((f for f in JUDGED if any(f in r for r in rows)), None)
    return figure, [(r["step"], r[figure]) for r in rows if figure and figure in r and math.isfinite(r[figure])]


def steps_of(rows: list[dict]) -> dict[int, dict[str, float]]:
    """per_step's rows read back into the engine's metrics (a kept certificate judged again)."""
    return {r["step"]: {FIGURES[k][0]: v for k, v in r.items() if k in FIGURES} for r in rows}


def _same_ratio(rows: list[dict]) -> bool:
    """Every sequence of the first step off by the same log-ratio (before training moved anything)."""
    r = rows[0]
    if not all(k in r for k in ("log_ppl_diff", "log_ppl_diff_min", "log_ppl_diff_max")):
        return False
    spread = r["log_ppl_diff_max"] - r["log_ppl_diff_min"]
    return abs(r["log_ppl_diff"]) > 0 and spread < SAME_RATIO * abs(r["log_ppl_diff"])


def judge(steps: dict[int, dict[str, float]], *, engine: str, rollout: str | None, device: str,
          context: dict | None = None) -> dict:
    """The certificate's `numerics`: the figures per step, the judged one's worst against its band, and when it is
    out of band, whether it was so from the first step (the two sides compute differently) or only after the first
    update (the rollout did not get the trainer's new weights)."""
    rows = per_step(steps)
    figure, series = judged_series(rows)
    doc = {"per_step": rows, "figure": figure, "context": context or {}}
    if not series:
        return {**doc, "status": "not measured"}
    worst_step, worst = max(series, key=lambda p: p[1])
    doc.update(worst=worst, worst_step=worst_step, median=statistics.median(v for _, v in series),
               what=FIGURES[figure][1], where=f"{engine} with {rollout} on {'a CPU' if device == 'cpu' else 'GPUs'}")
    whole, first = (find_band(engine, rollout, device, figure, k) for k in ("all", "first"))
    doc["band"] = whole.doc() if whole else None
    doc["first_step_band"] = first.doc() if first else None
    limit, first_limit = (b.limit if b else None for b in (whole, first))
    if limit is None and first_limit is None:
        return {**doc, "status": "reported", "summary": _summary(doc)}
    over = [(n, v) for n, v in series if limit is not None and v > limit]
    first_over = first_limit is not None and series[0][0] == 1 and series[0][1] > first_limit
    doc["status"] = "out of band" if over or first_over else "in band"
    if doc["status"] == "out of band":
        doc["onset"] = ("first step" if first_over or over[0][0] == series[0][0]
                        else f"after step {over[0][0] - 1}")
        doc["likely"] = likely_cause(doc["onset"], rows, context or {})
    doc["summary"] = _summary(doc)
    return doc


def _summary(doc: dict) -> str:
    text = f"{doc['what']}: at most {doc['worst']:.3g} (step {doc['worst_step']}), median {doc['median']:.3g}"
    limit = (doc.get("band") or {}).get("limit")
    first = (doc.get("first_step_band") or {}).get("limit")
    if limit is None and first is None:
        return text + (f"; no broken-sync run measured for {doc['where']}: reported, not judged" if doc.get("band")
                       else f"; no band measured for {doc['where']}: reported, not judged")
    bands = ([f"at most {limit:.3g}"] if limit is not None else []) + (
        [f"at most {first:.3g} at step 1 (the same weights on both sides)"] if first is not None else [])
    text += f"; band for {doc['where']}: " + ", ".join(bands)
    if doc["status"] == "out of band":
        text += (", out of it from the first step" if doc["onset"] == "first step" else f", out of it {doc['onset']}")
        text += f": {doc['likely']}"
    return text


def likely_cause(onset: str, rows: list[dict], context: dict) -> str:
    """Which side is likely at fault, from when the mismatch began and what the run used."""
    if onset != "first step":
        return ("in step 1 the two sides agreed, then the rollout drifted from the trainer: its weights did not follow "
                "the updates (a weight sync that sent nothing, or not all of the model)")
    if _same_ratio(rows):
        return ("every sequence is off by the same log-ratio from the first step: the two sides normalise over "
                "different sets of tokens (a model with output rows beyond its tokenizer, which verl's vLLM rollout "
                "masks and the trainer does not)")
    used = [f"{k} {v}" for k, v in context.items() if v not in (None, "")]
    return ("the two sides computed different log-probs before any update: not the weight sync but the rollout's "
            "numerics (its dtype, KV-cache dtype, attention or sampling kernels, graphs) against the trainer's"
            + (f"; this run used {', '.join(used)}" if used else ""))


def checks(doc: dict) -> list[dict]:
    """The verdict's checks: the log-probs (required where the band has a limit, reported where the figure has no
    band, none where the run logged none: TRL without vLLM generates with the trained model itself), and the weight
    syncs where they were watched (syncproof.py)."""
    from . import syncproof
    from .judge import check as make

    out = []
    if doc["status"] != "not measured":
        out.append(make("rollout log-probs match the trainer's", doc["status"] != "out of band", doc["summary"],
                        required=doc["status"] != "reported"))
    sync = syncproof.check(doc["sync"]) if doc.get("sync") else None
    return out + ([sync] if sync else [])


def bands_markdown() -> str:
    """The bands table of the certification guide (docs/guides/certification.md holds it; a test keeps them equal)."""
    lines = ["| engine, rollout, device | figure | steps | healthy at most (runs) | broken sync at least | limit |",
             "|---|---|---|---|---|---|"]
    for b in bands():
        lines.append(f"| {b.engine}, {b.rollout}, {b.device} | `{FIGURES[b.figure][0]}` | "
                     f"{'every step' if b.steps == 'all' else 'step 1'} | "
                     f"{b.healthy_max:.3g} ({len(b.healthy)}) | "
                     + (f"{b.fault_min:.3g} | " if b.fault_min is not None else "not measured | ")
                     + (f"{b.limit:.3g} |" if b.limit is not None else "reported, not judged |"))
    lines += ["", "Where each figure was measured:", ""]
    lines += [f"- {b.engine}, {b.rollout}, {b.device}, {'every step' if b.steps == 'all' else 'step 1'}: " + "; ".join(
        [f"healthy {v:.3g}: {s}" for v, s in b.healthy] + [f"broken {v:.3g}: {s}" for v, s in b.faults]) for b in bands()]
    return "\n".join(lines) + "\n"
