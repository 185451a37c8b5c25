"""What a verl certification decides before and around its run, without running it: the actor's attention
(--attn), the start-up cuts (--rollout-graphs, --engine-defaults), the allocator settings against vLLM's sleep-mode pool,
and what vLLM's log lines say about graphs and sleep. The real dry runs in the verl-cpu venv are in
tests/test_certify_runs.py; the H100 documents are judged in tests/test_certify_h100.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rocmkit.certify.engines.verl import attention
from rocmkit.certify.engines.verl import sleep_pool
from rocmkit.certify.engines.verl import report as verl_report
from rocmkit.certify.settings import Backend, Settings
from rocmkit.certify.validate import validate as check
from rocmkit.certify.engines.verl import smoke_cuts
from rocmkit.certify.engines.verl.overrides import VerlRun, environment, overrides, run_overrides, startup_cuts
from rocmkit.errors import UsageError

NO_FA = {"flash_attn": None, "error": "ModuleNotFoundError: No module named 'flash_attn'", "transformers_fa2": None,
         "usable": False}
FA = {"flash_attn": "2.8.3", "error": None, "transformers_fa2": True, "usable": True}


# ---- --attn ----

@pytest.mark.parametrize(("asked", "on_cpu", "found", "chosen", "why"), [
    ("auto", False, FA, "flash_attention_2", "auto: flash_attn 2.8.3 imports"),
    ("auto", False, NO_FA, "sdpa", "No module named 'flash_attn'"),
    ("auto", True, FA, "sdpa", "auto: the CPU runs SDPA"),
    ("auto", False, None, "sdpa", "did not report flash_attn"),  # a target whose rocmkit predates --attn
    ("sdpa", False, FA, "sdpa", "asked"),
    ("flash_attention_2", False, NO_FA, "flash_attention_2", "asked"),
])
def test_auto_takes_flash_attention_where_it_runs(asked, on_cpu, found, chosen, why):
    c = attention.choose(asked, on_cpu, found)
    assert c["asked"] == asked and c["chosen"] == chosen and why in c["why"]


def test_only_a_named_implementation_the_target_cannot_run_is_refused():
    asked = attention.choose("flash_attention_2", False, NO_FA)
    message, hint = attention.refusal(asked, NO_FA)
    assert "--attn flash_attention_2" in message and "No module named 'flash_attn'" in message
    assert "--attn auto" in hint
    assert attention.refusal(attention.choose("flash_attention_2", False, FA), FA) is None
    assert attention.refusal(attention.choose("auto", False, NO_FA), NO_FA) is None  # auto falls back instead
    # what the host reads from the setup's report
    assert verl_report.refusal({"attention": {**asked, "found": NO_FA}})[0] == message
    assert verl_report.refusal({}) is None


def test_the_probe_on_this_machine_finds_no_usable_flash_attention():
    found = attention.probe(gpus=0)  # no GPU here: even an installed flash_attn could not run
    assert found["usable"] is False and found["error"]


def test_without_flash_attn_the_probe_leaves_transformers_unimported():
    """Its import is most of the probe's time on a GPU host, and without flash_attn its answer changes nothing."""
    code = ("import importlib.util, json, sys; from rocmkit.certify.engines.verl import attention; found = attention.probe(gpus=1); "
            "print(json.dumps([importlib.util.find_spec('flash_attn') is None, found, 'transformers' in sys.modules]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True,
                          cwd=Path(__file__).resolve().parents[1])
    absent, found, imported = json.loads(done.stdout)
    assert absent, "this test needs a Python without flash_attn"
    assert found == {**NO_FA, "error": found["error"]} and "flash_attn" in found["error"]
    assert imported is False


