"""verl's own example scripts certified as jobs on one H200 (benchmarks/gpu_jobs/: verl v0.9.0's scripts, verl 0.9.1,
vLLM 0.24.0, torch 2.11.0+cu130; random weights in the published models' shapes), kept and judged again:

- verl-h200-job-qwen3-4b.json: examples/grpo_trainer/run_qwen3_4b_fsdp.sh, `STEPS=2 go.sh qwen3-4b`: PASS, 2 steps
- verl-h200-job-qwen3-4b-3-steps-timeout.json: the same job at the default 3 steps, `TIMEOUT=500`: stopped in step 3
- verl-h200-job-qwen2.5-7b.json: examples/rollout_correction/run_qwen2_5_7b_fsdp.sh (RLOO), `STEPS=2 go.sh
  qwen2.5-7b`: PASS, 2 steps, 121.67 GiB of the GPU's 139.8 at the actor's peak
- tests/data/crash/verl-h200-job-qwen3-8b-lora-weight-sync.*: examples/tuning/lora/run_qwen3_8b_fsdp.sh on one GPU:
  died at the first weight sync (verl's LoRA summon on one FSDP1 GPU; replayed in tests/test_certify_crash.py, and
  refused before the run by verl-check's rule, tests/test_verl_rollout_rules.py)
- tests/data/crash/verl-h200-job-qwen3-8b-vllm-start.*: examples/grpo_trainer/run_qwen3_8b_fsdp.sh, no offload:
  vLLM could not start beside the job's own workers (replayed in tests/test_certify_crash.py)
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rocmkit.certify.certificate import markdown
from rocmkit.certify.judge import RunStatus, judge
from rocmkit.tune import measured

DATA = Path(__file__).parent / "data" / "certify"


def cert(name: str) -> dict:
    return json.loads((DATA / f"verl-h200-{name}.json").read_text())


def test_verls_qwen3_4b_example_certifies_as_a_job_with_its_memory_beside_tunes_model():
    c = cert("job-qwen3-4b")
    job = c["settings"]["job"]
    assert c["verdict"] == "pass" and c["device"] == "NVIDIA H200"
    assert job["script"].endswith("examples/grpo_trainer/run_qwen3_4b_fsdp.sh") and job["budget"]["steps"] == 2
    assert job["model_config"]["architectures"] == ["Qwen3ForCausalLM"]
    assert job["model_config"]["num_hidden_layers"] == 36
    assert any("random, in the shape of rocmkit's model table (Qwen/Qwen3-4B)" in s for s in job["stand_ins"])
    steps = {r["step"]: {k: v for k, v in r.items() if k != "step"} for r in c["metrics"]["per_step"]}
    v = judge(steps, 2, RunStatus(c["run"]["status"]), require_learning=False)
    assert v.passed, v.checks
    # the peak verl measured, tune's model for the same plan, and the GPU's capacity: 74.99 vs 74.92 GiB of 139.8
    side = c["metrics"]["actor_memory"]
    assert 0.95 < side["ratio"] < 1.05 and side["capacity_gib"] == 139.8 and side["headroom_gib"] > 60
    assert measured.side_by_side(c) == side  # today's tune models the kept run the same
    md = markdown(c)
    assert ("- actor memory per GPU (verl's peak by step 2): 74.99 GiB; rocmkit tune's model: 74.92 GiB (1.00x); "
            "GPU 139.8 GiB, 64.81 GiB above the actor's peak") in md
    assert "- ended by: all 2 steps" in md and "| reward rose | no (reported) |" in md  # learning reported, not needed


def test_the_same_job_at_three_steps_was_stopped_at_its_deadline_naming_the_step_and_phase():
    """The default budget (3 steps) on a host with cold caches: 275 s of start-up and a 147 s first step; the
    deadline stopped it in step 3's update, and the certificate says where, with the memory figures it had."""
    c = cert("job-qwen3-4b-3-steps-timeout")
    assert c["verdict"] == "not certified: timeout" and c["settings"]["job"]["budget"]["steps"] == 3
    assert c["cause"]["summary"] == ("the certification ran past --timeout 500 s in step 3: log-probs and update "
                                     "and was stopped")
    assert c["metrics"]["actor_memory"] == cert("job-qwen3-4b")["metrics"]["actor_memory"]
    assert markdown(c).startswith("# rocmkit certificate: NOT CERTIFIED: TIMEOUT")


@pytest.mark.parametrize("name", ["job-qwen3-4b", "job-qwen3-4b-3-steps-timeout"])
def test_the_scripts_own_knobs_shaped_the_job_and_certifys_budget_replaced_its_saves(name):
    """go.sh's --env NGPUS_PER_NODE=1 ROLLOUT_GPU_MEM_UTIL=0.4 TRAIN_BATCH_SIZE=32 reached main_ppo through the
    script's own ${X:-default}s; the script's saves every 20 steps and wandb logger gave way to the smoke budget."""
    job = cert(name)["settings"]["job"]
    for knob in ("trainer.n_gpus_per_node=1", "actor_rollout_ref.rollout.gpu_memory_utilization=0.4",
                 "data.train_batch_size=32", "actor_rollout_ref.rollout.max_model_len=512"):
        assert knob in job["overrides"], knob
    assert "trainer.save_freq=20" in job["overrides"]
    assert job["budget"]["checkpoints"].startswith("none (trainer.save_freq=-1")
    assert job["budget"]["validation"] == "off" and job["budget"]["loggers"] == "console and file"


def test_verls_qwen2_5_7b_rloo_example_certifies_as_a_job_with_its_peak_beside_tunes_model():
    """The 7B on one GPU needs verl's optimizer offload and AdamW without foreach (go.sh's --arg, after the script's
    own arguments, as a user would add them): its peak leaves 18 GiB of the H200. The run's certificate said tune's
    model did not compare (it counted foreach AdamW only); today's model counts AdamW one tensor at a time."""
    c = cert("job-qwen2.5-7b")
    job = c["settings"]["job"]
    assert c["verdict"] == "pass" and job["script"].endswith("examples/rollout_correction/run_qwen2_5_7b_fsdp.sh")
    shape = job["model_config"]
    assert shape["architectures"] == ["Qwen2ForCausalLM"] and shape["num_hidden_layers"] == 28
    assert "algorithm.adv_estimator=rloo" in job["overrides"] and "trainer.n_gpus_per_node=1" in job["overrides"]
    steps = {r["step"]: {k: v for k, v in r.items() if k != "step"} for r in c["metrics"]["per_step"]}
    assert judge(steps, 2, RunStatus(c["run"]["status"]), require_learning=False).passed
    kept = c["metrics"]["actor_memory"]
    assert kept["measured_gib"] == 121.67 and kept["headroom_gib"] == 18.13
    assert kept["not_compared"].startswith("AdamW without foreach")  # what the run's rocmkit said
    side = measured.side_by_side(c)
    assert side["predicted_gib"] == 121.6 and side["ratio"] == 0.999
    c["metrics"]["actor_memory"] = side
    assert ("- actor memory per GPU (verl's peak by step 2): 121.67 GiB; rocmkit tune's model: 121.6 GiB (1.00x); "
            "GPU 139.8 GiB, 18.13 GiB above the actor's peak") in markdown(c)
