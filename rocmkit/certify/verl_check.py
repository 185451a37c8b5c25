"""Offline validation of verl overrides against the installed verl's own config, before any GPU time is
spent: `python -m rocmkit.certify.verl_check [--structure] OVERRIDES.json` prints a JSON verdict
(--structure: the configuration alone, reading no data, reward or model files).

Steps (research/smoke-grpo.md §1.3): Hydra compose of verl's `ppo_trainer` config (renamed or removed keys
fail here), missing mandatory values, interpolation, verl's validate_config, conversion of the sections
to verl's dataclasses (catches removed values such as rollout.mode=sync and a model path that does not
load), and rocmkit's own rules (a rollout engine main_ppo can run; the reward file exists; no top-level
custom_reward_function, which 0.9 silently ignores).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROLLOUTS = ("vllm", "sglang", "trtllm")


def check(overrides: list[str], files: bool = True) -> dict:
    """files=False checks the configuration alone (rocmkit tune): no data, reward or model files are read."""
    import importlib.util

    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException
    from omegaconf import OmegaConf

    spec = importlib.util.find_spec("verl")
    if spec is None:
        return {"ok": False, "errors": ["verl is not installed in this environment"], "verl": None}
    from importlib.metadata import version

    result = {"ok": False, "errors": [], "verl": version("verl")}
    cfg_dir = str(Path(spec.origin).parent / "trainer" / "config")
    try:
        with initialize_config_dir(config_dir=cfg_dir, version_base=None):
            cfg = compose(config_name="ppo_trainer", overrides=overrides)
    except HydraException as exc:
        cause = exc.__cause__ or exc
        result["errors"].append(f"compose: {exc} ({cause})" if cause is not exc else f"compose: {exc}")
        return result
    missing = [k for k in OmegaConf.missing_keys(cfg) if k != "reward.reward_model.rollout.name"]
    if missing:
        result["errors"].append(f"mandatory values not set: {', '.join(missing)}")
    try:
        OmegaConf.resolve(cfg)
    except Exception as exc:  # noqa: BLE001 - any interpolation error is a finding
        result["errors"].append(f"resolve: {exc}")
        return result
    rollout = OmegaConf.select(cfg, "actor_rollout_ref.rollout.name")
    if rollout not in ROLLOUTS:
        result["errors"].append(f"actor_rollout_ref.rollout.name={rollout}: main_ppo runs only {', '.join(ROLLOUTS)}")
    if OmegaConf.select(cfg, "custom_reward_function.path"):
        result["errors"].append("custom_reward_function.* is ignored by verl 0.9's main_ppo: use reward.custom_reward_function.*")
    reward_path = OmegaConf.select(cfg, "reward.custom_reward_function.path")
    if files and reward_path and not os.path.exists(reward_path):
        result["errors"].append(f"reward.custom_reward_function.path={reward_path}: no such file")
    for key in ("data.train_files", "data.val_files") if files else ():
        for path in (lambda v: v if isinstance(v, (list, tuple)) or OmegaConf.is_list(v) else [v])(OmegaConf.select(cfg, key)):
            if not os.path.exists(str(path)):
                result["errors"].append(f"{key}={path}: no such file")
    if result["errors"]:
        return result
    try:
        from verl.trainer.ppo.utils import need_critic, need_reference_policy
        from verl.utils.config import omega_conf_to_dataclass, validate_config
        from verl.workers.config import HFModelConfig
    except ImportError as exc:
        result["errors"].append(f"verl cannot be imported here ({exc}): its dependencies are incomplete")
        return result

    try:
        validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    except Exception as exc:  # noqa: BLE001
        result["errors"].append(f"validate_config: {type(exc).__name__}: {exc}")
    for section, target in (("algorithm", None), ("actor_rollout_ref.actor", None),
                            ("actor_rollout_ref.rollout", None), ("actor_rollout_ref.model", HFModelConfig)):
        if target is HFModelConfig and not files:
            continue
        try:
            node = OmegaConf.select(cfg, section)
            omega_conf_to_dataclass(node, target) if target else omega_conf_to_dataclass(node)
        except Exception as exc:  # noqa: BLE001
            result["errors"].append(f"{section}: {type(exc).__name__}: {exc}")
    result["ok"] = not result["errors"]
    return result


def main() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    files = "--structure" not in sys.argv[1:]
    path = next(a for a in sys.argv[1:] if a != "--structure")
    overrides = json.loads(Path(path).read_text())
    print(json.dumps(check(overrides, files=files)))


if __name__ == "__main__":
    main()
