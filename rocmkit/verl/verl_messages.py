"""What verl itself says, made into findings a user can act on: its own exceptions, as the key they are about
(so the finding lands on that override's line), the reason in plain words and, where verl's message carries the
numbers, the values that pass; and the names verl looks up at the first update, asked of verl itself. Stdlib
only at import (verl is imported inside the functions that ask it): config_check.py imports it beside itself
in the target Python."""

from __future__ import annotations

import math
import re

A, R, C = "actor_rollout_ref.actor", "actor_rollout_ref.rollout", "critic"


def _near_multiples(value: int, step: int) -> str:
    below = [v for v in (value // step * step, value // step * step - step) if v > 0]
    above = [-(-value // step) * step, -(-value // step) * step + step]
    return " or ".join(str(v) for v in sorted(set(below + above)) if v != value)


def _real_train(m, get):
    real, minimal = int(m[1]), int(m[2])
    n = get(f"{R}.n") or 1
    train = real // n
    step = minimal // math.gcd(n, minimal)
    return ("data.train_batch_size",), (f"data.train_batch_size x {R}.n = {real} must be a multiple of {minimal} "
                                        "(the GPUs, or the Megatron data-parallel size x micro batch)",
                                        f"data.train_batch_size={_near_multiples(train, step)}")


# (pattern over verl's message, key(s), or a function of (match, get) -> (keys, (reason, fix)))
KNOWN = [
    (r"real_train_batch_size \((\d+)\) must be divisible by minimal possible batch size \((\d+)\)", _real_train),
    (r"train_batch_size \((\d+)\) must be >= actor\.ppo_mini_batch_size \((\d+)\)",
     lambda m, get: ((f"{A}.ppo_mini_batch_size", "data.train_batch_size"),
                     (m[0], f"{A}.ppo_mini_batch_size={m[1]} or less"))),
    (r"train_batch_size \((\d+)\) must be >= critic\.ppo_mini_batch_size \((\d+)\)",
     lambda m, get: ((f"{C}.ppo_mini_batch_size", "data.train_batch_size"),
                     (m[0], f"{C}.ppo_mini_batch_size={m[1]} or less"))),
    (r"n_gpus \((\d+)\) must be divisible by model_parallel_size", (f"{A}.megatron.tensor_model_parallel_size",
                                                                    "trainer.n_gpus_per_node")),
    (r"^ppo_mini_batch_size \(\d+\) must be divisible by ppo_micro_batch_size", (f"{A}.ppo_micro_batch_size",)),
    (r"^\[critic\] ppo_mini_batch_size", (f"{C}.ppo_micro_batch_size",)),
    (r"^ppo_micro_batch_size \(\d+\) \* ulysses", (f"{A}.ppo_micro_batch_size",)),
    (r"^critic\.ppo_micro_batch_size \(\d+\) \* ulysses", (f"{C}.ppo_micro_batch_size",)),
    (r"You have set both '([^']+)' AND", lambda m, get: ((m[1],), (m[0], None))),
    (r"Please set at least one of '([^']+)' or '([^']+)'", lambda m, get: ((m[2],), (m[0], None))),
    (r"Please set at least one of 'actor\.ppo_micro_batch_size' or 'actor\.ppo_micro_batch_size_per_gpu'",
     (f"{A}.ppo_micro_batch_size_per_gpu",)),
    (r"validation gen temperature", (f"{R}.temperature", f"{R}.val_kwargs.do_sample")),
    (r"sequence parallelism .* use_remove_padding", ("actor_rollout_ref.model.use_remove_padding",)),
    (r"Invalid loss_agg_mode", (f"{A}.loss_agg_mode",)),
    (r"Rollout mode 'sync' has been removed", (f"{R}.mode",)),
    (r"expert_parallel_size must be equal to", (f"{R}.expert_parallel_size",)),
    (r"not implemented pipeline_model_parallel_size > 1", (f"{R}.pipeline_model_parallel_size",)),
    (r"Invalid router_replay mode", (f"{A}.megatron.router_replay.mode",)),
    (r"router_replay\.mode='R2' requires", ("algorithm.rollout_correction.bypass_mode",)),
    (r"Unsupported loss mode", (f"{A}.policy_loss.loss_mode",)),
    (r"Unknown advantage estimator|adv_estimator", ("algorithm.adv_estimator",)),
]


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def translate(exc: BaseException, get, section: str | None = None, source: str | None = None) -> dict:
    """One verl exception as a finding: {"keys", "message", "fix", "severity", "text", "rule", "source"}."""
    target = None
    while type(exc).__name__ == "InstantiationException" and exc.__cause__ is not None:
        said = re.search(r"full_key: ([\w.]+)", str(exc))  # the section hydra was building
        target = said.group(1) if said else target
        exc = exc.__cause__  # hydra's "Error in call to target 'verl.workers.config...'": the dataclass's own error
    if target and target.endswith(".model") and get(f"{target}.path") == "":
        # verl's copy_to_local(path) reads path[-1] (verl/utils/fs.py): an IndexError for a variable never set
        return {"rule": "verl", "keys": [f"{target}.path"], "fix": None, "severity": "error", "source": source,
                "message": f"{target}.path is empty: verl reads the model from it (a variable the script never set?)",
                "text": f"{target}.path is empty: verl reads the model from it (a variable the script never set?)"}
    text = _first_line(exc)
    keys, fix = (), None
    for pattern, how in KNOWN:
        m = re.search(pattern, text)
        if m:
            if callable(how):
                keys, (text, fix) = how(m, get)
            else:
                keys = how
            break
    else:
        full_key = getattr(exc, "full_key", None)  # omegaconf's errors name the key they are about
        if full_key:
            keys = (f"{section}.{full_key}" if section else str(full_key),)
            text = re.sub(r"\s*full_key:.*", "", text)
        else:
            quoted = [q for q in re.findall(r"'([\w.]+)'", text) if "." in q and get(q) is not None]
            keys = tuple(quoted[:1]) or ((section,) if section else ())  # a section's conversion: that section
    if not keys or type(exc).__name__ in ("TypeError", "ZeroDivisionError", "AttributeError", "KeyError"):
        text = f"verl could not check this configuration ({type(exc).__name__}: {text})" if not keys else text
    out = {"rule": "verl", "keys": list(keys), "message": text, "fix": fix, "severity": "error",
           "source": source}
    out["text"] = text if not keys or text.startswith(keys[0]) else f"{keys[0]}: {text}"
    return out


def from_model_hub(exc: BaseException) -> bool:
    """Whether the exception came from reading a model's files (transformers or the Hugging Face hub), which an
    offline check must not need."""
    import traceback

    seen = exc
    while seen is not None:
        files = [f.filename for f in traceback.extract_tb(seen.__traceback__)]
        if any("transformers" in f or "huggingface_hub" in f for f in files) or "huggingface.co" in str(seen):
            return True
        seen = seen.__cause__ or seen.__context__
    return False



def without_vllm(exc: BaseException) -> bool:
    """Whether validate_config stopped at its LoRA rank check because this Python has no usable vLLM: verl 0.9.1's
    last check imports verl/workers/rollout/vllm_rollout, whose verl/third_party/vllm raises "vllm version None not
    supported and SGLang also not Found" at import. An environment this check runs in, not the configuration."""
    import traceback

    files = [f.filename for f in traceback.extract_tb(exc.__traceback__)]
    return any(f.replace("\\", "/").endswith("verl/third_party/vllm/__init__.py") for f in files)

# ---- names verl looks up at the first update, asked of verl itself ----

def ask_verl_for_kl_names(batch_rules) -> None:
    """The KL estimators are the names verl's own kl_penalty computes (it raises NotImplementedError on others,
    at the first update): asked by calling it on one number."""
    try:
        import torch
        from verl.trainer.ppo.core_algos import kl_penalty
    except ImportError:
        return

    def known(name: str) -> bool:
        try:
            kl_penalty(torch.zeros(1), torch.zeros(1), name)
        except Exception:  # noqa: BLE001 - NotImplementedError: a name verl does not compute
            return False
        return True
    batch_rules.KNOWN_KL = known


def registries(get) -> list:
    """The policy loss and the advantage estimator: names verl looks up in its registries at the first update."""
    out = []
    try:
        from difflib import get_close_matches

        from verl.trainer.ppo.core_algos import ADV_ESTIMATOR_REGISTRY, POLICY_LOSS_REGISTRY
    except ImportError:
        return out
    for key, registry, source in (
            ("actor_rollout_ref.actor.policy_loss.loss_mode", POLICY_LOSS_REGISTRY, "get_policy_loss_fn"),
            ("algorithm.adv_estimator", ADV_ESTIMATOR_REGISTRY, "get_adv_estimator_fn")):
        value = get(key)
        if value is not None and str(value) not in registry:
            close = get_close_matches(str(value), list(registry), n=3)
            p = {"rule": "registry", "keys": [key], "severity": "error", "source": None,
                 "message": f"{key}={value}: verl has no such name (verl/trainer/ppo/core_algos.py, {source})",
                 "fix": "one of " + ", ".join(close or sorted(registry))}
            p["text"] = p["message"]
            out.append(p)
    return out
