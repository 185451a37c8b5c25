"""The built-in model's files (rocmkit/tinymodel.py writes them without transformers, so certify's setup
imports none) load in transformers exactly as the files transformers' own `save_pretrained` writes: the same config,
the same tokenizer behaviour and chat template, the same weight names, shapes, tying and initial values. Checked in
each transformers CI provisions (the test venv's, TRL's and verl's CPU stacks'), by tests/tinymodel_oracle.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from provisioned import provisioned

ORACLE = Path(__file__).with_name("tinymodel_oracle.py")
ROOT = Path(__file__).resolve().parents[1]


def python(which: str) -> str:
    if which == "tests":
        return sys.executable
    area = which.upper().replace("-", "_")
    return provisioned(f"ROCMKIT_{area}_PYTHON", f".ci/provision/50-cpu-stacks.sh makes the {which} venv", area)


def both(tmp_path: Path, which: str, size: str) -> dict:
    done = subprocess.run([python(which), str(ORACLE), str(tmp_path), size], capture_output=True, text=True,
                          timeout=600, cwd=ROOT, env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.mark.parametrize(("which", "size"), [("tests", "tiny"), ("tests", "0.5b"), ("trl-cpu", "tiny"),
                                             ("verl-cpu", "tiny")])
def test_the_builtin_model_loads_as_transformers_own_files_do(tmp_path, which, size):
    doc = both(tmp_path, which, size)
    ours, theirs = doc["rocmkit"], doc["transformers"]
    assert ours["loading"] == {"missing_keys": [], "unexpected_keys": [], "mismatched_keys": []}
    for part in ("config", "tokenizer", "generation", "tied", "weights"):
        assert ours[part] == theirs[part], f"transformers {doc['version']}: {part} differs"
    # what the comparison covers: a tied Qwen2 whose padding row of the embedding is zero, left padding
    assert ours["tied"] and ours["weights"]["model.embed_tokens.weight"]["zero_rows"] == [ours["tokenizer"]["pad"]]
    assert ours["tokenizer"]["padding_side"] == "left" and ours["tokenizer"]["chat"].endswith("assistant\n")
    assert {w["values"] for w in ours["weights"].values()} == {"drawn", "ones", "zeros"}
