"""Offline validation of verl overrides against the installed verl's own config, before any GPU time is
spent: `python -m rocmkit.verl.config_check [--structure] OVERRIDES.json` prints a JSON verdict
(--structure: the configuration alone, reading no data, reward or model files).

Steps (research/smoke-grpo.md §1.3): Hydra compose of verl's `ppo_trainer` config (renamed or removed keys
fail here), missing mandatory values, interpolation, verl's validate_config, conversion of the sections
to verl's dataclasses (catches removed values such as rollout.mode=sync and a model path that does not
load), and rocmkit's own rules (a rollout engine main_ppo can run; the reward file exists; no top-level
custom_reward_function, which 0.9 silently ignores; the GPUs split into whole rollout replicas and Megatron
groups, which verl asserts only once its workers start).
"""

from __future__ import annotations

import difflib
import json
import os
import re
import sys
from pathlib import Path

if __package__:  # rocmkit.verl.config_check
    from . import batch_rules, rollout_rules, typed_values, verl_messages
else:  # a copied file in the target's Python, its rule modules beside it (recipe_check._inputs)
    import batch_rules  # type: ignore[no-redef]
    import rollout_rules  # type: ignore[no-redef]
    import typed_values  # type: ignore[no-redef]
    import verl_messages  # type: ignore[no-redef]

ROLLOUTS = ("vllm", "sglang", "trtllm")
RULE_MODULES = (batch_rules, rollout_rules, verl_messages, typed_values)  # what must be copied beside this file


def _config_dir() -> Path | None:
    import importlib.util

    spec = importlib.util.find_spec("verl")
    return Path(spec.origin).parent / "trainer" / "config" if spec else None


def _compose(config_name: str, overrides: list[str], config_path: str | None = None):
    """Hydra's compose, as main_ppo's @hydra.main(config_path="config") does; a user's --config-path replaces that
    folder, and verl's own goes on the search path (verl's examples name it in their yaml's hydra.searchpath as
    file://verl/trainer/config, which only resolves from a checkout of verl)."""
    from hydra import compose, initialize_config_dir

    primary, extra = str(_config_dir()), []
    if config_path:
        primary = str(Path(config_path).resolve())
        extra = [f"hydra.searchpath=[{','.join(_search_path(Path(primary) / f'{config_name}.yaml'))}]"]
    with initialize_config_dir(config_dir=primary, version_base=None):
        return compose(config_name=config_name, overrides=overrides + extra)


def _main_ppo_path(config_path: str | None) -> str | None:
    """Where main_ppo's Hydra looks for --config-path=X: X if absolute, else relative to main_ppo.py's folder
    (hydra/_internal/utils.py, compute_search_path_dir: the file that declares @hydra.main), so `./config` is
    verl's own folder (None here)."""
    if not config_path or config_path.startswith("pkg://"):
        return None
    path = Path(config_path) if os.path.isabs(config_path) else (_config_dir().parent / config_path).resolve()
    return None if path == _config_dir().resolve() else str(path)


def _search_path(primary_yaml: Path) -> list[str]:
    """The user's config's own hydra.searchpath entries that resolve here, then verl's config folder."""
    from omegaconf import OmegaConf

    kept = []
    try:
        declared = OmegaConf.select(OmegaConf.load(primary_yaml), "hydra.searchpath", default=None) or []
    except Exception:  # noqa: BLE001 - compose says what is wrong with the file
        declared = []
    for entry in declared:
        entry = str(entry)
        if entry.startswith("pkg://") or (entry.startswith("file://") and Path(entry[7:]).is_absolute()
                                          and Path(entry[7:]).is_dir()):
            kept.append(entry)
    return kept + [f"file://{_config_dir()}"]


def _defaults(config_name: str, overrides: list[str], config_path: str | None = None):
    """key -> its value in verl's config before the user's values: composed with only the overrides that pick a
    config group (model_engine=veomni picks the engine's sections, and so their defaults). The YAML defaults type
    the keys no dataclass declares (data.*, trainer.*); None where it cannot be composed."""
    from omegaconf import OmegaConf

    groups = [o for o in overrides if "." not in o.lstrip("+~").partition("=")[0]]
    try:
        base = _compose(config_name, groups, config_path)
    except Exception:  # noqa: BLE001 - the full compose reports it
        return None

    def default_of(key: str):
        try:
            return OmegaConf.select(base, key, default=None)
        except Exception:  # noqa: BLE001 - an interpolation of a value the user sets (???): no default to type it
            return None
    return default_of


