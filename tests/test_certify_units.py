"""Certification pieces that need no training run: metrics readers on verl's output formats, the judge
on recorded metrics, the built-in task and verl overrides."""

from __future__ import annotations

import json
import math

import pytest

from rocmkit.certify import judge, metrics, task
from rocmkit.certify.engines.verl import overrides as verl_overrides
from rocmkit.certify.certificate import summarize

# Console lines as verl 0.9 prints them through Ray (pprint of numpy scalars: np.float64(...)).
CONSOLE = """\
(TaskRunnerV1 pid=4242) step:1 - timing_s/gen:np.float64(1.234) - critic/score/mean:np.float32(0.25) - actor/pg_loss:-0.0123 - response_length/mean:12.0 - training/global_step:1
(TaskRunnerV1 pid=4242) step:2 - timing_s/gen:np.float64(1.1) - critic/score/mean:np.float32(0.5) - actor/pg_loss:np.float64(nan) - actor/kl_loss:1e-05
Training Progress:  50%|█████     | 1/2
step:3 - critic/score/mean:0.75 - actor/pg_loss:0.01 - perf/throughput:np.float64(1530.5)
"""


def test_console_reader_handles_ray_prefix_and_numpy_reprs():
    steps = metrics.read_console(CONSOLE)
    assert sorted(steps) == [1, 2, 3]
    assert steps[1]["timing_s/gen"] == 1.234 and steps[1]["critic/score/mean"] == 0.25
    assert math.isnan(steps[2]["actor/pg_loss"]) and steps[2]["actor/kl_loss"] == 1e-05
    assert steps[3]["perf/throughput"] == 1530.5


def test_jsonl_reader_skips_junk(tmp_path):
    p = tmp_path / "m.jsonl"
    p.write_text('{"step": 1, "data": {"reward": 0.1, "note": "text", "x": "np.float64(2.5)"}}\nnot json\n'
                 '{"step": 2, "data": {"reward": 0.4}}\n{"step": "3", "data": {}}\n')
    steps = metrics.read_jsonl(p)
    assert steps == {1: {"reward": 0.1, "x": 2.5}, 2: {"reward": 0.4}}


def test_readers_on_output_written_by_verls_own_loggers(tmp_path, monkeypatch):
    verl = pytest.importorskip("verl.utils.tracking", reason="verl not installed")
    import numpy as np
    from verl.utils.logger.aggregate_logger import concat_dict_to_str

    data = {"critic/score/mean": np.float64(0.5), "timing_s/gen": np.float32(1.5), "actor/pg_loss": 0.25}
    steps = metrics.read_console("(TaskRunnerV1 pid=1) " + concat_dict_to_str(data, step=7))
    assert steps[7]["critic/score/mean"] == 0.5 and steps[7]["timing_s/gen"] == 1.5
    monkeypatch.setenv("VERL_FILE_LOGGER_PATH", str(tmp_path / "f.jsonl"))
    logger = verl.FileLogger(project_name="p", experiment_name="e")
    logger.log(data=data, step=7)
    logger.finish()
    assert metrics.read_jsonl(tmp_path / "f.jsonl")[7]["critic/score/mean"] == 0.5


def rising(n=16, start=0.05, end=1.0, loss=0.1):
    return {i + 1: {"reward": start + (end - start) * i / (n - 1), "loss": loss, "timing_s/gen": 1.0,
                    "timing_s/update_actor": 0.5, "perf/completion_tokens": 100, "perf/total_num_tokens": 300}
            for i in range(n)}


def test_judge_passes_a_learning_run():
    v = judge.judge(rising(), 16, "finished", require_learning=True)
    assert v.passed and all(c["passed"] for c in v.checks)


def test_judge_fails_no_learning_nan_short_and_crashed_runs():
    flat = judge.judge(rising(end=0.05), 16, "finished", require_learning=True)
    assert not flat.passed and [c["name"] for c in flat.checks if not c["passed"]] == ["reward rose"]
    nan = rising()
    nan[5]["loss"] = float("nan")
    assert not judge.judge(nan, 16, "finished", require_learning=True).passed
    short = {k: v for k, v in rising().items() if k <= 10}
    assert not judge.judge(short, 16, "finished", require_learning=True).passed
    assert not judge.judge(rising(), 16, "crashed", require_learning=True).passed
    # with a user's model, learning is reported, not required
    assert judge.judge(rising(end=0.05), 16, "finished", require_learning=False).passed


def test_summary_throughput_and_phases():
    s = summarize(rising(), {"device": "NVIDIA H100 80GB HBM3", "precision": "bf16", "parameters": 1_000_000})
    assert s["rollout_tokens_per_s"] == 100.0 and s["training_tokens_per_s"] == 600.0
    assert s["phases_s"]["generation"] == 16.0
    assert s["mfu"]["peak_tflops"] == 989.4 and 0 < s["mfu"]["update"] < 1
    assert summarize(rising(), {"device": "cpu", "precision": "fp32", "parameters": 10})["mfu"] is None


def test_task_reward_and_rows():
    assert task.compute_score("rocmkit/digits", "42", "42") == 2.0
    assert task.compute_score("rocmkit/digits", "a1", "5") == 0.5
    assert task.compute_score("rocmkit/digits", "   ", "5") == 0.0
    row = task.rows(1, "train", 0)[0]
    assert row["prompt"][0]["role"] == "user" and row["reward_model"]["ground_truth"].isdigit()
    json.dumps(row)


def test_verl_overrides_fill_the_smoke_shape():
    ov = verl_overrides.overrides(verl_overrides.VerlRun(model_dir="/m", train_file="/t", val_file="/v",
                                                         reward_file="/r.py", gpus=2, steps=5))
    assert "trainer.n_gpus_per_node=2" in ov and "trainer.total_training_steps=5" in ov
    assert "actor_rollout_ref.actor.use_kl_loss=True" in ov and "trainer.val_before_train=False" in ov
    assert "actor_rollout_ref.rollout.tensor_model_parallel_size=1" in ov
    assert "trainer.logger=['console','file']" in ov