def test_the_chosen_attention_reaches_the_run_command():
    base = overrides(VerlRun(model_dir="/m", train_file="/t", val_file="/v", reward_file="/r", gpus=1))
    assert not any("attn_implementation" in o for o in base)
    cfg = {"verl_overrides": base, "attention": {"asked": "auto"}, "gpus": 1}
    fa = run_overrides(cfg, {"attention": attention.choose("auto", False, FA)})
    assert fa[-1] == "+actor_rollout_ref.model.override_config.attn_implementation=flash_attention_2"
    assert "actor_rollout_ref.model.use_remove_padding=False" not in fa  # verl's packed path needs flash-attn
    sdpa = run_overrides(cfg, {})  # no report from an older rocmkit in the target: SDPA, which runs
    assert sdpa[-2:] == ["+actor_rollout_ref.model.override_config.attn_implementation=sdpa",
                         "actor_rollout_ref.model.use_remove_padding=False"]
    assert run_overrides({**cfg, "attention": None}, {"attention": FA}) == base  # Megatron


@pytest.mark.parametrize(("kw", "says"), [
    ({"attn": "eager"}, "--attn 'eager'"),
    ({"engine": "trl", "attn": "sdpa"}, "verl's FSDP actor"),
    ({"backend": Backend.MEGATRON, "attn": "sdpa"}, "verl's FSDP actor"),
    ({"rollout_graphs": True, "gpus": 0}, "needs --engine verl and GPUs"),
    ({"rollout_graphs": True, "engine": "trl"}, "needs --engine verl and GPUs"),
    ({"engine_defaults": True, "engine": "trl"}, "it needs --engine verl"),
])
def test_attention_and_graph_options_refused_where_they_mean_nothing(kw, says):
    with pytest.raises(UsageError) as err:
        check(Settings(**{"engine": "verl", "gpus": 1, **kw}))
    assert says in err.value.message


# ---- start-up: what a smoke run changes to start faster, each named, all undone by --engine-defaults ----

RUN = dict(model_dir="/m", train_file="/t", val_file="/v", reward_file="/r", gpus=1)
EAGER = "actor_rollout_ref.rollout.enforce_eager=True"
UNI = "+actor_rollout_ref.rollout.engine_kwargs.vllm.distributed_executor_backend=uni"
ONE_UNIT = "transfer_queue.backend.SimpleStorage.num_data_storage_units=1"
NO_COMPILE = {"actor_rollout_ref.actor.fsdp_config.use_torch_compile=False",
              "actor_rollout_ref.ref.fsdp_config.use_torch_compile=False"}


def keys(ovs: list[str]) -> list[str]:
    return [o.lstrip("+").split("=")[0] for o in ovs]


def test_each_cut_is_an_override_that_engine_defaults_takes_back():
    smoke, production = overrides(VerlRun(**RUN)), overrides(VerlRun(**RUN, engine_defaults=True))
    assert {EAGER, UNI, ONE_UNIT} | NO_COMPILE <= set(smoke)
    cuts = startup_cuts(VerlRun(**RUN))
    assert set(smoke) - set(production) == {o for c in cuts for o in c.overrides}  # nothing else differs
    assert set(production) <= set(smoke) and not startup_cuts(VerlRun(**RUN, engine_defaults=True))
    assert all(c.restore[-1] == "--engine-defaults" for c in cuts)
    assert [c.restore for c in cuts if EAGER in c.overrides] == [("--rollout-graphs", "--engine-defaults")]
    graphs = overrides(VerlRun(**RUN, rollout_graphs=True))
    assert "enforce_eager" not in " ".join(graphs) and UNI in graphs  # verl's default: compiled, graphs captured


@pytest.mark.parametrize(("shape", "absent"), [
    ({"tensor_parallel": 2, "gpus": 2}, UNI),  # a replica over two GPUs needs vLLM's multiprocessing executor
    ({"rollout": "sglang"}, UNI),
    ({"backend": "megatron"}, "fsdp_config"),  # Megatron's engine has no such switch
])
def test_cuts_apply_only_where_they_mean_something(shape, absent):
    assert absent not in " ".join(overrides(VerlRun(**{**RUN, **shape})))


