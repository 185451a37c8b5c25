"""verl-check's rules for what verl 0.9.1 asserts only after start-up (the per-rank batch split, value ranges, KL
names, registries), its messages (the key's own line, the values that pass, no raw exception, each once), a
critic's hub model read offline, and a user's --config-path. Inputs are plain overrides files, one key=value a
line, so they do not depend on how launch scripts are read."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from provisioned import provisioned

from rocmkit.verl import batch_rules

A, R, REF = "actor_rollout_ref.actor", "actor_rollout_ref.rollout", "actor_rollout_ref.ref"
BASE = {"algorithm.adv_estimator": "grpo", "data.train_files": "/t.parquet", "data.val_files": "/v.parquet",
        "data.train_batch_size": "256", "data.max_prompt_length": "512", "data.max_response_length": "1024",
        "actor_rollout_ref.model.path": "Qwen/Qwen2.5-0.5B-Instruct", f"{A}.ppo_mini_batch_size": "256",
        f"{A}.ppo_micro_batch_size_per_gpu": "32", f"{A}.use_kl_loss": "True", f"{A}.kl_loss_type": "low_var_kl",
        f"{R}.name": "vllm", f"{R}.n": "5", f"{R}.log_prob_micro_batch_size_per_gpu": "32",
        f"{REF}.log_prob_micro_batch_size_per_gpu": "32", "trainer.n_gpus_per_node": "8", "trainer.nnodes": "1"}


def getter(**change):
    """A composed config as the rules read it: verl's defaults for what BASE does not set."""
    values = {**{k: _num(v) for k, v in BASE.items()}, f"{A}.strategy": "fsdp", f"{A}.use_dynamic_bsz": False,
              f"{A}.ulysses_sequence_parallel_size": 1, f"{R}.tensor_model_parallel_size": 2,
              f"{R}.gpu_memory_utilization": 0.5, f"{R}.log_prob_use_dynamic_bsz": False}
    values.update({k.replace("__", "."): v for k, v in change.items()})
    return values.get


def _num(v: str):
    return int(v) if v.lstrip("-").isdigit() else {"True": True, "False": False}.get(v, v)


def rule(found: list[dict], name: str) -> dict:
    (p,) = [p for p in found if p["rule"] == name]
    return p


# ---- the rules alone (no verl) ----

def test_a_micro_batch_that_does_not_divide_the_rank_share_names_the_nearest_that_do():
    p = rule(batch_rules.problems(getter(**{f"{A}.ppo_micro_batch_size_per_gpu": 48}), use_reference=True), "micro")
    assert p["keys"][0] == f"{A}.ppo_micro_batch_size_per_gpu"
    assert "micro batch 48 does not divide the per-GPU mini batch 160 (256 x n 5 / 8" in p["message"]
    assert p["fix"] == f"{A}.ppo_micro_batch_size_per_gpu=32 or 40 or 80 or 160"
    assert "verl/workers/engine/utils.py, prepare_micro_batches" in p["message"]


@pytest.mark.parametrize(("change", "says"), [
    ({"trainer.nnodes": 0}, "trainer.nnodes=0: must be >= 1"),
    ({"data.train_batch_size": "abc"}, "data.train_batch_size=abc: must be a whole number"),
    ({f"{A}.ppo_micro_batch_size_per_gpu": 0}, "ppo_micro_batch_size_per_gpu=0: must be >= 1"),
    ({f"{A}.ppo_mini_batch_size": -256}, "ppo_mini_batch_size=-256: must be >= 1"),
    ({f"{R}.gpu_memory_utilization": 1.6}, "gpu_memory_utilization=1.6: must be a fraction in (0, 1]"),
])
def test_values_out_of_range_are_one_finding_on_their_key_and_stop_only_the_arithmetic_that_needs_them(change, says):
    found = batch_rules.problems(getter(**change))
    errors = [p for p in found if p["severity"] == "error"]
    assert [p["rule"] for p in errors] == ["range"] and says in errors[0]["message"]
    assert errors[0]["keys"] == list(change)
    # the rules that would compute with the value say they were not checked; gpu_memory_utilization is in none
    notes = [p for p in found if p["severity"] == "note"]
    assert all(p["rule"] == "not-checked" and "not checked, since it needs" in p["message"] for p in notes)
    assert bool(notes) == (f"{R}.gpu_memory_utilization" not in change), found