def _keys(overrides: list[str]) -> list[str]:
    return [o.lstrip("+~").partition("=")[0] for o in overrides if not o.startswith("~") and "=" in o]


def _compose_error(exc: Exception) -> str:
    cause = exc.__cause__ or exc
    return f"{exc} ({cause})" if cause is not exc else str(exc)


def check(overrides: list[str], files: bool = True, config_name: str = "ppo_trainer", server: bool = True) -> dict:
    """files=False checks the configuration alone (rocmkit tune): no data, reward or model files are read.
    server=False leaves out verl's vLLM server check (vllm_server: a second or more of imports), for configurations
    rocmkit wrote itself."""
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
    return validate(cfg, result, files, keys=_keys(overrides), default_of=_defaults(config_name, overrides),
                    server=server)


def _errors(check, cfg) -> list:
    """One check's findings on the resolved config; verl's chatter (its prints and deprecation warnings) kept out
    of the stdout the host parses."""
    import contextlib
    import io
    import warnings

    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return check(cfg)
        except Exception as exc:  # noqa: BLE001 - any failure is the check's finding
            return [f"{type(exc).__name__}: {exc}"]


def _add(result: dict, items: list) -> None:
    """Findings into the result, each once: rule findings (dicts) into result["problems"], their error text and
    the plain errors into result["errors"] (what certify reads)."""
    for e in items:
        if isinstance(e, dict):
            if all(p["text"] != e["text"] for p in result.setdefault("problems", [])):
                result["problems"].append(e)
            if e["severity"] == "error" and e["text"] not in result["errors"]:
                result["errors"].append(e["text"])
        elif e not in result["errors"]:
            result["errors"].append(e)


def _sel(cfg, key: str, default=None):
    from omegaconf import OmegaConf

    return OmegaConf.select(cfg, key, default=default)


def _rollout_engine(get) -> list[str]:
    rollout = get("actor_rollout_ref.rollout.name")
    # not set at all ("???"): "mandatory values not set" says so already
    return [] if rollout in ROLLOUTS or rollout is None else \
        [f"actor_rollout_ref.rollout.name={rollout}: main_ppo runs only {', '.join(ROLLOUTS)}"]


def _legacy_reward(get) -> list[str]:
    return ["custom_reward_function.* is ignored by verl 0.9's main_ppo: use reward.custom_reward_function.*"] \
        if get("custom_reward_function.path") else []


def _files(get) -> list[str]:
    from omegaconf import OmegaConf

    out = []
    reward_path = get("reward.custom_reward_function.path")
    if reward_path and not os.path.exists(reward_path):
        out.append(f"reward.custom_reward_function.path={reward_path}: no such file")
    for key in ("data.train_files", "data.val_files"):
        value = get(key)
        for path in value if isinstance(value, (list, tuple)) or OmegaConf.is_list(value) else [value]:
            if not os.path.exists(str(path)):
                out.append(f"{key}={path}: no such file")
    return out


