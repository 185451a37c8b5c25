"""Offline validation of verl overrides against the installed verl's own config, before any GPU time is
spent: `python -m rocmkit.verl.config_check [--structure] OVERRIDES.json` prints a JSON verdict
(--structure: the configuration alone, reading no data, reward or model files).

Steps (research/smoke-grpo.md §1.3): Hydra compose of verl's `ppo_trainer` config (renamed or removed keys
fail here), missing mandatory values, interpolation, verl's validate_config, conversion of the sections
to verl's dataclasses (catches removed values such as rollout.mode=sync and a model path that does not
load), and rocmkit's own rules (a rollout engine main_ppo can run; the reward file exists; no top-level
custom_reward_function, which 0.9 silently ignores).
"""

from __future__ import annotations

import difflib
import json
import os
import re
import sys
from pathlib import Path

ROLLOUTS = ("vllm", "sglang", "trtllm")


def _config_dir() -> Path | None:
    import importlib.util

    spec = importlib.util.find_spec("verl")
    return Path(spec.origin).parent / "trainer" / "config" if spec else None


def _compose(config_name: str, overrides: list[str]):
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(_config_dir()), version_base=None):
        return compose(config_name=config_name, overrides=overrides)


def _compose_error(exc: Exception) -> str:
    cause = exc.__cause__ or exc
    return f"{exc} ({cause})" if cause is not exc else str(exc)


def check(overrides: list[str], files: bool = True, config_name: str = "ppo_trainer") -> dict:
    """files=False checks the configuration alone (rocmkit tune): no data, reward or model files are read."""
    from hydra.errors import HydraException

    if _config_dir() is None:
        return {"ok": False, "errors": ["verl is not installed in this environment"], "verl": None}
    from importlib.metadata import version

    result = {"ok": False, "errors": [], "verl": version("verl")}
    try:
        cfg = _compose(config_name, overrides)
    except HydraException as exc:
        result["errors"].append(f"compose: {_compose_error(exc)}")
        return result
    return validate(cfg, result, files)


def validate(cfg, result: dict, files: bool) -> dict:
    """Everything after the compose, into result["errors"]."""
    from omegaconf import OmegaConf

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


RECIPE_MARK = "ROCMKIT-VERL-RECIPE "


def _culprit(message: str, overrides: list[str], skip: set[int]) -> int | None:
    """Which override a Hydra compose error is about: the error quotes its key, its text or `group/option`."""
    quoted = re.findall(r"'([^'\n]+)'", message)
    for q in quoted:
        for i, text in enumerate(overrides):
            if i in skip:
                continue
            key, _, value = text.lstrip("+~").partition("=")
            if q in (key, text, f"{key}/{value}"):
                return i
    return None


def check_recipe(doc: dict) -> dict:
    """A user's recipe (rocmkit verl-check): every override verl rejects, not only the first, then the same
    checks as certify's on the rest of the configuration. doc: {"overrides": [...] (resolved), "config_name",
    "probe_keys": [keys whose values the launch script leaves unresolved: checked for presence only]}."""
    from hydra.errors import HydraException
    from omegaconf import OmegaConf

    cfg_dir = _config_dir()
    if cfg_dir is None:
        return {"ok": False, "verl": None, "errors": ["verl is not installed in this environment"]}
    from importlib.metadata import version

    name = doc.get("config_name") or "ppo_trainer"
    overrides = doc["overrides"]
    result: dict = {"ok": False, "verl": version("verl"), "errors": [], "rejected": [], "absent_keys": [],
                    "config": {"name": name, "exists": (cfg_dir / f"{name}.yaml").is_file(), "header": None,
                               "names": sorted(p.stem for p in cfg_dir.glob("*.yaml") if not p.stem.startswith("_"))}}
    if not result["config"]["exists"]:  # said by the host, with the names there are
        return result
    first = (cfg_dir / f"{name}.yaml").read_text().splitlines()[:1]
    if first and first[0].startswith("#") and "deprecat" in first[0].lower():
        result["config"]["header"] = first[0].lstrip("# ").strip()
    rejected: dict[int, str] = {}
    cfg = None
    for _ in range(len(overrides) + 1):
        try:
            cfg = _compose(name, [o for i, o in enumerate(overrides) if i not in rejected])
            break
        except HydraException as exc:
            message = _compose_error(exc)
            i = _culprit(message, overrides, set(rejected))
            if i is None:
                result["errors"].append(f"compose: {message}")
                break
            rejected[i] = message
    result["rejected"] = [{"index": i, "override": overrides[i], "error": m} for i, m in sorted(rejected.items())]
    if cfg is None:
        return result
    for r in result["rejected"]:  # a typo's nearest key among its siblings in the composed config
        key = r["override"].lstrip("+~").partition("=")[0]
        parent, _, leaf = key.rpartition(".")
        node = OmegaConf.select(cfg, parent, default=None) if parent else cfg
        if OmegaConf.is_dict(node):
            close = difflib.get_close_matches(leaf, [str(k) for k in node], n=1)
            r["nearest"] = f"{parent}.{close[0]}" if close and parent else (close[0] if close else None)
    absent = object()
    result["absent_keys"] = [k for k in doc.get("probe_keys", [])
                             if OmegaConf.select(cfg, k, default=absent, throw_on_missing=False) is absent]
    validate(cfg, result, files=False)
    result["ok"] = not (result["errors"] or result["rejected"] or result["absent_keys"])
    return result


def main() -> None:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    args = sys.argv[1:]
    if args[:1] == ["--recipe"]:  # rocmkit verl-check runs this file as a script in the target: stdlib only here
        docs = json.loads(Path(args[1]).read_text())  # one per main_ppo command: verl is imported once
        print(RECIPE_MARK + json.dumps([check_recipe(doc) for doc in docs]), flush=True)
        return
    files = "--structure" not in args
    path = next(a for a in args if a != "--structure")
    overrides = json.loads(Path(path).read_text())
    print(json.dumps(check(overrides, files=files)))


if __name__ == "__main__":
    main()