def test_a_wrong_fraction_hides_neither_the_mini_batch_nor_the_micro_batch_error():
    """The issue's four mistakes gave 3 errors: gpu_memory_utilization=1.5 stopped every batch rule, so each fix
    revealed the next error. Now one pass names all of them."""
    found = batch_rules.problems(getter(**{f"{R}.gpu_memory_utilization": 1.5, "data.train_batch_size": 64,
                                           f"{A}.ppo_mini_batch_size": 100, f"{A}.ppo_micro_batch_size_per_gpu": 3,
                                           f"{R}.n": 4}))
    assert {p["rule"] for p in found if p["severity"] == "error"} >= {"range", "train-mini", "micro"}, found
    # a mini batch of "abc" cannot be computed with: its rules say so, and those that do not need it still run
    found = batch_rules.problems(getter(**{f"{A}.ppo_mini_batch_size": "abc", f"{A}.kl_loss_type": "low_var_kll",
                                           f"{R}.log_prob_use_dynamic_bsz": True}))
    assert {p["rule"] for p in found} == {"range", "kl", "dynamic-match", "not-checked"}, found
    (note,) = [p for p in found if p["rule"] == "not-checked"]
    assert note["message"] == ("the mini- and micro-batch rules: not checked, since it needs "
                               f"{A}.ppo_mini_batch_size, whose value is wrong (said above)")
    # a micro batch of "abc" stops only the micro-batch rules: the mini batch above the train batch is still said
    found = batch_rules.problems(getter(**{f"{A}.ppo_micro_batch_size_per_gpu": "abc", "data.train_batch_size": 64,
                                           f"{A}.ppo_mini_batch_size": 128}))
    assert {p["rule"] for p in found} == {"range", "train-mini", "not-checked"}, found



def _apply(fix: str) -> dict:
    """A fix as verl-check says it (KEY=V, or KEY=V with KEY=V ... for fixes that go together): its first values."""
    pairs = fix.partition(" (")[0].split(" with ")
    return {k: int(v.split(" or ")[0]) for k, _, v in (p.partition("=") for p in pairs)}


@pytest.mark.parametrize("change", [
    # 8 GPUs, n 5: train 60 < mini 64 and 60 x 5 does not split over 8 GPUs; the rules alone said train 48 and
    # mini 30, and 30 x 5 = 150 does not split over 8 GPUs either
    {"data.train_batch_size": 60, f"{A}.ppo_mini_batch_size": 64, f"{A}.ppo_micro_batch_size_per_gpu": 1,
     f"{R}.log_prob_micro_batch_size_per_gpu": 1, f"{REF}.log_prob_micro_batch_size_per_gpu": 1},
    # a mini batch the rule moves to 96 makes the micro batches of 32 fail
    {"data.train_batch_size": 1000, f"{A}.ppo_mini_batch_size": 100, f"{R}.n": 1},
    {"data.train_batch_size": 1024, "trainer.n_gpus_per_node": 6},
    {"data.train_batch_size": 128, f"{A}.ppo_mini_batch_size": 32, f"{R}.n": 1, f"{A}.ppo_micro_batch_size_per_gpu": 8},
])
def test_the_suggested_fixes_pass_every_rule_together(change):
    get = getter(**change)
    errors = [p for p in batch_rules.problems(get, use_reference=True) if p["severity"] == "error"]
    assert errors and all(p["fix"] for p in errors)
    fixed = {k: v for p in errors for k, v in _apply(p["fix"]).items()}
    after = batch_rules.problems(lambda k: fixed.get(k, get(k)), use_reference=True)
    assert [p["text"] for p in after if p["severity"] == "error"] == [], (errors, fixed)