def validate(cfg, result: dict, files: bool, resolved: bool = False, keys=(), default_of=None,
             server: bool = True) -> dict:
    """Everything after the compose, into result["errors"] (and the rules' findings into result["problems"]).
    resolved: cfg has no interpolation left and may be read as it is (the differential test's many settings).
    keys: those the user set, whose values are checked against the types verl declares (typed_values);
    default_of(key): the value in verl's config before the user's overrides (the type of a YAML-only key)."""
    import copy

    from omegaconf import OmegaConf

    missing = [k for k in OmegaConf.missing_keys(cfg) if k != "reward.reward_model.rollout.name"]
    if missing:
        result["errors"].append(f"mandatory values not set: {', '.join(missing)}")
    if not resolved:
        cfg = copy.deepcopy(cfg)  # the checks only read it
        try:
            OmegaConf.resolve(cfg)
        except Exception as exc:  # noqa: BLE001 - any interpolation error is a finding
            result["errors"].append(f"resolve: {exc}")
            return result
    try:
        from verl.trainer.ppo.utils import need_critic, need_reference_policy
        from verl.utils.config import omega_conf_to_dataclass, validate_config
        from verl.workers.config import HFModelConfig
    except ImportError as exc:
        result["errors"].append(f"verl cannot be imported here ({exc}): its dependencies are incomplete")
        return result
    verl_messages.ask_verl_for_kl_names(batch_rules)

    def rules(c) -> list[dict]:
        return batch_rules.problems(lambda k: _sel(c, k), use_critic=_safe(need_critic, c),
                                    use_reference=_safe(need_reference_policy, c))

    typed = _errors(lambda c: typed_values.problems(lambda k: _sel(c, k), keys, default_of), cfg)
    _add(result, typed)
    said = {p["keys"][0] for p in typed if isinstance(p, dict)}  # the range rules would repeat these, vaguer
    _add(result, [p for p in _errors(rules, cfg) if not (isinstance(p, dict) and p["keys"][:1] and
                                                         p["keys"][0] in said and p["rule"] != "not-checked")])
    # A value that failed its type or range check is not used by the checks below: each that reads one says it was
    # not checked, and the rest run, so one pass reports every error it can find.
    bad = {p["keys"][0] for p in result.get("problems", []) if p["rule"] in ("range", "type") and p["keys"]}
    checks = [("the rollout engine's name", _rollout_engine), ("the legacy reward section", _legacy_reward),
              ("the rollout replicas' GPU split", batch_rules.placement),
              ("the rollout engine's own rules", rollout_rules.problems),
              ("the policy loss and advantage estimator names", verl_messages.registries)]
    for what, check in checks + ([("the data and reward files", _files)] if files else []):
        _add(result, _errors(lambda c, check=check, what=what: typed_values.unless_bad(
            check, lambda k, c=c: _sel(c, k), bad, what), cfg))
    if result["errors"]:  # verl's own checks would stop at one of these first, or repeat them in its words
        _add(result, [{"rule": "not-checked", "keys": [], "severity": "note", "fix": None, "source": None,
                       "message": VERL_AFTER, "text": VERL_AFTER}])
        return result

    def verl_validate(c) -> list:
        use_critic = need_critic(c)
        try:
            validate_config(c, use_reference_policy=need_reference_policy(c), use_critic=use_critic)
        except Exception as exc:  # noqa: BLE001 - verl's reason, on its key
            if verl_messages.without_vllm(exc):  # its last check (the LoRA rank): all before it passed
                return [{"rule": "lora-rank", "keys": ["actor_rollout_ref.model.lora_rank"], "severity": "note",
                         "fix": None, "source": None, "text": "actor_rollout_ref.model.lora_rank: not checked "
                         "against vLLM's largest LoRA rank: the Python checked in has no usable vLLM",
                         "message": "not checked against vLLM's largest LoRA rank: the Python checked in has "
                         "no usable vLLM"}]
            if not (use_critic and verl_messages.from_model_hub(exc)):
                return [verl_messages.translate(exc, lambda k: _sel(c, k))]
            # validate_config reads the critic's model config (HFModelConfig): a hub model offline is a note,
            # and the rest of verl's checks run without the critic's
            said = verl_messages.translate(exc, lambda k: _sel(c, k))["message"]
            note = {"rule": "critic-model", "keys": ["critic.model.path"], "severity": "note", "fix": None,
                    "source": None, "message": f"the critic's model config was not read ({said[:200]}): the "
                    "critic's own checks that need it were skipped; no model file is read offline"}
            note["text"] = f"critic.model.path: {note['message']}"
            try:
                validate_config(c, use_reference_policy=need_reference_policy(c), use_critic=False)
            except Exception as again:  # noqa: BLE001
                return [note, verl_messages.translate(again, lambda k: _sel(c, k))]
            return [note]
        return []

    def section(name, target):
        def convert(c) -> list:
            try:
                node = OmegaConf.select(c, name)
                omega_conf_to_dataclass(node, target) if target else omega_conf_to_dataclass(node)
            except Exception as exc:  # noqa: BLE001
                return [verl_messages.translate(exc, lambda k: _sel(c, k), section=name)]
            return []
        return convert

    _add(result, _errors(verl_validate, cfg))
    for name, target in (("algorithm", None), ("actor_rollout_ref.actor", None),
                         ("actor_rollout_ref.rollout", None), ("actor_rollout_ref.model", HFModelConfig)):
        if target is HFModelConfig and not files:
            continue
        _add(result, _errors(section(name, target), cfg))
    if files and server:  # verl's server check needs the model's config.json
        _add(result, _errors(lambda c: vllm_server(c, omega_conf_to_dataclass, HFModelConfig), cfg))
    result["ok"] = not result["errors"]
    return result


VERL_AFTER = ("verl's own validation (validate_config and its dataclasses) was not run: it stops at the first of "
              "the errors above, or says them again in its words; it runs once they are fixed")


