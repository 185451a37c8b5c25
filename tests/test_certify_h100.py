"""The verl certifications recorded on one H100 (nvidia-h100-x1: torch 2.11.0+cu130, verl 0.9.1, vLLM 0.24.0,
Ray 2.60, no flash-attn; carried by ../shared/tools/gpu-verl, run by benchmarks/certify_overhead.py), judged
again by rocmkit's own judge, and changed the way a fault changes them:

- verl-h100-tiny.json: `certify --host --engine verl --gpus 1 --steps 16` (the built-in tiny model)
- verl-h100-0.5b.json: the same with `--size 0.5b --steps 12`
- verl-h100-tiny-graphs.json (+ its run.log, gzipped): the tiny run with `--rollout-graphs`
- verl-h100-dry-run-fa2.txt: `certify --host --engine verl --gpus 1 --attn flash_attention_2 --dry-run` there
"""

from __future__ import annotations

import copy
import gzip
import json
from pathlib import Path

import pytest

from rocmkit.certify.engines.verl import sleep_pool
from rocmkit.certify.engines.verl import report as verl_report
from rocmkit.certify.certificate import markdown
from rocmkit.certify.judge import RunStatus, judge

DATA = Path(__file__).resolve().parent / "data" / "certify"
RUNS = {"tiny": 16, "0.5b": 12, "tiny-graphs": 16}


def cert(name: str) -> dict:
    return json.loads((DATA / f"verl-h100-{name}.json").read_text())


def rejudge(c: dict):
    steps = {r["step"]: {k: v for k, v in r.items() if k != "step"} for r in c["metrics"]["per_step"]}
    return judge(steps, c["settings"]["steps"], RunStatus(c["run"]["status"]), require_learning=True,
                 extra=[verl_report.sleep_pool_check(c["setup"])])


@pytest.mark.parametrize("name", sorted(RUNS))
def test_each_h100_run_passes_again_under_the_judge(name):
    c = cert(name)
    assert c["verdict"] == "pass" and c["device"] == "NVIDIA H100 80GB HBM3"
    assert (c["target"]["packages"]["verl"], c["target"]["packages"]["vllm"]) == ("0.9.1", "0.24.0")
    v = rejudge(c)
    assert v.passed and [x["name"] for x in v.checks] == [x["name"] for x in c["checks"]]
    assert len(c["metrics"]["per_step"]) == RUNS[name] and c["run"]["status"] == "finished"
    # the steps after the first take seconds: the run is start-up bound, not step bound
    later = [r["timing_s/step"] for r in c["metrics"]["per_step"][1:]]
    assert max(later) < 6 and sum(later) < c["timings"]["whole_s"] / 4
    assert markdown(c).startswith("# rocmkit certificate: PASS")


def test_auto_attention_took_sdpa_where_flash_attn_is_missing_and_the_run_used_it():
    for name in RUNS:
        c = cert(name)
        assert c["verl"]["attention"] == {"asked": "auto", "chosen": "sdpa",
                                          "why": "auto: flash_attn cannot run here (ModuleNotFoundError: No module "
                                                 "named 'flash_attn')"}
        command = c["settings"]["command"]
        assert "+actor_rollout_ref.model.override_config.attn_implementation=sdpa" in command
        assert "actor_rollout_ref.model.use_remove_padding=False" in command
    said = (DATA / "verl-h100-dry-run-fa2.txt").read_text().splitlines()
    assert said[-3].startswith("error: --attn flash_attention_2: flash_attn cannot run in the target "
                               "(ModuleNotFoundError: No module named 'flash_attn')")
    assert said[-2].startswith("hint: ") and said[-1] == "exit 3"


def test_the_sleep_pool_and_what_sleep_mode_freed():
    tiny, big = cert("tiny"), cert("0.5b")
    doc = tiny["setup"]["sleep_pool"]
    assert doc["variables"]["PYTORCH_CUDA_ALLOC_CONF"] == "expandable_segments:True"
    assert doc["vllm"] == {"reads": ["PYTORCH_CUDA_ALLOC_CONF"], "live": False, "policy": "toggles"}
    assert doc["pool"] == {"allocated_mib": 64, "in_pool_mib": 64, "returned_mib": 64}
    # every step's sleep gave back the KV cache (gpu_memory_utilization 0.4 of 80 GB), the rest stayed
    assert tiny["verl"]["sleep_mode"]["sleeps"] == 17 and tiny["verl"]["sleep_mode"]["freed_gib"] == [31.38, 31.38]
    assert big["verl"]["sleep_mode"]["still_in_use_gib"][1] > tiny["verl"]["sleep_mode"]["still_in_use_gib"][1]
    # the same environment with the pool bypassed (PyTorch without its own guard) fails the check
    bypassed = copy.deepcopy(tiny)
    bypassed["setup"]["sleep_pool"]["variables"] = {"PYTORCH_ALLOC_CONF": "expandable_segments:True",
                                                    "PYTORCH_CUDA_ALLOC_CONF": None, "PYTORCH_HIP_ALLOC_CONF": None}
    bypassed["setup"]["sleep_pool"]["torch_settings"] = "expandable_segments:True"
    bypassed["setup"]["sleep_pool"]["pool"]["in_pool_mib"] = 0
    ok, detail, hint = sleep_pool.judge(bypassed["setup"]["sleep_pool"])
    assert not ok and "where vLLM does not look" in detail and "unset PYTORCH_ALLOC_CONF" in hint
    assert not rejudge(bypassed).passed


def test_peak_memory_and_learning_of_the_0_5b_run():
    c = cert("0.5b")
    peak = max(r["actor/perf/max_memory_allocated_gb"] for r in c["metrics"]["per_step"])
    assert 7.0 < peak < 8.0
    assert c["metrics"]["reward"]["last"] - c["metrics"]["reward"]["first"] > 0.5


def test_graphs_were_captured_only_when_asked():
    eager, graphs = cert("tiny"), cert("tiny-graphs")
    assert "actor_rollout_ref.rollout.enforce_eager=True" in eager["settings"]["command"]
    assert "actor_rollout_ref.rollout.enforce_eager=False" in graphs["settings"]["command"]
    assert eager["verl"]["rollout_graphs"]["exercised"] is False
    assert graphs["verl"]["rollout_graphs"]["asked"] and graphs["verl"]["rollout_graphs"]["exercised"]
    # vLLM's own engine init: compile and capture are what --rollout-graphs adds
    assert graphs["verl"]["engine_init_s"] > 2 * eager["verl"]["engine_init_s"]
    log = gzip.decompress((DATA / "verl-h100-tiny-graphs.log.gz").read_bytes()).decode()
    seen = verl_report.from_log(log)
    assert seen["graphs_captured"] and seen["compile_s"] == 11.86 and seen["engine_init_s"] == 21.69
    assert seen["sleeps"] == 17 and seen["sleep_freed_gib"] == [31.21, 31.21]


@pytest.mark.parametrize("fault", ["flat reward", "nan loss", "missing steps"])
def test_a_recorded_run_changed_by_a_fault_fails(fault):
    c = cert("tiny")
    rows = c["metrics"]["per_step"]
    if fault == "flat reward":
        for r in rows:
            r["critic/score/mean"] = 0.05
    elif fault == "nan loss":
        rows[5]["actor/pg_loss"] = float("nan")
    else:
        del rows[10:]
    assert not rejudge(c).passed