class InstantiationException(Exception):  # hydra's, by name (verl_messages reads the type's name)
    pass


def test_an_empty_model_path_is_named_not_an_index_error():
    """verl's examples/ppo_trainer/run_moonlight16b_a3b_gsm8k_megatron.sh passes critic.model.path=$LLM with LLM
    never set: verl's copy_to_local reads path[-1] and hydra says "IndexError: string index out of range"."""
    from rocmkit.verl import verl_messages

    exc = InstantiationException("Error in call to target 'verl.workers.config.model.HFModelConfig':\n"
                                 "IndexError('string index out of range')\nfull_key: critic.model")
    exc.__cause__ = IndexError("string index out of range")
    found = verl_messages.translate(exc, {"critic.model.path": ""}.get)
    assert found["keys"] == ["critic.model.path"]
    assert found["text"].startswith("critic.model.path is empty") and "IndexError" not in found["text"]


def test_appending_a_key_verl_already_has_says_drop_the_plus_not_unknown():
    """verl's examples/grpo_trainer/run_gptoss_20b.sh passes +actor_rollout_ref.actor.fsdp_config.model_dtype=...;
    Hydra: "Could not append to config. An item is already at ..." (the key exists: no + is needed)."""
    from rocmkit.verl import recipe_check
    from rocmkit.verl.launch_script import Invocation, Override

    text = "+actor_rollout_ref.actor.fsdp_config.model_dtype=bfloat16"
    inv = Invocation("run.sh", 3, [Override(text, text[1:].partition("=")[0], 7, "+")])
    error = ("Could not append to config. An item is already at 'actor_rollout_ref.actor.fsdp_config.model_dtype'.")
    (found,) = recipe_check.findings(inv, {"verl": "0.9.1", "rejected": [{"index": 0, "error": error}]})
    assert found.line == 7 and "existing key" in found.message and "unknown" not in found.message
    assert found.instead == f"{text[1:]} (without the +: verl's config has this key)"

def test_the_upstream_rollout_correction_example_is_rejected():
    """verl's examples/rollout_correction/run_with_rollout_corr.sh: mini 32 x n 1 (verl's default) / 8 GPUs = 4
    samples per GPU, micro batch 8."""
    get = getter(**{"data.train_batch_size": 128, f"{A}.ppo_mini_batch_size": 32, f"{R}.n": 1,
                    f"{A}.ppo_micro_batch_size_per_gpu": 8, f"{R}.log_prob_micro_batch_size_per_gpu": 8,
                    "algorithm.adv_estimator": "rloo"})
    found = batch_rules.problems(get)
    p = rule(found, "micro")
    assert "per-GPU mini batch 4 (32 x n 1 / 8" in p["message"] and p["fix"].endswith("=2 or 4")
    assert rule(found, "group")["severity"] == "warning"


def test_padding_follows_verls_trainer():
    # lcm(8 ranks, mini 64 x n 3) = 192: 1000 x 3 samples are padded to 16 x 192
    assert batch_rules.batch_after_padding(1000, 3, 8, 64, None) == 3072
    assert batch_rules.batch_after_padding(256, 5, 8, 256, 64) == 1280


# ---- against verl 0.9.1 (the verl-cpu venv CI provisions) ----

def verl_python() -> str:
    return provisioned("ROCMKIT_VERL_CPU_PYTHON", ".ci/provision/50-cpu-stacks.sh makes the verl-cpu venv", "VERL_CPU")


ADVANTAGE = """
import json
import numpy as np
import torch
from verl.trainer.ppo import core_algos
rewards = torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 0.5]])  # one response a prompt, its reward on the last token
out = {}
for family in ("grpo", "rloo"):
    fn = getattr(core_algos, f"compute_{family}_outcome_advantage")
    adv, _ = fn(token_level_rewards=rewards, response_mask=torch.ones_like(rewards), index=np.array(["a", "b"]))
    out[family] = [round(float(x), 4) for x in adv[:, 0]]
print(json.dumps(out))
"""