def vllm_server(cfg, to_dataclass, model_class) -> list:
    """verl's vLLM server's own check of its config and the model's (vLLMHttpServer._validate_configs), which runs
    when the rollout starts, minutes into the job: asked here of the same dataclasses. Nothing where the rollout is
    not vLLM's, vLLM does not import, or the model's files are not here (a hub name)."""
    from omegaconf import OmegaConf

    r = "actor_rollout_ref.rollout"
    if _sel(cfg, f"{r}.name") != "vllm":
        return []
    try:
        from verl.workers.rollout.vllm_rollout.vllm_async_server import vLLMHttpServer
        server = object.__new__(vLLMHttpServer)  # its __init__ starts the engine: only the check is wanted
        server.config = to_dataclass(OmegaConf.select(cfg, r))
        server.model_config = to_dataclass(OmegaConf.select(cfg, "actor_rollout_ref.model"), model_class)
    except Exception:  # noqa: BLE001 - no vLLM here, or a model verl's own conversion already reported
        return []
    try:
        server._validate_configs()
    except Exception as exc:  # noqa: BLE001 - the server would stop here: the finding
        said = f"{type(exc).__module__}.{type(exc).__name__}: {exc}".removeprefix("builtins.")
        keys, fix = [f"{r}.max_model_len"], None
        if "max_num_batched_tokens" in str(exc) and not _sel(cfg, f"{r}.enable_chunked_prefill", True):
            longest = server.config.max_model_len  # what the check had set before it failed
            keys = [f"{r}.enable_chunked_prefill", f"{r}.max_num_batched_tokens", f"{r}.max_model_len"]
            fix = (f"{r}.max_model_len at most {_sel(cfg, f'{r}.max_num_batched_tokens')} (the prompt and response "
                   f"lengths), {r}.max_num_batched_tokens at least {longest}, or enable_chunked_prefill=True")
            said = (f"enable_chunked_prefill=False needs max_num_batched_tokens >= max_model_len ({longest}), and "
                    f"verl raises it on a frozen config: {said}")
        message = f"verl's vLLM server stops at its start: {said}"
        return [{"rule": "vllm-server", "keys": keys, "severity": "error", "fix": fix, "message": message,
                 "source": "verl/workers/rollout/vllm_rollout/vllm_async_server.py, vLLMHttpServer._validate_configs",
                 "text": f"{keys[0]}: {message}"}]
    return []


def _safe(fn, cfg) -> bool:
    try:
        return bool(fn(cfg))
    except Exception:  # noqa: BLE001 - a value the rules themselves report
        return False


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
    "config_path" (optional: the user's --config-path, composed as main_ppo does, see _compose)}."""
    from hydra.errors import HydraException
    from omegaconf import OmegaConf

    cfg_dir = _config_dir()
    if cfg_dir is None:
        return {"ok": False, "verl": None, "errors": ["verl is not installed in this environment"]}
    from importlib.metadata import version

    name = doc.get("config_name") or "ppo_trainer"
    overrides = doc["overrides"]
    user_dir = _main_ppo_path(doc.get("config_path"))
    dirs = ([Path(user_dir)] if user_dir else []) + [cfg_dir]
    found = next((d / f"{name}.yaml" for d in dirs if (d / f"{name}.yaml").is_file()), None)
    result: dict = {"ok": False, "verl": version("verl"), "errors": [], "rejected": [],
                    "config": {"name": name, "exists": found is not None, "header": None,
                               "path": user_dir, "path_exists": Path(user_dir).is_dir() if user_dir else None,
                               "names": sorted(p.stem for d in dirs for p in d.glob("*.yaml")
                                               if not p.stem.startswith("_"))}}
    if user_dir and not result["config"]["path_exists"]:
        result["errors"].append(f"--config-path={user_dir}: no such folder where verl runs")
        return result
    if not result["config"]["exists"]:  # said by the host, with the names there are
        return result
    first = found.read_text().splitlines()[:1]
    if first and first[0].startswith("#") and "deprecat" in first[0].lower():
        result["config"]["header"] = first[0].lstrip("# ").strip()
    rejected: dict[int, str] = {}
    cfg = None
    for _ in range(len(overrides) + 1):
        try:
            cfg = _compose(name, [o for i, o in enumerate(overrides) if i not in rejected], user_dir)
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
    kept = [o for i, o in enumerate(overrides) if i not in rejected]
    validate(cfg, result, files=False, keys=_keys(kept), default_of=_defaults(name, kept, user_dir))
    result["ok"] = not (result["errors"] or result["rejected"])
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
