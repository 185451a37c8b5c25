"""A verdict as soon as it is known: on the built-in task, when the user did not give --steps, the run is stopped
at the first step from MIN_STEPS on at which the judge's own learning rule (judge.reward_rise: the last quarter's
mean reward at least the first quarter's + LEARNING_MARGIN) holds on the steps so far. The judge then reads the
same steps and passes the run; the certificate's `run.ended_by` names the rule.

Why stop: in the 19 kept passing runs of the built-in task (verl and TRL, CPU and GPUs) the rule first held at
step 5 to 9 (8 or 9 from the minimum on) and never failed after it had held, and the peak actor memory at
step 8 equalled step 16's in every verl run. Steps after the rule holds decide nothing on a stack that passes
(docs/guides/certification.md, "When the run stops").
Why MIN_STEPS 8: each quarter then has two steps, so one step's reward does not decide, and the rollout has
generated with trained weights synced into it seven times (each step after the first starts with a sync)."""

from __future__ import annotations

from dataclasses import dataclass

from .judge import LEARNING_MARGIN, reward_rise
from .follow import Follow

MIN_STEPS = 8
REASON = "learning proven"  # proc.run's stopped reason; outcome.run_status reads it as a finished run


@dataclass(frozen=True)
class Proof:
    step: int
    first: float
    last: float
    quarter: int

    def text(self) -> str:
        return (f"learning proven at step {self.step} (rule: the mean reward of the last {self.quarter} steps, "
                f"{self.last:.3f}, at least the first {self.quarter} steps' {self.first:.3f} + {LEARNING_MARGIN})")


def applies(s, engine) -> bool:
    """The built-in task with the steps left to rocmkit: --steps given by the user is kept exactly; a user's
    model or data need not learn within the smoke budget, so it runs all its steps."""
    from .engines.base import BuiltinTask

    return (isinstance(engine, BuiltinTask) and s.builtin and s.learning_required and not s.steps_given
            and s.steps > MIN_STEPS)


def proof(rewards: dict[int, float], margin: float = LEARNING_MARGIN) -> Proof | None:
    """The proof on the steps so far, or None: every step from 1 has its reward, at least MIN_STEPS of them,
    and the judge's rule holds on them."""
    n = len(rewards)
    if n < MIN_STEPS or sorted(rewards) != list(range(1, n + 1)):
        return None
    first, last, q = reward_rise([rewards[k] for k in range(1, n + 1)])
    return Proof(n, first, last, q) if last - first >= margin else None


class ProvingFollow(Follow):
    """The watchdog's Follow that also stops a healthy run once learning is proven: the same stop_when path as a
    stall, with REASON; a pending fatal line (the engine error rule's grace) is decided first."""

    proof: Proof | None = None
    _judged = 0  # the steps the rule was last applied to: tick runs after every line, a step ends a few times a run

    def tick(self, pids=None) -> str | None:
        reason = super().tick(pids)
        if reason is None and self.watch.error_at is None:
            if self.proof is None and len(self.watch.rewards) != self._judged:
                self._judged = len(self.watch.rewards)
                self.proof = proof(self.watch.rewards)
            reason = REASON if self.proof else None
        return reason


def ended_by(steps: int, found: Proof | None) -> str:
    """What ended a finished run, for the certificate: the learning proof, or the steps asked."""
    return found.text() if found else f"all {steps} steps"
