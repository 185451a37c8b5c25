"""`rocmkit tune`'s memory model against the verl certificates kept from real GPUs (`python
benchmarks/tune_memory.py --certificates`, no GPU): every shape within 25 % of the peak verl measured, both terms
of the model (the training step, the weight sync) exercised by some shape, the tuning guide's table the
benchmark's output, and certificates the model cannot be compared with refused with the reason."""

from __future__ import annotations

import copy
import importlib.util
import json
import os
from pathlib import Path

import pytest

from rocmkit.tune import measured, memory, models, plan
from rocmkit.tune.memory import GIB

REPO = Path(__file__).resolve().parent.parent
TOLERANCE = 0.25


@pytest.fixture(scope="module")
def builtin_model():
    """The built-in model's vocabulary comes from training its tokenizer: the tokenizers package (certify's)."""
    try:
        import tokenizers  # noqa: F401
    except ImportError:
        if os.environ.get("ROCMKIT_REQUIRE_CERTIFY") == "1":
            pytest.fail("tokenizers is not installed, but CI provisioned the certify environment")
        pytest.skip("tokenizers not installed (pip install 'rocmkit[certify]')")


@pytest.fixture(scope="module")
def bench():
    """benchmarks/tune_memory.py as a module (it imports torch only to measure on a GPU)."""
    spec = importlib.util.spec_from_file_location("tune_memory", REPO / "benchmarks" / "tune_memory.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def kept(bench, builtin_model):
    return bench.certificates()


def _doc(bench, name: str) -> dict:
    path = next(folder / f"{name}.json" for folder, _ in bench.KEPT if (folder / f"{name}.json").exists())
    return json.loads(path.read_text())


def test_every_certified_shape_within_25_percent(kept):
    compared, skipped = kept
    assert {"verl-1gpu", "verl-2gpu", "verl-4gpu-rollout-tp2", "verl-h100-0.5b"} <= {c.name for c in compared}
    for c in compared:
        for when, ratio in (("step 1", c.ratio_first), (f"step {c.last_step}", c.ratio_last)):
            assert abs(ratio - 1) <= TOLERANCE, f"{c.name} at {when}: predicted/measured {ratio:.3f}"
    assert {name for name, _ in skipped} == {"trl-1gpu", "trl-server-2gpu"}


def test_both_terms_of_the_model_are_checked(kept):
    """The 0.5b model's first step peaks in the optimizer step (the step term decides), every later step and
    the tiny model's in the weight sync (the sync term decides): a change to either moves a ratio."""
    compared, _ = kept
    deciding = {(c.name, c.predicted_first.phase, c.predicted_last.phase) for c in compared}
    assert ("verl-h100-0.5b", "optimizer step", "weight sync") in deciding
    assert ("verl-2gpu", "weight sync", "weight sync") in deciding


def test_the_guide_shows_the_benchmark_table(bench, kept):
    guide = (REPO / "docs" / "guides" / "tuning.md").read_text()
    assert bench.certificate_table(*kept) in guide, (
        "the predicted-vs-measured table in docs/guides/tuning.md is stale: paste the output of "
        "`python benchmarks/tune_memory.py --certificates`")


def test_shape_read_from_the_certificate(bench, builtin_model):
    s = measured.shape(_doc(bench, "verl-4gpu-rollout-tp2"))
    assert (s.gpus, s.rollout_tp, s.micro_batch, s.tokens) == (4, 2, 4, 4 * (128 + 16))
    assert s.grad_ckpt and s.fsdp1 and not (s.param_offload or s.optimizer_offload or s.offload_policy)
    assert s.bucket_bytes == memory.VERL_SYNC_BUCKET
    assert (s.model.vocab, s.model.hidden, s.model.layers) == (384, 256, 2)


def test_overrides_as_hydra_reads_them():
    o = measured.verl_overrides(["python3", "-m", "verl.trainer.main_ppo", "a.b=1", "+c.d=x=y", "++e=True"])
    assert o == {"a.b": "1", "c.d": "x=y", "e": "True"}


def test_the_commands_settings_move_the_prediction(bench, builtin_model):
    doc = _doc(bench, "verl-2gpu")
    base = measured.compare("base", doc)
    changed = copy.deepcopy(doc)
    changed["settings"]["command"] += [
        "actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes=64",
        "actor_rollout_ref.actor.fsdp_config.optimizer_offload=True", "actor_rollout_ref.actor.strategy=fsdp2"]
    c = measured.compare("changed", changed)
    assert c.sync.parts["bucket"] == 64 << 20 and c.sync.parts["adamw_moments"] == 0
    assert c.sync.parts["state_dict_copies"] == 0 < base.sync.parts["state_dict_copies"]  # FSDP2: no copies
    assert c.sync.peak < base.sync.peak


@pytest.mark.parametrize(("change", "reason"), [
    (lambda d: d["settings"].update(backend="megatron"), "Megatron's states only"),
    (lambda d: d["settings"].update(gpus=0), "a CPU run"),
    (lambda d: d["settings"].update(model="built-in 7b"), "unknown size"),
    (lambda d: d["settings"].update(model="/nowhere/model"), "not in rocmkit's model table"),
    (lambda d: d["settings"]["command"].append("actor_rollout_ref.actor.use_dynamic_bsz=maybe"), "not True or False"),
    (lambda d: d["settings"].update(command=[]), "no actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu"),
    (lambda d: [s.pop(measured.MEASURED) for s in d["metrics"]["per_step"]], f"no {measured.MEASURED}"),
])
def test_not_comparable_says_why(bench, builtin_model, change, reason):
    doc = copy.deepcopy(_doc(bench, "verl-1gpu"))
    change(doc)
    with pytest.raises(measured.NotComparable, match=reason):
        measured.compare("x", doc)


def test_the_plan_counts_the_weight_sync():
    """A small model on many GPUs: its sharded states are small, verl's 2 GiB bucket is not."""
    job = plan.Job(models.lookup("Qwen2-0.5B-Instruct"), "test GPU", 192 * GIB, gpus_per_node=8)
    mem = plan.make(job).memory
    assert mem["weight_sync_breakdown_gib"]["bucket"] == 2.0
    assert mem["weight_sync_peak_gib"] > 2.0
