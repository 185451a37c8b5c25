"""`rocmkit tune`: the model table, the memory model against recorded GPU measurements, the decisions the
issue names (seed 000's case, large models, small ones), verl's divisibility rules and monotonicity as
properties, verl 0.9.1's own config accepting the overrides, and clear errors for bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from provisioned import provisioned

from rocmkit.errors import UsageError
from rocmkit.tune import memory, models, plan
from rocmkit.tune.memory import GIB

DATA = Path(__file__).parent / "data" / "tune"
TP = "actor_rollout_ref.rollout.tensor_model_parallel_size"


def job(model: str, gpu_gib: float, **kw) -> plan.Job:
    return plan.Job(models.lookup(model), "test GPU", int(gpu_gib * GIB), **kw)


def tune(*args: str, python: str = sys.executable) -> subprocess.CompletedProcess:
    return subprocess.run([python, "-m", "rocmkit", "tune", *args], capture_output=True, text=True, timeout=300)


def test_table_parameter_counts_match_the_published_ones():
    for name, entry in models.table().items():
        spec = models.from_config(entry, name, entry["source"])
        assert abs(spec.params / 1e9 / entry["params_b"] - 1) < 0.02, name
    moe = models.lookup("Qwen3-30B-A3B")
    assert moe.experts == 128 and 3.0e9 < moe.active_params < 3.6e9


def test_memory_model_within_20_percent_of_real_steps():
    """Peaks of real training steps (benchmarks/tune_memory.py on an H100; random-initialised Qwen2 0.5B
    and 1.5B, fp32 weights, bf16 autocast, AdamW, fp32 log-softmax and entropy), predicted again now."""
    doc = json.loads((DATA / "h100_steps.json").read_text())
    assert len(doc["rows"]) >= 8
    for row in doc["rows"]:
        spec = models.lookup(row["model"])
        est = memory.actor_step(spec, tokens=row["batch"] * row["seq"],
                                grad_ckpt=row["grad_ckpt"], plain=True)
        assert abs(est.peak / row["measured_bytes"] - 1) <= 0.20, row
    # checkpointing must be predicted to save what it saved
    on = [r for r in doc["rows"] if r["grad_ckpt"]]
    assert all(r["measured_bytes"] < next(o["measured_bytes"] for o in doc["rows"] if not o["grad_ckpt"]
                                          and (o["model"], o["batch"], o["seq"]) == (r["model"], r["batch"], r["seq"]))
               for r in on)


@pytest.mark.parametrize("backend", ["fsdp", "megatron"])
def test_seed_000_case(backend):
    p = plan.make(job("Qwen2-7B-Instruct", 192, prompt_len=1024, response_len=1024, n=5, train_batch=1024,
                      backend=backend))
    assert p.value(TP) == 1 and "TP=1" in next(s.reason for s in p.settings if s.key == TP)
    if backend == "megatron":
        assert p.value("actor_rollout_ref.actor.megatron.tensor_model_parallel_size") == 1
        assert p.value("actor_rollout_ref.actor.megatron.pipeline_model_parallel_size") == 1
        assert p.overrides()[0] == "model_engine=megatron"
    else:
        assert p.value("actor_rollout_ref.model.use_remove_padding") is True
        assert p.value("actor_rollout_ref.actor.ppo_max_token_len_per_gpu") >= 2 * 2048
    assert all(s.reason and s.source for s in p.settings)


@pytest.mark.parametrize(("model", "gpu", "at_least"), [
    ("Qwen2-72B-Instruct", "MI300X", 2), ("Qwen2.5-32B-Instruct", "H100", 2),
    ("Qwen2-7B-Instruct", "MI355X", 1), ("Qwen2-7B-Instruct", "H100", 1)])
def test_rollout_tp_for_large_and_small_models(model, gpu, at_least):
    out = tune("--model", model, "--gpu", gpu, "--json")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout)
    tp = next(s for s in doc["settings"] if s["key"] == TP)
    assert (tp["value"] >= 2) if at_least == 2 else (tp["value"] == 1), tp
    assert "fit" in tp["reason"] and doc["schema"] == "rocmkit.tune/v1"


def test_single_step_question_and_its_breakdown():
    out = tune("--model", "Qwen2-0.5B-Instruct", "--gpu", "H100", "--gpus-per-node", "1", "--train-batch", "8",
               "--n", "2", "--micro-batch", "4", "--seq-len", "1024", "--grad-ckpt", "--json")
    doc = json.loads(out.stdout)
    mem = doc["memory"]
    expected = memory.actor_step(models.lookup("Qwen2-0.5B-Instruct"), tokens=4096, grad_ckpt=True, plain=True)
    assert mem["actor_step_peak_gib"] == round(expected.peak / GIB, 2)
    assert mem["actor_step"]["kind"] == "plain single-GPU step" and "logits" in mem["actor_step_breakdown_gib"]


names = sorted(models.table())


@settings(max_examples=150, deadline=None)
@given(model=st.sampled_from(names), gib=st.sampled_from([64, 80, 141, 192, 256, 288]),
       per_node=st.sampled_from([1, 2, 4, 8]), nodes=st.integers(1, 4), n=st.integers(1, 16),
       batch=st.integers(1, 2048), backend=st.sampled_from(["fsdp", "megatron"]))
def test_every_plan_satisfies_verls_divisibility_rules(model, gib, per_node, nodes, n, batch, backend):
    j = job(model, gib, gpus_per_node=per_node, nodes=nodes, n=n, train_batch=batch, backend=backend)
    try:
        p = plan.make(j)
    except UsageError as exc:
        assert exc.hint  # an impossible job says what would work
        return
    gpus = per_node * nodes
    assert (batch * n) % gpus == 0
    tp = p.value(TP)
    assert gpus % tp == 0 and tp <= per_node
    if backend == "megatron":
        dp = gpus // (p.value("actor_rollout_ref.actor.megatron.tensor_model_parallel_size")
                      * p.value("actor_rollout_ref.actor.megatron.pipeline_model_parallel_size"))
        assert (batch * n) % (dp * p.value("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu")) == 0
    else:
        dp = gpus
    mini = p.value("actor_rollout_ref.actor.ppo_mini_batch_size")
    assert batch % mini == 0 and (mini * n) % dp == 0 and mini * n // dp >= 1
    assert 0 < p.value("actor_rollout_ref.rollout.gpu_memory_utilization") <= 0.85


@settings(max_examples=100, deadline=None)
@given(model=st.sampled_from(names), small=st.integers(24, 300), more=st.integers(1, 300))
def test_more_memory_never_gives_a_larger_tp(model, small, more):
    def tp(gib):
        try:
            return plan.make(job(model, gib)).value(TP)
        except UsageError:
            return 99  # does not fit at all: "larger" than any TP
    assert tp(small + more) <= tp(small)


@pytest.mark.parametrize(("mode", "gib"), [("SPX", 192.0), ("CPX", 24.0)])
def test_gpu_auto_reads_the_host_and_divides_partitions(tmp_path, mode, gib):
    from treegen import HostSpec, write_tree

    root = write_tree(tmp_path / "host", HostSpec(product="MI300X", mode=mode))
    out = tune("--model", "Qwen2-0.5B-Instruct", "--gpu", "auto", "--root", str(root), "--json")
    assert out.returncode == 0, out.stderr
    gpu = json.loads(out.stdout)["gpu"]
    assert gpu["memory_gib"] == gib and gpu["name"].startswith("MI300X")
    empty = tmp_path / "empty"
    empty.mkdir()
    out = tune("--model", "Qwen2-0.5B-Instruct", "--gpu", "auto", "--root", str(empty))
    assert out.returncode == 2 and "no GPU of rocmkit's arch table" in out.stderr


def test_a_config_json_directory(tmp_path):
    entry = dict(models.table()["Qwen/Qwen2-1.5B-Instruct"])
    (tmp_path / "config.json").write_text(json.dumps(entry))
    assert models.lookup(str(tmp_path)).params == models.lookup("Qwen2-1.5B-Instruct").params


@pytest.mark.parametrize(("args", "says"), [
    (["--model", "no-such-model", "--gpu", "MI300X"], "not in rocmkit's model table"),
    (["--model", "Qwen2-7B-Instruct", "--gpu", "MI999"], "--gpu MI999: not in rocmkit's arch table"),
    (["--model", "Qwen2-7B-Instruct", "--gpu", "MI300X", "--train-batch", "1023", "--n", "3"], "hint: --train-batch 1024"),
    (["--model", "Qwen3-235B-A22B", "--gpu", "H100", "--gpus-per-node", "4"], "more than the 56.0 GiB"),
    (["--model", "Qwen2-7B-Instruct"], "--model and --gpu are required"),
])
def test_bad_input_is_a_clear_error(args, says):
    out = tune(*args)
    assert out.returncode == 2 and says in out.stderr and "Traceback" not in out.stderr, out.stderr


def test_a_config_missing_a_field_is_named(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"hidden_size": 8, "model_type": "llama"}))
    out = tune("--model", str(tmp_path), "--gpu", "MI300X")
    assert out.returncode == 2 and "num_hidden_layers" in out.stderr and "config.json" in out.stderr


def test_the_host_memory_of_the_offloads_is_stated_and_checked(tmp_path):
    """72B on one node of 2 MI300X: the sharded states do not fit beside the step, so FSDP2 keeps the fp32 weights,
    gradients and AdamW's moments on the host, 16 bytes a parameter, about 1 TB on the node. Refused against a
    512 GiB host the user names; said loudly (and exit 0) against a 512 GiB host tune reads, which may not be the
    job's; fits a 2 TiB one. Each offload's reason names its phase."""
    args = ["--model", "Qwen2-72B-Instruct", "--gpu", "MI300X", "--gpus-per-node", "2"]
    need = 16 * models.lookup("Qwen2-72B-Instruct").params / GIB
    fits = tune(*args, "--host-memory-gib", "2048", "--json")
    assert fits.returncode == 0, fits.stderr
    doc = json.loads(fits.stdout)
    host = doc["host_memory"]
    assert host["need_gib"] == round(need, 1) and 1000 < host["need_gib"] < 1200 and host["fits"] is True
    assert host["when"] == "throughout" and set(host["breakdown_gib"]) == {"weights_fp32", "grads_fp32", "adamw_fp32"}
    reasons = {s["key"].rpartition(".")[2]: s["reason"] for s in doc["settings"] if "offload" in s["key"]}
    assert reasons["param_offload"].startswith("between phases: the actor's fp32 weights")
    assert reasons["optimizer_offload"].startswith("between phases: AdamW's moments")
    assert reasons["offload_policy"].startswith("during training:")

    refused = tune(*args, "--host-memory-gib", "512")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
    assert f"need {need:.1f} GiB of pinned host memory per node" in refused.stderr
    assert f"{512 * plan.HOST_USABLE:.1f} GiB usable of the 512.0 GiB" in refused.stderr
    assert "hint: more nodes" in refused.stderr

    (tmp_path / "proc").mkdir()
    (tmp_path / "proc" / "meminfo").write_text(f"MemTotal:       {512 * 1024 * 1024} kB\nMemFree:        1024 kB\n")
    # Said in full once, wherever it is read: with --json in the document (stdout stays one JSON document) and a
    # short warning on stderr; as text, the warning on stderr and the figures in the host line.
    loud = tune(*args, "--root", str(tmp_path), "--json")
    assert loud.returncode == 0 and "warning: the plan does not fit the host's memory" in loud.stderr, loud.stderr
    doc = json.loads(loud.stdout)
    assert doc["host_memory"]["fits"] is False and doc["host_memory"]["have_gib"] == 512.0
    assert doc["notes"][0].startswith("DOES NOT FIT THE HOST") and str(tmp_path) in doc["notes"][0]
    assert (loud.stdout + loud.stderr).count("DOES NOT FIT THE HOST") == 1
    text = tune(*args, "--root", str(tmp_path))
    assert "warning: DOES NOT FIT THE HOST" in text.stderr and (text.stdout + text.stderr).count("DOES NOT FIT") == 1
    # the host it measured may not be the job's: the option that gives the nodes' memory is named, both ways
    assert "--host-memory-gib N checks the plan against theirs" in text.stderr
    assert "--host-memory-gib N checks the plan against theirs" in loud.stderr
    assert "does not fit (the warning says by how much)" in text.stdout and f"{round(need, 1)} GiB" in text.stdout


def test_more_nodes_divide_the_host_memory_of_the_offloads():
    """FSDP shards the states over every GPU of the job: a node's share halves with twice the nodes."""
    one, two = (plan.make(job("Qwen2-7B-Instruct", 192, nodes=n)) for n in (1, 2))
    assert one.value("actor_rollout_ref.actor.fsdp_config.offload_policy") is False
    assert two.host["need_gib"] == pytest.approx(one.host["need_gib"] / 2, abs=0.1)
    assert one.host["need_gib"] == round(12 * models.lookup("Qwen2-7B-Instruct").params / GIB, 1)


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["fsdp", "megatron"])
def test_verl_accepts_the_overrides(backend):
    """The seed-000 plan composed and validated by verl 0.9.1's own config (the verl-cpu venv)."""
    python = provisioned("ROCMKIT_VERL_CPU_PYTHON", ".ci/provision/50-cpu-stacks.sh makes the verl-cpu venv", "VERL_CPU")
    out = tune("--model", "Qwen2-7B-Instruct", "--gpu", "MI300X", "--backend", backend, "--json", python=python)
    assert out.returncode == 0, out.stderr
    check = json.loads(out.stdout)["verl_check"]
    assert check["ok"] and check["verl"] == "0.9.1"