@pytest.fixture(scope="module")
def verl_advantages() -> dict:
    out = subprocess.run([verl_python(), "-c", ADVANTAGE], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.splitlines()[-1])


@pytest.mark.parametrize("estimator, family", [("grpo", "grpo"), ("rloo", "rloo"), ("rloo_vectorized", "rloo")])
def test_one_response_a_prompt_is_warned_citing_the_estimators_own_function_which_verl_runs(estimator, family,
                                                                                             verl_advantages):
    """n=1 under a group estimator: verl's own GRPO and RLOO functions, given one response a prompt, return the raw
    reward as the advantage (what the warning says); the warning cites the function the job's estimator runs."""
    get = getter(**{f"{R}.n": 1, "algorithm.adv_estimator": estimator})
    warning = rule(batch_rules.problems(get), "group")
    assert f"compute_{family}_outcome_advantage" in warning["message"]
    assert f"{family.upper()} then takes" in warning["message"]
    assert verl_advantages[family] == [1.0, 0.5]  # the rewards themselves


def overrides_file(tmp_path: Path, name: str, **change) -> tuple[Path, dict[str, int]]:
    """BASE with some values changed (KEY=VALUE, '.' written '__'), one a line; and each key's line."""
    values = {**BASE, **{k.replace("__", "."): str(v) for k, v in change.items()}}
    path = tmp_path / name
    path.write_text("".join(f"{k}={v}\n" for k, v in values.items()))
    return path, {k: i + 1 for i, k in enumerate(values)}


def config_folder_script(tmp_path: Path, head: str = "") -> tuple[Path, Path]:
    """A launch script whose --config-path is a folder of the user's (verl's multi-turn examples' shape): its
    config `mine` sets a train batch of 1000 and a mini batch of 100 over verl's ppo_trainer, which does not split
    over 8 GPUs. `head` goes first in the yaml. Returns the script and the folder."""
    folder = tmp_path / "config"
    folder.mkdir()
    (folder / "mine.yaml").write_text(head + "defaults:\n  - ppo_trainer\n  - _self_\n"
                                      "data:\n  train_batch_size: 1000\nactor_rollout_ref:\n  actor:\n"
                                      "    ppo_mini_batch_size: 100\n")
    script = tmp_path / "run.sh"
    body = "".join(f"    {k}={v} \\\n" for k, v in BASE.items()
                   if k not in ("data.train_batch_size", f"{A}.ppo_mini_batch_size"))
    script.write_text(f"python3 -m verl.trainer.main_ppo --config-path={folder} --config-name=mine \\\n{body}"
                      f"    trainer.total_epochs=1\n")
    return script, folder


