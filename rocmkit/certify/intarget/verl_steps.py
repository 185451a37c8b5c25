"""The verl engine's steps of certify's setup, run inside the target by name (certify.json's `target_steps`).
What the run's command needs (`choose`: the actor's attention, SGLang's backends) runs in the setup's first part,
before the run; the slow checks run beside the run's start-up (the setup's "beside" part; intarget/setup.py):
`start`, vLLM's model inspection in the background (rocmkit/certify/intarget/vllm_modelinfo.py); `before`, the
packages that break verl and vLLM's sleep-mode pool; `after`, verl's own validation of the run's overrides (and of
a `rocmkit tune` plan), and the inspection's end. Each fills the setup's report; `choose` and `before` return False
when the run must not start (or must be stopped)."""

from __future__ import annotations

import json
import time
from pathlib import Path

from ...pkgdirs import package_dir
from ..engines.verl import compat


def start(cfg: dict):
    """What runs beside the whole setup: vLLM's inspection of the model (None where there is nothing to do)."""
    if not cfg.get("modelinfo"):
        return None
    from . import vllm_modelinfo

    arch = architecture(cfg)
    return vllm_modelinfo.Warm(arch) if arch else None


def architecture(cfg: dict) -> str | None:
    """The model's class as vLLM looks it up: the first in the config.json the model is (or will be) built from:
    a job's stand-in's (`model_config`, written later in the setup), the user's folder's, else the built-in's."""
    if cfg.get("builtin_model") and not cfg.get("model_config"):
        from ...tinymodel import ARCHITECTURE

        return ARCHITECTURE
    try:
        doc = cfg.get("model_config") or json.loads((Path(cfg["model_dir"]) / "config.json").read_text())
        names = doc.get("architectures") or []
    except (OSError, ValueError, AttributeError):
        return None  # the run's own loading says what is wrong with the model; vLLM inspects it then
    return names[0] if names and isinstance(names[0], str) else None


def choose(cfg: dict, report: dict) -> bool:
    """What the run's command takes from the target: the actor's attention and SGLang's backends. False when the
    attention asked for by name cannot run here, when verl's main_ppo imports a module this Python lacks, or when a
    CPU run's vLLM is not the CPU build."""
    from ..engines.verl import runtime_imports

    report["verl_imports_missing"] = runtime_imports.missing()  # main_ppo's own imports, read from verl's source
    if report["verl_imports_missing"]:
        return False
    if cfg.get("vllm_cpu"):  # --gpus 0: vLLM's CPU build, or nothing starts (vllm_build.py)
        from ..engines.verl import vllm_build

        report["vllm_build"] = vllm_build.probe()
        if report["vllm_build"]["cpu"] is False:
            return False
    if cfg.get("attention"):
        from ..engines.verl import attention

        t = time.perf_counter()
        found = attention.probe(cfg["gpus"])
        choice = attention.choose(cfg["attention"]["asked"], cfg["gpus"] == 0, found)
        report["attention"] = {**choice, "found": found}
        report["timings"]["attention_s"] = round(time.perf_counter() - t, 3)
        if attention.refusal(choice, found) is not None:
            return False  # asked for an implementation the target cannot run: the host refuses the run
    if cfg.get("sglang") and cfg["gpus"]:
        from ..engines.verl import sglang_backends
        from ..engines.verl.overrides import rollout_share

        found = sglang_backends.probe()
        report["sglang"] = {**sglang_backends.choose(found), "version": found["sglang"], "found": found,
                            "mem_fraction_static": rollout_share(cfg["verl_overrides"])}
    return True


def before(cfg: dict, report: dict) -> bool:
    """The packages that break verl and vLLM's sleep-mode pool; False when such a package is installed."""
    t = time.perf_counter()
    conflicts = compat.conflicts(megatron=bool(cfg.get("megatron")))
    report["timings"]["compat_s"] = round(time.perf_counter() - t, 3)
    if conflicts:
        report["conflicts"] = conflicts
        return False
    if cfg.get("sleep_pool"):
        from ..engines.verl import sleep_pool

        t = time.perf_counter()
        report["sleep_pool"] = sleep_pool.inspect(package_dir("vllm"), test=True)
        report["timings"]["sleep_pool_s"] = round(time.perf_counter() - t, 3)
    return True


def after(cfg: dict, report: dict, background=None) -> None:
    from ...verl.config_check import check
    from ..engines.verl.overrides import run_overrides

    t = time.perf_counter()
    # beside the run, the first part's choices are in the run's overrides (certify.json's run_overrides)
    overrides = cfg.get("run_overrides") or run_overrides(cfg, report)
    report["verl_validation"] = check(overrides,
                                      config_name=cfg.get("config_name", "ppo_trainer"),
                                      server="config_name" in cfg)  # a user's job, not rocmkit's own run
    if cfg.get("tune_overrides"):  # the user's tuned plan, as configuration only (its model is not here)
        report["tune_validation"] = check(cfg["tune_overrides"], files=False)  # the plan carries its algorithm
    report["timings"]["verl_check_s"] = round(time.perf_counter() - t, 3)
    if background is not None:
        report["modelinfo"] = background.finish()
        report["timings"]["modelinfo_wait_s"] = report["modelinfo"].get("wait_s", 0.0)