def test_megatron_takes_tp_within_the_node_before_pp():
    """Llama-3.1-70B on 8 x MI300X: the smallest TP whose states fit (8), PP=1, not TP 1 x PP 8 with a reason that
    said TP was not enough; pipeline stages only when the node's largest TP does not fit (Qwen2.5-32B on two nodes of
    4 x H100)."""
    p = plan.make(plan.Job(models.lookup("Llama-3.1-70B-Instruct"), "MI300X", 192 * GIB, backend="megatron"))
    meg = {s.key.rpartition(".")[2]: s for s in p.settings if ".megatron." in s.key}
    assert (meg["tensor_model_parallel_size"].value, meg["pipeline_model_parallel_size"].value) == (8, 1)
    assert "TP=4 would need" in meg["tensor_model_parallel_size"].reason
    assert "not enough" not in meg["pipeline_model_parallel_size"].reason
    staged = plan.make(plan.Job(models.lookup("Qwen2.5-32B-Instruct"), "H100", 80 * GIB, backend="megatron",
                                gpus_per_node=4, nodes=2, train_batch=256))
    tp, pp = (staged.value(f"actor_rollout_ref.actor.megatron.{k}_model_parallel_size") for k in ("tensor", "pipeline"))
    assert tp == 4 and pp > 1
    reason = next(s.reason for s in staged.settings if s.key.endswith("pipeline_model_parallel_size"))
    assert reason.startswith("the node's largest TP, 4, needs") and f"PP={pp}" in reason


