"""The verl engine's steps of certify's setup, run inside the target by name (certify.json's `target_steps`):
before the model and data are written, the packages that break verl, the actor's attention and vLLM's sleep-mode
pool; after, verl's own validation of the run's overrides (and of a `rocmkit tune` plan). Each fills the setup's
report; `before` returns False when the run must not start."""

from __future__ import annotations

import time

from ..pkgdirs import package_dir
from . import compat


def before(cfg: dict, report: dict) -> bool:
    t = time.perf_counter()
    conflicts = compat.conflicts(megatron=bool(cfg.get("megatron")))
    report["timings"]["compat_s"] = round(time.perf_counter() - t, 3)
    if conflicts:
        report["conflicts"] = conflicts
        return False
    if cfg.get("attention"):
        from . import attention

        t = time.perf_counter()
        found = attention.probe(cfg["gpus"])
        choice = attention.choose(cfg["attention"]["asked"], cfg["gpus"] == 0, found)
        report["attention"] = {**choice, "found": found}
        report["timings"]["attention_s"] = round(time.perf_counter() - t, 3)
        if attention.refusal(choice, found) is not None:
            return False  # asked for an implementation the target cannot run: the host refuses the run
    if cfg.get("sleep_pool"):
        from . import sleep_pool

        t = time.perf_counter()
        report["sleep_pool"] = sleep_pool.inspect(package_dir("vllm"), test=True)
        report["timings"]["sleep_pool_s"] = round(time.perf_counter() - t, 3)
    return True


def after(cfg: dict, report: dict) -> None:
    from .config_check import check
    from .overrides import attention_overrides

    t = time.perf_counter()
    chosen = (report.get("attention") or {}).get("chosen")
    report["verl_validation"] = check(cfg["verl_overrides"] + attention_overrides(chosen))
    if cfg.get("tune_overrides"):  # the user's tuned plan, as configuration only (its model is not here)
        report["tune_validation"] = check(cfg["tune_overrides"], files=False)  # the plan carries its algorithm
    report["timings"]["verl_check_s"] = round(time.perf_counter() - t, 3)
