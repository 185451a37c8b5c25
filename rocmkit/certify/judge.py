"""The verdict: did the run finish, stay finite, and (on the built-in task) learn; did the GPU probes pass?
Or could the check not run at all (setup, deadline)? Pure: takes data, returns data."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from ..host.model import Status as FindingStatus
from ..textenum import TextEnum
from . import metrics as m

# Reward on the built-in task starts near the random policy's digit share and must rise by this much
# (mean of the last quarter of steps minus mean of the first quarter; the reward lies in [0, 2]).
LEARNING_MARGIN = 0.3
REWARD_KEYS = ("reward", "critic/score/mean")
LOSS_KEYS = ("loss", "actor/pg_loss", "actor/loss")
JUDGED_PREFIXES = ("loss", "actor/", "reward", "critic/", "grad_norm", "kl")


class Status(TextEnum):
    PASS = "pass"
    FAIL = "fail"  # the stack ran and did not train or learn
    NOT_CERTIFIED = "not certified"  # the check itself could not run: see Verdict.reason


class Reason(TextEnum):
    SETUP = "setup"  # the target lacks what the run needs, or the engine could not start it
    TIMEOUT = "timeout"


class RunStatus(TextEnum):
    FINISHED = "finished"
    CRASHED = "crashed"
    TIMED_OUT = "timed out"
    STALLED = "stalled"  # the watchdog: no step and no new output for --stall-timeout
    ENGINE_ERROR = "engine error"  # the watchdog: a fatal line and no progress after it


EXIT_CODES = {Status.PASS: 0, Status.FAIL: 1, Reason.SETUP: 3, Reason.TIMEOUT: 124}


@dataclass
class Verdict:
    status: Status
    checks: list[dict] = field(default_factory=list)  # {name, passed, detail, required}
    reason: Reason | None = None

    @property
    def passed(self) -> bool:
        return self.status is Status.PASS

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.reason] if self.reason else EXIT_CODES[self.status]

    @property
    def label(self) -> str:
        return f"{self.status.value}: {self.reason.value}" if self.reason else self.status.value


def check(name: str, passed: bool, detail: str, required: bool = True, skipped: bool = False) -> dict:
    out = {"name": name, "passed": bool(passed), "detail": detail, "required": required}
    if skipped:  # did not run: counts as no failure, and is shown as skipped, never as a result
        out["skipped"] = True
    return out


def not_certified(reason: Reason, checks: list[dict]) -> Verdict:
    return Verdict(Status.NOT_CERTIFIED, checks, reason)


def probe_checks(probes: dict | None) -> list[dict]:
    """One check per probe finding: a failed probe fails the certificate, a warned one is reported."""
    if not probes:
        return []
    if probes.get("error"):
        return [check("GPU probes ran", False, probes["error"], required=False)]
    out = []
    overlap = probes.get("overlap")  # another process's load may be in the figures (flow.ProbesBeside)
    for f in probes.get("findings", []):
        status = FindingStatus(f.get("status"))
        if status is FindingStatus.SKIP:
            out.append(check(f["id"], True, f"skipped: {f.get('title', '')}", required=False, skipped=True))
        else:
            out.append(check(f["id"], status is FindingStatus.PASS, f"{status.value}: {f.get('title', '')}"
                             + (f" ({overlap})" if overlap else ""),
                             required=status is not FindingStatus.WARN and not overlap))
    return out


def reward_rise(rewards: list[float]) -> tuple[float, float, int]:
    """The learning rule's figures: the mean reward of the first and of the last quarter of the steps, and the
    quarter's length. One rule for the verdict and for a run stopped once learning is proven (early.py)."""
    q = max(1, len(rewards) // 4)
    return statistics.fmean(rewards[:q]), statistics.fmean(rewards[-q:]), q


def judge(steps: dict[int, dict[str, float]], requested: int, run_status: RunStatus, *, require_learning: bool,
          probes: dict | None = None, margin: float = LEARNING_MARGIN, extra: list[dict] = ()) -> Verdict:
    run_status = RunStatus(run_status)
    checks = list(extra)
    checks.append(check("run finished", run_status is RunStatus.FINISHED, f"run status: {run_status.value}"))
    checks.append(check("all steps ran", len(steps) >= requested, f"{len(steps)} of {requested} steps logged"))
    losses = m.series(steps, *LOSS_KEYS)
    judged = [v for s in steps.values() for k, v in s.items() if k.startswith(JUDGED_PREFIXES)]
    bad = sum(1 for v in judged if not math.isfinite(v))
    checks.append(check("losses finite", bool(losses) and not bad, f"{len(losses)} loss values; non-finite: {bad}"))
    rewards = m.series(steps, *REWARD_KEYS)
    if len(rewards) >= 4:
        first, last, q = reward_rise(rewards)
        checks.append(check("reward rose", last - first >= margin,
                            f"reward {first:.3f} (first {q} steps) -> {last:.3f} (last {q}): {last - first:+.3f}, "
                            f"needs >= +{margin}", required=require_learning))
    else:
        checks.append(check("reward rose", False, f"only {len(rewards)} reward values: too few to judge learning",
                            required=require_learning))
    checks += probe_checks(probes)
    passed = all(c["passed"] for c in checks if c["required"])
    return Verdict(Status.PASS if passed else Status.FAIL, checks)
