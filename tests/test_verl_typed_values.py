"""verl-check on values of the wrong type, which compose and which verl 0.9's main_ppo meets only where it first
uses them (after Ray and the models have started): each is an error on its own line naming the key, the value, the
type verl declares and its default. And the other way round: verl's VeOmni examples, whose actor section has no
ulysses_sequence_parallel_size, pass as verl passes them. All against the verl-cpu venv's verl 0.9.1."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_verl_rules import overrides_file, verl_python

HERE = Path(__file__).parent
A = "actor_rollout_ref.actor"

# (the typo, the key, what verl-check says, the fix): a new user's three, reported in issue 56
TYPOS = {
    "prompt.txt": ({"data__max_prompt_length": "5l2"}, "data.max_prompt_length",
                   "data.max_prompt_length=5l2: verl wants an int (its default 512)", "data.max_prompt_length=512"),
    "lr.txt": ({f"{A}__optim__lr": "le-6"}, f"{A}.optim.lr",
               (f"{A}.optim.lr=le-6: verl wants a float (its default 1e-06; verl/workers/config/optimizer.py, "
                "FSDPOptimizerConfig.lr)"), f"{A}.optim.lr=1e-06"),
    "epochs.txt": ({"trainer__total_epochs": "fifteen"}, "trainer.total_epochs",
                   "trainer.total_epochs=fifteen: verl wants an int (its default 30)", "trainer.total_epochs=30"),
}


def verl_check(*paths: Path) -> tuple[int, dict]:
    out = subprocess.run([sys.executable, "-m", "rocmkit", "verl-check", "--verl-python", verl_python(), "--json",
                          *(str(p) for p in paths)], capture_output=True, text=True, timeout=900,
                         env={**os.environ, "PYTHONPATH": str(HERE.parent)})
    assert out.stdout, out.stderr
    return out.returncode, json.loads(out.stdout)


@pytest.mark.slow
def test_each_typo_is_an_error_on_its_line_naming_the_type_verl_wants(tmp_path):
    files = {name: overrides_file(tmp_path, name, **change) for name, (change, *_) in TYPOS.items()}
    fine, _ = overrides_file(tmp_path, "fine.txt")  # BASE alone: verl accepts it, so each typo is the only error
    rc, doc = verl_check(*(p for p, _ in files.values()), fine)
    assert rc == 1
    by_file: dict[str, list[dict]] = {}
    for f in doc["findings"]:
        by_file.setdefault(Path(f["file"]).name, []).append(f)
    assert not [f for f in by_file.get("fine.txt", []) if f["severity"] == "error"]
    for name, (_, key, says, fix) in TYPOS.items():
        errors = [f for f in by_file[name] if f["severity"] == "error"]
        assert len(errors) == 1 and errors[0]["message"].endswith(": " + says), (name, errors)  # after "verl X: "
        assert errors[0]["key"] == key and errors[0]["line"] == files[name][1][key], errors
        assert errors[0]["instead"] == fix, errors


@pytest.mark.slow
def test_none_where_verl_allows_it_passes(tmp_path):
    """verl v0.9.0's examples/grpo_trainer/run_qwen3_30b_veomni.sh (its overrides in tests/data): VeOmni's actor
    leaves ulysses_sequence_parallel_size out, which the rules read as None. And a value set to null where verl's
    dataclass says Optional (the micro batch, with dynamic batching) or its YAML default is null."""
    nulls, _ = overrides_file(tmp_path, "nulls.txt", **{f"{A}__ppo_micro_batch_size_per_gpu": "null",
                                                        f"{A}__use_dynamic_bsz": "True",
                                                        "trainer__total_training_steps": "null"})
    rc, doc = verl_check(HERE / "data" / "verl_check" / "veomni_qwen3_30b.txt", nulls)
    assert rc == 0, [f for f in doc["findings"] if f["severity"] == "error"]


@pytest.mark.slow
def test_none_where_verl_wants_a_number_is_said(tmp_path):
    """trainer.total_epochs is 30 in verl's YAML and no dataclass makes it Optional: null breaks verl's epoch
    loop, and is said like a typo."""
    path, lines = overrides_file(tmp_path, "epochs-null.txt", trainer__total_epochs="null")
    rc, doc = verl_check(path)
    errors = [f for f in doc["findings"] if f["severity"] == "error"]
    assert rc == 1 and len(errors) == 1, errors
    assert errors[0]["message"].endswith(": trainer.total_epochs=None: verl wants an int (its default 30)"), errors
    assert errors[0]["line"] == lines["trainer.total_epochs"]
