"""A saved plan (`rocmkit tune --json > PLAN.json`) read back by the commands that use it (slurm, certify)."""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import UsageError

ALGORITHM_KEY = "algorithm.adv_estimator"


def load_overrides(path: str, option: str = "--tune") -> list[str]:
    """The plan's verl overrides; a file that is not a plan is a usage error naming it."""
    try:
        doc = json.loads(Path(path).read_text())
    except OSError as exc:
        raise UsageError(f"{option} {path}: cannot read ({exc.strerror})") from None
    except ValueError as exc:
        raise UsageError(f"{option} {path}: not JSON ({exc})") from None
    if not isinstance(doc, dict) or doc.get("schema") != "rocmkit.tune/v1" or not isinstance(doc.get("overrides"), list) \
            or not all(isinstance(o, str) and "=" in o for o in doc["overrides"]):
        raise UsageError(f"{option} {path}: not a `rocmkit tune --json` document (schema rocmkit.tune/v1 with "
                         "overrides KEY=VALUE)")
    # A plan without an algorithm runs verl's default estimator, gae (PPO with a critic), without a word: plans
    # from rocmkit before the algorithm became one of the settings lack it, and so does a hand-trimmed one.
    if not any(o.split("=", 1)[0].lstrip("+~") == ALGORITHM_KEY for o in doc["overrides"]):
        raise UsageError(f"{option} {path}: overrides: no {ALGORITHM_KEY}, so verl would run its default estimator "
                         "gae (PPO, with a critic) instead of the GRPO the plan was made for",
                         hint=f"make the plan again with `rocmkit tune ... --json > {path}`, or add "
                              f"\"{ALGORITHM_KEY}=grpo\" to its overrides")
    return list(doc["overrides"])