@pytest.mark.parametrize("engine_defaults", [False, True])
def test_the_cpu_run_keeps_what_it_needs_and_gives_no_key_twice(engine_defaults):
    cpu = overrides(VerlRun(**{**RUN, "gpus": 0}, engine_defaults=engine_defaults))
    assert len(keys(cpu)) == len(set(keys(cpu))), "Hydra refuses a key given twice"
    assert EAGER in cpu and ONE_UNIT in cpu  # requirements of the CPU build, not smoke cuts
    assert (UNI in cpu) is not engine_defaults
    # vLLM's CPU platform turns `uni` back into `mp` unless this is 0 (vllm/platforms/cpu.py)
    env = environment(VerlRun(**{**RUN, "gpus": 0}, engine_defaults=engine_defaults), "/m.jsonl")
    assert (env.get("VLLM_ENABLE_V1_MULTIPROCESSING") == "0") is not engine_defaults
    assert "VLLM_ENABLE_V1_MULTIPROCESSING" not in environment(VerlRun(**RUN), "/m.jsonl")  # GPUs keep uni as asked


def test_the_certificate_names_each_cut_and_the_option_that_restores_it():
    from rocmkit.certify.engines.verl.engine import Verl

    fields = Verl().settings_fields(Settings(engine="verl", gpus=1))
    assert [c["name"] for c in fields["smoke_cuts"]] == [c.name for c in startup_cuts(VerlRun(**RUN))]
    md = "\n".join(smoke_cuts.markdown(fields["smoke_cuts"]))
    assert "## Settings changed for a fast smoke test" in md
    for cut in fields["smoke_cuts"]:
        line = next(x for x in md.splitlines() if x.startswith(f"- {cut['name']}:"))
        assert all(f"`{o}`" in line for o in cut["overrides"]) and "`--engine-defaults`" in line
    assert "`--rollout-graphs` or `--engine-defaults`" in md
    production = Verl().settings_fields(Settings(engine="verl", gpus=1, engine_defaults=True))
    assert production["smoke_cuts"] == [] and smoke_cuts.markdown(production["smoke_cuts"]) == []
    assert smoke_cuts.markdown(None) == []  # a certificate from before the cuts were recorded


# ---- the sleep-mode pool ----

VLLM_0_24 = '''
        conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
        expandable_was_enabled = "expandable_segments:True" in conf
        if expandable_was_enabled:
            torch.cuda.memory._set_allocator_settings("expandable_segments:False")
'''
VLLM_OLD = '''
        conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
        assert "expandable_segments:True" not in conf, ("Expandable segments are not compatible with memory pool.")
'''
GOOD_POOL = {"allocated_mib": 64, "in_pool_mib": 64, "returned_mib": 64}


