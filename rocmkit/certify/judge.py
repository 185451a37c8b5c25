"""The verdict: did the run finish, stay finite, and (on the built-in task) learn?"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

from . import metrics as m

# Reward on the built-in task starts near the random policy's digit share and must rise by this much
# (mean of the last quarter of steps minus mean of the first quarter; the reward lies in [0, 2]).
LEARNING_MARGIN = 0.3
REWARD_KEYS = ("reward", "critic/score/mean")
LOSS_KEYS = ("loss", "actor/pg_loss", "actor/loss")


@dataclass
class Verdict:
    passed: bool
    checks: list[dict] = field(default_factory=list)  # {name, passed, detail, required}

    def to_json(self) -> dict:
        return {"passed": self.passed, "checks": self.checks}


def judge(steps: dict[int, dict[str, float]], requested: int, run_status: str, *, require_learning: bool,
          margin: float = LEARNING_MARGIN) -> Verdict:
    checks = []

    def add(name, ok, detail, required=True):
        checks.append({"name": name, "passed": bool(ok), "detail": detail, "required": required})

    add("run finished", run_status == "finished", f"run status: {run_status}")
    done = len(steps)
    add("all steps ran", done >= requested, f"{done} of {requested} steps logged")
    losses = m.series(steps, *LOSS_KEYS)
    everything = [v for s in steps.values() for k, v in s.items() if k.startswith(("loss", "actor/", "reward",
                                                                                     "critic/", "grad_norm", "kl"))]
    add("losses finite", bool(losses) and m.finite(everything),
        f"{len(losses)} loss values; non-finite: {sum(1 for v in everything if v != v or v in (float('inf'), float('-inf')))}")
    rewards = m.series(steps, *REWARD_KEYS)
    if len(rewards) >= 4:
        q = max(1, len(rewards) // 4)
        first, last = statistics.fmean(rewards[:q]), statistics.fmean(rewards[-q:])
        rise = last - first
        add("reward rose", rise >= margin,
            f"reward {first:.3f} (first {q} steps) -> {last:.3f} (last {q}): {rise:+.3f}, needs >= +{margin}",
            required=require_learning)
    else:
        add("reward rose", False, f"only {len(rewards)} reward values: too few to judge learning",
            required=require_learning)
    passed = all(c["passed"] for c in checks if c["required"])
    return Verdict(passed=passed, checks=checks)