CASES = {  # name: (changes, the key the error is on, what it says, what it suggests)
    "micro-48.txt": ({f"{A}__ppo_micro_batch_size_per_gpu": 48}, f"{A}.ppo_micro_batch_size_per_gpu",
                     "per-GPU mini batch 160", "32 or 40 or 80 or 160"),
    "train-1000-mini-100.txt": ({"data__train_batch_size": 1000, f"{A}__ppo_mini_batch_size": 100, f"{R}__n": 1},
                                f"{A}.ppo_mini_batch_size", "100 samples does not split over 8",
                                "ppo_mini_batch_size=96 with"),
    "log-prob-48.txt": ({"data__train_batch_size": 1024, f"{R}__log_prob_micro_batch_size_per_gpu": 48},
                        f"{R}.log_prob_micro_batch_size_per_gpu", "per-GPU share 640", "40 or 64"),
    "train-8-mini-1.txt": ({"data__train_batch_size": 8, f"{A}__ppo_mini_batch_size": 1, f"{R}__n": 1,
                            f"{A}__ppo_micro_batch_size_per_gpu": 1, f"{R}__log_prob_micro_batch_size_per_gpu": 1,
                            f"{REF}__log_prob_micro_batch_size_per_gpu": 1},
                           f"{A}.ppo_mini_batch_size", "1 samples does not split over 8", "=8"),
    "kl.txt": ({f"{A}__kl_loss_type": "low_var_kll"}, f"{A}.kl_loss_type", "no such KL estimator", "low_var_kl"),
    "micro-0.txt": ({f"{A}__ppo_micro_batch_size_per_gpu": 0}, f"{A}.ppo_micro_batch_size_per_gpu", "must be >= 1",
                    "or more"),
    "mini-minus.txt": ({f"{A}__ppo_mini_batch_size": -256}, f"{A}.ppo_mini_batch_size", "must be >= 1", "or more"),
    "util.txt": ({f"{R}__gpu_memory_utilization": 1.6}, f"{R}.gpu_memory_utilization", "(0, 1]", "0.9"),
    # the type verl's YAML default declares (typed_values), said instead of the range rule's vaguer words
    "abc.txt": ({"data__train_batch_size": "abc"}, "data.train_batch_size",
                "data.train_batch_size=abc: verl wants an int (its default 1024)", "data.train_batch_size=1024"),
    "nnodes-0.txt": ({"trainer__nnodes": 0}, "trainer.nnodes", "must be >= 1", "or more"),
    "gpus-6.txt": ({"data__train_batch_size": 1024, "trainer__n_gpus_per_node": 6}, "data.train_batch_size",
                   "real_train_batch_size (5120) must be divisible by minimal possible batch size (6)",
                   "data.train_batch_size=1026"),
}