def test_rocmkit_puts_expandable_segments_where_vllm_reads_them():
    gpu = environment(VerlRun(model_dir="/m", train_file="/t", val_file="/v", reward_file="/r", gpus=1), "/m.jsonl")
    assert gpu["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True" and "PYTORCH_ALLOC_CONF" not in gpu
    assert sleep_pool.vllm_policy(VLLM_0_24) == {"reads": ["PYTORCH_CUDA_ALLOC_CONF"], "live": False,
                                                 "policy": "toggles"}
    # SGLang's torch_memory_saver refuses expandable segments; the CPU has no sleep mode
    assert sleep_pool.environment("sglang", on_cpu=False) == {} and sleep_pool.environment("vllm", on_cpu=True) == {}


def doc(variables: dict, torch: str, source: str = VLLM_0_24, pool: dict | None = GOOD_POOL) -> dict:
    return {"variables": {k: variables.get(k) for k in sleep_pool.VARIABLES}, "torch_settings": torch,
            "vllm": sleep_pool.vllm_policy(source), "pool": pool}


def test_the_pool_judged_on_what_pytorch_uses_and_what_vllm_sees():
    ours = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    ok, detail, _ = sleep_pool.judge(doc(ours, "expandable_segments:True"))
    assert ok and "64 MiB through vLLM's pool, 64 MiB returned" in detail and "does not look" not in detail
    # a user's PYTORCH_ALLOC_CONF: on where vLLM does not look; the pool still took it (PyTorch kept it off)
    theirs = {"PYTORCH_ALLOC_CONF": "expandable_segments:True"}
    ok, detail, _ = sleep_pool.judge(doc(theirs, "expandable_segments:True"))
    assert ok and "where vLLM does not look" in detail
    # ... and on a PyTorch that does not: the allocation bypassed the pool and would survive sleep
    ok, detail, hint = sleep_pool.judge(doc(theirs, "expandable_segments:True",
                                            pool={"allocated_mib": 64, "in_pool_mib": 0, "returned_mib": 0}))
    assert not ok and "0 MiB went through it" in detail and "unset PYTORCH_ALLOC_CONF" in hint
    # unmeasured, the same environment is a failure: nothing keeps the pool off expandable segments for sure
    assert not sleep_pool.judge(doc(theirs, "expandable_segments:True", pool=None))[0]
    assert sleep_pool.judge(doc(ours, "expandable_segments:True", pool=None))[0]


def test_an_old_vllm_that_refuses_expandable_segments_and_a_pool_that_keeps_its_pages():
    ours = {"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"}
    ok, detail, hint = sleep_pool.judge(doc(ours, "expandable_segments:True", source=VLLM_OLD))
    assert not ok and "refuses expandable segments" in detail and "vllm-project/vllm#40812" in hint
    ok, detail, hint = sleep_pool.judge(doc(ours, "", pool={"allocated_mib": 64, "in_pool_mib": 64,
                                                             "returned_mib": 2}))
    assert not ok and "sleep returned 2 of 64 MiB" in detail and "probe.vram_release" in hint
    ok, detail, _ = sleep_pool.judge(doc({}, "", pool={"error": "RuntimeError: CUDA error: invalid argument"}))
    assert not ok and "invalid argument" in detail
    c = verl_report.sleep_pool_check({"sleep_pool": doc({}, "", pool={"error": "RuntimeError: boom"})})
    assert c["name"] == "vLLM sleep-mode pool" and not c["passed"] and c["required"] and "hint:" in c["detail"]
    assert verl_report.sleep_pool_check({}) is None


# ---- what vLLM's log says ----

LOG = """\
(vLLMHttpServer pid=51) INFO 11-24 10:01:02 [monitor.py:48] torch.compile took 13.21 s in total
(vLLMHttpServer pid=51) INFO 11-24 10:01:04 [gpu_model_runner.py:6657] Graph capturing finished in 2 secs, took 0.31 GiB
(vLLMHttpServer pid=51) INFO 11-24 10:01:05 [core.py:345] init engine (profile, create kv cache, warmup model) took 25.03 s (compilation: 13.21 s)
(WorkerDict pid=77) INFO 11-24 10:02:00 [gpu_worker.py:182] Sleep mode freed 31.21 GiB memory, 2.1 GiB memory is still in use.
(WorkerDict pid=77) INFO 11-24 10:02:09 [gpu_worker.py:182] Sleep mode freed 31.2 GiB memory, 2.1 GiB memory is still in use.
"""


def test_graphs_compile_and_sleep_read_from_vllms_lines():
    seen = verl_report.from_log(LOG)
    assert seen["graphs_captured"] and seen["graph_capture_s"] == 2.0 and seen["compile_s"] == 13.21
    assert seen["engine_init_s"] == 25.03 and seen["sleeps"] == 2
    assert seen["sleep_freed_gib"] == [31.2, 31.21] and seen["sleep_still_in_use_gib"] == [2.1, 2.1]
    eager = verl_report.record({}, "init engine (profile, create kv cache, warmup model) took 4.10 s\n", False)
    assert eager["rollout_graphs"] == {"asked": False, "exercised": False, "capture_s": None, "compile_s": None}
    assert eager["engine_init_s"] == 4.1 and eager["sleep_mode"] is None