@settings(max_examples=60, deadline=None)
@given(model=st.sampled_from(names), gib=st.sampled_from([64, 80, 192, 288]), per_node=st.sampled_from([2, 4, 8]),
       nodes=st.integers(1, 4))
def test_megatron_never_stages_a_pipeline_where_a_tp_within_the_node_fits(model, gib, per_node, nodes):
    j = job(model, gib, gpus_per_node=per_node, nodes=nodes, backend="megatron", train_batch=64 * per_node * nodes)
    try:
        p = plan.make(j)
    except UsageError:
        return
    tp, pp = (p.value(f"actor_rollout_ref.actor.megatron.{k}_model_parallel_size") for k in ("tensor", "pipeline"))
    m = j.model
    assert m.heads % tp == 0 and m.kv_heads % tp == 0 and tp <= per_node
    if pp > 1:  # every TP within the node at PP=1 was tried and did not fit
        limit = int(j.gpu_bytes * plan.HEADROOM)
        act = memory.saved_activations(m, tokens=j.seq, grad_ckpt=True)
        for t in (t for t in plan.TP_CHOICES if t <= per_node and m.heads % t == 0 and m.kv_heads % t == 0):
            if j.gpus % t == 0:
                assert memory.megatron_states(m, tp=t, pp=1, dp=j.gpus // t) + act // t > limit, (t, tp, pp)


def test_a_multi_die_module_is_planned_per_die():
    """MI250X: ROCm shows each of the module's two dies as a GPU with 64 GiB; the table says so, and tune, the MFU
    peak (certificate) and the probes read one die's figures from it."""
    from rocmkit import archs
    from rocmkit.certify.certificate import _peak_tflops
    from rocmkit.cli.tune import gpu_memory

    mi250x = archs.product_named("MI250X")
    assert mi250x.dies_per_module == 2 and mi250x.memory_gib == 64
    assert mi250x.peak_bf16_tflops * 2 == pytest.approx(383.0) and mi250x.hbm_tbps * 2 == pytest.approx(3.2)
    assert archs.product_named("MI300X").dies_per_module == 1  # eight XCDs, one GPU: memory is the whole 192 GiB
    assert gpu_memory("MI250X") == ("MI250X", 64 * GIB)
    assert _peak_tflops(mi250x.torch_name, "bf16") == pytest.approx(191.5)  # the MFU's denominator, per GPU
    p = plan.make(plan.Job(models.lookup("Qwen2.5-7B-Instruct"), "MI250X", 64 * GIB))
    assert p.value(TP) == 1 and p.value("actor_rollout_ref.rollout.gpu_memory_utilization") <= 0.7


def test_counts_and_the_study_are_said_where_they_apply():
    one = plan.make(plan.Job(models.lookup("Qwen2.5-0.5B-Instruct"), "H100 SXM", 80 * GIB, gpus_per_node=1,
                             train_batch=1, n=1))
    reasons = " ".join(s.reason for s in one.settings)
    assert "1 update a step" in reasons and "1 replica," in reasons and "= 1 response split" in reasons
    assert "1 updates" not in reasons and "1 replicas" not in reasons
    for gpu, studied in (("MI300X", True), ("MI325X", True), ("MI300X (CPX)", True), ("MI250X", False),
                         ("H100 SXM", False), ("MI355X", False)):
        p = plan.make(plan.Job(models.lookup("Qwen2.5-0.5B-Instruct"), gpu, 64 * GIB))
        tp = next(s for s in p.settings if s.key == TP)
        assert ("on MI300X" in tp.reason) is studied and ("AMD MI300X study" in tp.source) is studied, (gpu, tp)


def test_a_sequence_past_the_models_positions_is_refused_naming_its_limit():
    """Qwen2.5-7B-Instruct's config.json says 32768 positions: a 100000-token response has no plan (vLLM would
    refuse the max_model_len), and the hint gives the longest response that fits."""
    spec = models.lookup("Qwen/Qwen2.5-7B-Instruct")
    assert spec.max_positions == 32768
    with pytest.raises(UsageError) as exc:
        plan.make(plan.Job(spec, "MI300X", 192 * GIB, prompt_len=1024, response_len=100_000))
    assert "101024 tokens, past Qwen/Qwen2.5-7B-Instruct's 32768 positions" in exc.value.message
    assert "--response-len 31744" in exc.value.hint
    plan.make(plan.Job(spec, "MI300X", 192 * GIB, prompt_len=1024, response_len=31_744))  # right at the limit


@pytest.mark.parametrize(("asked", "first"), [("Qwen2.5-7B", "Qwen/Qwen2.5-7B-Instruct"),
                                              ("Llama-3-70B", "meta-llama/Llama-3.1-70B-Instruct")])
def test_a_model_name_the_table_lacks_suggests_the_nearest_names(asked, first):
    with pytest.raises(UsageError) as exc:
        models.lookup(asked)
    assert exc.value.hint.startswith(f"did you mean {first}")


def test_a_gpu_count_given_as_gpus_says_what_tune_calls_it():
    """certify's count is --gpus; tune's --gpu is the model: --gpus 8 here names --gpus-per-node."""
    r = subprocess.run([sys.executable, "-m", "rocmkit", "tune", "--model", "Qwen2.5-7B-Instruct", "--gpus", "8"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "the count is --gpus-per-node" in r.stderr and "--gpus-per-node 8" in r.stderr
