"""Packages that, merely installed beside verl, break a verl run after minutes of start-up: found in the target
before anything starts, each with what breaks and the fix.

TRL: verl patches TRL's value-head model whenever TRL is importable (verl 0.9.1,
verl/models/transformers/monkey_patch.py apply_monkey_patch: `from trl.experimental.ppo import
AutoModelForCausalLMWithValueHead`, else `from trl import ...`, guarded only by `is_trl_available()`, a find_spec).
TRL 1.13.0 removed trl/experimental/ppo (1.12.0 is the last release with it), so with TRL >= 1.13 installed every
FSDP actor and reference worker dies at model init with "cannot import name 'AutoModelForCausalLMWithValueHead'
from 'trl'". Seen on an H100 with verl 0.9.1 and TRL 1.16.0 in one environment (rocmkit's own `[verl]` extra
used to pull TRL 1.16 in through `[certify]`).

mbridge (verl's Megatron backend with vanilla_mbridge, as `certify --backend megatron` runs it): mbridge 0.15.1,
the newest on PyPI, builds its model with `if model_type == ModelType.encoder_and_decoder` (mbridge/core/util.py),
and megatron-core 0.17 removed that member (0.16.1 still has it, as a deprecated property). With megatron-core
>= 0.17 every actor worker dies at model init with "type object 'ModelType' has no attribute
'encoder_and_decoder'": seen on two H100s with megatron-core 0.18.0, after three minutes of start-up. Both are
read as files, so the check imports neither."""

from __future__ import annotations

import importlib.util
import os

from ....pkgdirs import package_dirs

LAST_TRL_WITH_VALUE_HEAD = "1.12.0"
# mbridge's "support latest megatron that removes ModelType.encoder_and_decoder" (2026-03-18), after 0.15.1
MBRIDGE_FIX = "7813c84b439600b8613aba9fc25ac660480eedc7"


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


def _source(package: str, *parts: str) -> str | None:
    """The text of a file inside a top-level package, imported by no one."""
    for root in package_dirs(package):
        try:
            with open(os.path.join(root, *parts), encoding="utf-8", errors="replace") as f:
                return f.read()
        except OSError:
            continue
    return None


def mbridge_needs_removed_model_type() -> bool:
    """True when mbridge asks megatron-core for ModelType.encoder_and_decoder and this megatron-core has none."""
    bridge, enums = _source("mbridge", "core", "util.py"), _source("megatron", "core", "enums.py")
    return bool(bridge and enums and "ModelType.encoder_and_decoder" in bridge and "encoder_and_decoder" not in enums)


def conflicts(megatron: bool = False) -> list[dict]:
    """What installed here breaks verl (and, for a Megatron run, its Megatron backend): each with the package, its
    version, why and the fix."""
    out = []
    if megatron and mbridge_needs_removed_model_type():
        out.append({"package": "megatron-core", "version": _version("megatron-core"),
                    "why": f"mbridge {_version('mbridge')} builds models with ModelType.encoder_and_decoder "
                           "(mbridge/core/util.py), which megatron-core removed in 0.17: every Megatron actor "
                           "worker would fail at model init",
                    "fix": "pip install 'megatron-core<0.17' (0.16.1 runs with mbridge 0.15.1), or mbridge from git "
                           f"at {MBRIDGE_FIX} or later, which no longer uses it: pip install "
                           f"'mbridge @ git+https://github.com/ISEEKYAN/mbridge.git@{MBRIDGE_FIX}'"})
    if trl_value_head_missing():
        out.append({"package": "trl", "version": _version("trl"),
                    "why": "verl patches TRL's AutoModelForCausalLMWithValueHead whenever TRL is installed "
                           "(verl/models/transformers/monkey_patch.py), and TRL >= 1.13 no longer has it: every "
                           "actor and reference worker would fail at model init",
                    "fix": f"pip uninstall trl (verl does not need it), or pip install 'trl<={LAST_TRL_WITH_VALUE_HEAD}'"
                           "; certify TRL from a Python of its own"})
    return out
