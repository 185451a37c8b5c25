"""Packages that, merely installed beside verl, break a verl run after minutes of start-up: found in the target
before anything starts, each with what breaks and the fix.

TRL: verl patches TRL's value-head model whenever TRL is importable (verl 0.9.1,
verl/models/transformers/monkey_patch.py apply_monkey_patch: `from trl.experimental.ppo import
AutoModelForCausalLMWithValueHead`, else `from trl import ...`, guarded only by `is_trl_available()`, a find_spec).
TRL 1.13.0 removed trl/experimental/ppo (1.12.0 is the last release with it), so with TRL >= 1.13 installed every
FSDP actor and reference worker dies at model init with "cannot import name 'AutoModelForCausalLMWithValueHead'
from 'trl'". Seen on an H100 with verl 0.9.1 and TRL 1.16.0 in one environment (rocmkit's own `[verl]` extra
used to pull TRL 1.16 in through `[certify]`)."""

from __future__ import annotations

import importlib.util

LAST_TRL_WITH_VALUE_HEAD = "1.12.0"


def _version(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def trl_value_head_missing() -> bool:
    """True when TRL is importable but has no AutoModelForCausalLMWithValueHead where verl looks for it."""
    if importlib.util.find_spec("trl") is None:
        return False
    try:
        if importlib.util.find_spec("trl.experimental.ppo") is not None:
            return False
    except ImportError:
        pass
    try:
        from trl import AutoModelForCausalLMWithValueHead  # noqa: F401 - the name verl imports
    except ImportError:
        return True
    return False


def conflicts() -> list[dict]:
    """What installed here breaks verl: each with the package, its version, why and the fix."""
    out = []
    if trl_value_head_missing():
        out.append({"package": "trl", "version": _version("trl"),
                    "why": "verl patches TRL's AutoModelForCausalLMWithValueHead whenever TRL is installed "
                           "(verl/models/transformers/monkey_patch.py), and TRL >= 1.13 no longer has it: every "
                           "actor and reference worker would fail at model init",
                    "fix": f"pip uninstall trl (verl does not need it), or pip install 'trl<={LAST_TRL_WITH_VALUE_HEAD}'"
                           "; certify TRL from a Python of its own"})
    return out