@pytest.mark.slow
def test_verl_check_says_what_verl_asserts_after_start_up_on_the_keys_line_once(tmp_path):
    files = {name: overrides_file(tmp_path, name, **change) for name, (change, *_) in CASES.items()}
    grpo_n1, n1_lines = overrides_file(tmp_path, "grpo-n1.txt", **{f"{R}__n": 1})
    no_engine = tmp_path / "no-engine.txt"  # rollout.name is mandatory in verl: one error, not two
    no_engine.write_text("".join(f"{k}={v}\n" for k, v in BASE.items() if k != f"{R}.name"))
    # validate_config's last check imports vLLM for a LoRA rank (verl's examples/tuning/*-lora_*): without a usable
    # vLLM it is a note, not "verl could not check this configuration"; under FSDP2, since LoRA under FSDP1 is an
    # error of its own (rollout_rules.py)
    lora, _ = overrides_file(tmp_path, "lora.txt", actor_rollout_ref__model__lora_rank=32,
                             actor_rollout_ref__actor__strategy="fsdp2")
    lora1, _ = overrides_file(tmp_path, "lora-fsdp1.txt", actor_rollout_ref__model__lora_rank=32)
    out = subprocess.run([sys.executable, "-m", "rocmkit", "verl-check", "--verl-python", verl_python(), "--json",
                          *(str(p) for p, _ in files.values()), str(grpo_n1), str(no_engine), str(lora),
                          str(lora1)],
                         capture_output=True, text=True,
                         timeout=900, env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
    assert out.returncode == 1, out.stderr
    doc = json.loads(out.stdout)
    by_file: dict[str, list[dict]] = {}
    for f in doc["findings"]:
        by_file.setdefault(Path(f["file"]).name, []).append(f)
    for name, (_, key, says, fix) in CASES.items():
        errors = [f for f in by_file[name] if f["severity"] == "error"]
        mine = [f for f in errors if says in f["message"]]
        assert mine, (name, errors)
        assert mine[0]["line"] == files[name][1][key] and mine[0]["key"] == key, (name, mine)
        assert fix is None or fix in (mine[0]["instead"] or ""), (name, mine)
        for f in errors:
            assert "Error:" not in f["message"] and "Traceback" not in f["message"], f
    for found in by_file.values():  # each finding once
        said = [(f["line"], f["message"]) for f in found]
        assert len(said) == len(set(said)), found
    (missing,) = [f for f in by_file["no-engine.txt"] if f["severity"] == "error"]
    assert [f["message"] for f in by_file["no-engine.txt"] if f["severity"] == "note"] == [
        "verl 0.9.1: verl's own validation (validate_config and its dataclasses) was not run: it stops at the first of "
        "the errors "
        "above, or says them again in its words; it runs once they are fixed"]
    assert missing["severity"] == "error" and f"mandatory values not set: {R}.name" in missing["message"], missing
    (warning,) = by_file["grpo-n1.txt"]
    assert warning["severity"] == "warning" and warning["line"] == n1_lines[f"{R}.n"]
    assert "no group baseline" in warning["message"]
    assert [f["severity"] for f in by_file.get("lora.txt", [])] in ([], ["note"]), by_file["lora.txt"]
    errors = [f for f in by_file["lora-fsdp1.txt"] if f["severity"] == "error"]
    assert [f["key"] for f in errors] == ["actor_rollout_ref.actor.strategy"] and "empty adapter" in errors[0]["message"]


@pytest.mark.slow
def test_verl_check_reports_every_error_in_one_pass_and_says_what_a_wrong_value_left_unchecked(tmp_path):
    """The issue's mistakes in one file: a fraction of 1.5, a mini batch above the train batch, a micro batch that
    does not divide, a rollout TP that does not divide the GPUs: four errors in one pass (it gave fewer, each fix
    revealing the next). A value of the wrong type (nnodes=one) leaves the rules that compute with it unchecked,
    each saying so on its line; verl's own validation, not run after errors, says so too."""
    four, lines = overrides_file(tmp_path, "four.txt", data__train_batch_size=64, **{f"{R}__n": 4,
        f"{R}__gpu_memory_utilization": 1.5, f"{A}__ppo_mini_batch_size": 100, f"{A}__ppo_micro_batch_size_per_gpu": 3,
        f"{R}__tensor_model_parallel_size": 3})
    typo, typo_lines = overrides_file(tmp_path, "typo.txt", trainer__nnodes="one",
                                      **{f"{R}__gpu_memory_utilization": 1.5})
    out = subprocess.run([sys.executable, "-m", "rocmkit", "verl-check", "--verl-python", verl_python(), "--json",
                          str(four), str(typo)], capture_output=True, text=True, timeout=900,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
    assert out.returncode == 1, out.stderr
    by_file: dict[str, list[dict]] = {}
    for f in json.loads(out.stdout)["findings"]:
        by_file.setdefault(Path(f["file"]).name, []).append(f)
    errors = {f["line"] for f in by_file["four.txt"] if f["severity"] == "error"}
    assert {lines[f"{R}.gpu_memory_utilization"], lines[f"{A}.ppo_mini_batch_size"],
            lines[f"{A}.ppo_micro_batch_size_per_gpu"], lines[f"{R}.tensor_model_parallel_size"]} <= errors, by_file
    notes = [f for f in by_file["four.txt"] if f["severity"] == "note"]
    assert any("verl's own validation" in f["message"] and "was not run" in f["message"] for f in notes), notes
    typo_found = by_file["typo.txt"]
    assert {f["line"] for f in typo_found if f["severity"] == "error"} == {
        typo_lines["trainer.nnodes"], typo_lines[f"{R}.gpu_memory_utilization"]}, typo_found
    unchecked = [f["message"] for f in typo_found if "not checked, since it needs trainer.nnodes" in f["message"]]
    assert any("the batch and data-parallel rules" in m for m in unchecked), typo_found
    assert any("the rollout replicas' GPU split" in m for m in unchecked), typo_found


@pytest.mark.slow
def test_a_critics_hub_model_offline_is_a_note_and_a_users_config_folder_is_followed(tmp_path):
    """PPO with a critic naming a hub model: validate_config reads the critic's model config, which an offline check
    cannot; that is a note and the other checks still run. A launch script's --config-path (verl's multi-turn
    examples) is composed with verl's own config folder on the search path, as main_ppo does."""
    critic, _ = overrides_file(tmp_path, "critic.txt", algorithm__adv_estimator="gae",
                               critic__model__path="Qwen/Qwen2.5-0.5B-Instruct",
                               critic__ppo_micro_batch_size_per_gpu=8)
    critic_bad, lines = overrides_file(tmp_path, "critic-bad.txt", algorithm__adv_estimator="gae",
                                       critic__model__path="Qwen/Qwen2.5-0.5B-Instruct",
                                       critic__ppo_micro_batch_size_per_gpu=8,
                                       **{f"{A}__ppo_micro_batch_size_per_gpu": 48})
    script, _ = config_folder_script(tmp_path, "hydra:\n  searchpath:\n    - file://verl/trainer/config\n")
    out = subprocess.run([sys.executable, "-m", "rocmkit", "verl-check", "--verl-python", verl_python(), "--json",
                          str(critic), str(critic_bad), str(script)], capture_output=True, text=True, timeout=900,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
    doc = json.loads(out.stdout)
    found = {name: [f for f in doc["findings"] if Path(f["file"]).name == name]
             for name in ("critic.txt", "critic-bad.txt", "run.sh")}
    (note,) = found["critic.txt"]
    assert note["severity"] == "note" and "the critic's model config was not read" in note["message"], note
    assert "huggingface" not in json.dumps(found["critic.txt"]).lower() or note["severity"] == "note"
    errors = [f for f in found["critic-bad.txt"] if f["severity"] == "error"]
    assert len(errors) == 1 and errors[0]["line"] == lines[f"{A}.ppo_micro_batch_size_per_gpu"], errors
    errors = [f for f in found["run.sh"] if f["severity"] == "error"]
    assert len(errors) == 1 and "does not split over 8" in errors[0]["message"], found["run.sh"]


@pytest.mark.slow
@pytest.mark.docker
def test_a_users_config_folder_is_followed_in_an_image_as_on_the_host(tmp_path):
    """--image with a script whose --config-path is a folder of this host: the image's verl composes it from the
    same path (mounted read-only), and says what the host's verl 0.9.1 says about it."""
    image = provisioned("ROCMKIT_TEST_VERL_CPU_IMAGE", ".ci/image-gate.sh builds the verl-cpu image", "VERL_CPU")
    script, folder = config_folder_script(tmp_path)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])}
    docs = {}
    for where in (["--image", image], ["--verl-python", verl_python()]):
        out = subprocess.run([sys.executable, "-m", "rocmkit", "verl-check", *where, "--json", str(script)],
                             capture_output=True, text=True, timeout=900, env=env)
        assert out.returncode == 1, out.stderr[-2000:]
        docs[where[0]] = json.loads(out.stdout)
    assert docs["--image"]["target"].endswith(f"with {folder} of this host"), docs["--image"]["target"]
    assert docs["--image"]["findings"] == docs["--verl-python"]["findings"]
    errors = [f for f in docs["--image"]["findings"] if f["severity"] == "error"]
    assert len(errors) == 1 and "does not split over 8" in errors[0]["message"], docs["--image"]["findings"]


def test_only_absolute_config_folders_of_this_host_go_into_the_image(tmp_path):
    from rocmkit.verl.launch_script import Invocation
    from rocmkit.verl.recipe_check import config_folders

    (tmp_path / "a" / "b").mkdir(parents=True)
    paths = [str(tmp_path / "a"), str(tmp_path / "a" / "b") + "/", "./config", str(tmp_path / "missing"), None]
    found = config_folders([Invocation(file="run.sh", line=1, overrides=[], config_path=p) for p in paths])
    assert found == [str(tmp_path / "a")]  # the outer folder holds the inner; relative and absent ones stay out
