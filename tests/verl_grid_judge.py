"""Run in a Python with verl (tests/test_verl_rules_differential.py starts it once): judge each generated setting
twice, by rocmkit's verl-check (rocmkit/verl/config_check.validate, as `rocmkit verl-check` runs it) and by verl
0.9.1's own code paths (benchmarks/verl_oracle.judge), and print one JSON line per setting with both verdicts.

usage: verl_grid_judge.py SETTINGS.json  (a list of {"engine": "fsdp"|"megatron"|"veomni", "overrides": {...}})
Each engine's base config is composed and resolved once (Hydra), and each setting applied to it with
OmegaConf.update (with the keys that copy its value by interpolation) and put back after, so 500 settings take
seconds, not 500 composes and copies."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
os.environ.setdefault("HF_HUB_OFFLINE", "1")

BASE = ["algorithm.adv_estimator=grpo", "data.train_files=/t.parquet", "data.val_files=/v.parquet",
        "data.max_prompt_length=512", "data.max_response_length=512", "actor_rollout_ref.model.path=/m",
        "actor_rollout_ref.rollout.name=vllm", "actor_rollout_ref.actor.use_kl_loss=True",
        "actor_rollout_ref.actor.ppo_max_token_len_per_gpu=4096"]


COPY = re.compile(r"^\$\{(?:oc\.select:)?([A-Za-z_][\w.]*)(?:,[^}]*)?\}$")


def copies(container: dict, prefix: str = "", out: dict | None = None) -> dict[str, list[str]]:
    """key -> the keys whose value is an interpolation copying it (ref.log_prob_use_dynamic_bsz copies
    actor.use_dynamic_bsz...), read from the unresolved config."""
    out = {} if out is None else out
    for k, v in container.items():
        if isinstance(v, dict):
            copies(v, f"{prefix}{k}.", out)
        elif isinstance(v, str) and COPY.match(v):
            out.setdefault(COPY.match(v)[1], []).append(f"{prefix}{k}")
    return out


STATE: dict = {}  # the composed bases, made before the worker processes fork


def judge(s: dict) -> str:
    from omegaconf import OmegaConf

    import verl_oracle
    from rocmkit.verl import config_check

    cfg, changed = STATE["bases"][s["engine"]], {}
    for key, value in s["overrides"].items():
        for k in [key, *STATE["follows"][s["engine"]].get(key, [])]:
            changed.setdefault(k, OmegaConf.select(cfg, k))
            OmegaConf.update(cfg, k, value, merge=False)
    accepted, reason = verl_oracle.judge(cfg, copy_first=False)
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # the typed check reads the setting's keys and their values before it (verl's defaults, in `changed`)
        result = config_check.validate(cfg, {"ok": False, "errors": []}, files=False, resolved=True,
                                       keys=list(s["overrides"]), default_of=changed.get)
    for k, v in changed.items():
        OmegaConf.update(cfg, k, v, merge=False)
    return json.dumps({"setting": s, "verl": [accepted, reason], "rocmkit": [result["ok"], result["errors"]]})


def main() -> None:
    import multiprocessing

    from omegaconf import OmegaConf

    import verl_oracle
    from rocmkit.verl import config_check  # noqa: F401 - imported before the fork, once

    settings = json.loads(Path(sys.argv[1]).read_text())
    STATE.update(bases={}, follows={})
    for engine, extra in (("fsdp", []), ("megatron", ["model_engine=megatron"]), ("veomni", ["model_engine=veomni"])):
        cfg = verl_oracle.compose(None, "ppo_trainer", extra + BASE)
        STATE["follows"][engine] = copies(OmegaConf.to_container(cfg, resolve=False))
        OmegaConf.resolve(cfg)  # once: each setting is applied to the resolved config, and what it changed put back
        STATE["bases"][engine] = cfg
    workers = min(len(os.sched_getaffinity(0)), 4)
    with multiprocessing.get_context("fork").Pool(workers) as pool:  # the imports (most of the time) made once
        for line in pool.imap(judge, settings, chunksize=16):
            print(line, flush=True)


if __name__ == "__main__":
    main()
