"""probe.megatron: the real worker on the CPU (megatron-core's local layers, gloo, TP=1 in one process and
TP=2 in two), its failure and skip paths, and the judge on a document recorded by that CPU run
(tests/data/probes/megatron-cpu-tp2.json) and on the same document changed the way a fault changes it; the
GPU path's bf16 casts on gloo ranks; and the judge on the H100 documents (megatron-h100-tp1*.json).

NCCL/RCCL and TransformerEngine layers need a GPU: benchmarks/probe_megatron.py and the `-m gpu` tests here
are what a GPU machine runs (README, `probe.megatron`). CI provisions megatron-core
(.ci/provision/55-megatron.sh) and the verl-cpu venv whose torch brings the triton megatron-core imports
(50-cpu-stacks.sh): there these tests fail, not skip, when either is missing.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import math
import sys
import time
from pathlib import Path

import pytest
from provisioned import provisioned

from rocmkit.host.model import Status
from rocmkit.host.probes.judge import judge
from rocmkit.host.probes.megatron import GPT, judge_megatron, measure_megatron

ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "tests" / "data" / "probes" / "megatron-cpu-tp2.json"
SMALL = GPT(hidden=64, heads=4, ffn=256, vocab=256, seq=32)


@pytest.fixture
def megatron_python(monkeypatch) -> str:
    """The verl-cpu venv's Python with megatron-core (and this checkout) on its path."""
    python = provisioned("ROCMKIT_VERL_CPU_PYTHON", ".ci/provision/50-cpu-stacks.sh makes the verl-cpu venv", "VERL_CPU")
    path = provisioned("ROCMKIT_MEGATRON_PATH", ".ci/provision/55-megatron.sh installs megatron-core", "MEGATRON")
    monkeypatch.setenv("PYTHONPATH", f"{ROOT}:{path}")
    return python


@pytest.mark.slow
def test_tp1_and_tp2_train_on_cpu_with_gloo(megatron_python):
    one = measure_megatron(["cpu"], steps=4, model=SMALL, python=megatron_python)
    two = measure_megatron(["cpu", "cpu"], steps=4, model=SMALL, python=megatron_python)
    for doc, tp in ((one, 1), (two, 2)):
        json.dumps(doc)  # plain data, as the figures document embeds it
        assert doc["available"] and "error" not in doc, doc
        assert (doc["tp"], doc["layers"], doc["backend"], doc["megatron_core"]) == (tp, "local", "gloo", "0.18.0")
        assert len(doc["losses"]) == 4 and all(math.isfinite(x) for x in doc["losses"]) and len(doc["step_s"]) == 4
        f = judge_megatron(doc)
        assert f.status is Status.PASS, f.title
        assert f"megatron-core local layers, TP={tp}" in f.title and "4 steps, loss" in f.title and "ms/step" in f.title
    # TP=2 splits heads, FFN and vocab across two ranks: the same model, so the same losses as one rank
    assert two["parameters_per_rank"] < one["parameters_per_rank"]
    assert two["losses"] == pytest.approx(one["losses"], rel=1e-4)


@pytest.mark.slow
def test_bf16_the_gpu_dtype_trains_on_cpu(megatron_python):
    """GPUs train in bf16: every parameter cast by megatron-core's Float16Module, as Megatron's training and verl
    wrap the model. Without it the local layers' torch norms stay float32 and the first matmul refuses
    ("float != c10::BFloat16", the first H100 run's failure); the casts are the same on gloo ranks."""
    doc = measure_megatron(["cpu", "cpu"], steps=4, model=SMALL, dtype="bf16", python=megatron_python)
    assert doc["dtype"] == "bf16" and "error" not in doc, doc
    f = judge_megatron(doc)
    assert f.status is Status.PASS and "TP=2 on cpu, cpu, bf16): 4 steps" in f.title, f.title


@pytest.mark.slow
def test_broken_transformer_engine_is_a_failure_naming_it(megatron_python):
    # Asked for TE layers where transformer_engine does not import: what a broken TE build looks like
    doc = measure_megatron(["cpu"], steps=2, model=SMALL, python=megatron_python, layers="te")
    f = judge_megatron(doc)
    assert f.status is Status.FAIL and f.fix, f.title
    assert "TransformerEngine layers, TP=1" in f.title and "rank 0: ModuleNotFoundError" in f.title
    assert "transformer_engine" in f.title


def test_a_worker_past_its_deadline_is_stopped_and_fails(megatron_python):
    started = time.monotonic()
    doc = measure_megatron(["cpu", "cpu"], steps=2, model=SMALL, python=megatron_python, timeout_s=3)
    f = judge_megatron(doc)
    assert f.status is Status.FAIL and "failed: did not finish within 3 s" in f.title, f.title
    assert time.monotonic() - started < 30  # the process tree was stopped, not waited for


def test_no_megatron_core_is_a_skip_saying_so(monkeypatch):
    if importlib.util.find_spec("megatron") is not None:
        pytest.skip("megatron is importable in this venv: its absence cannot be shown here")
    monkeypatch.setenv("PYTHONPATH", str(ROOT))
    doc = measure_megatron(["cpu"], steps=2, model=SMALL, python=sys.executable)
    assert doc["available"] is False and doc["missing"] == "megatron-core"
    f = judge_megatron(doc)
    assert f.status is Status.SKIP and "not run: megatron-core is not installed" in f.title


def recorded() -> dict:
    return json.loads(RECORDED.read_text())


def test_recorded_cpu_run_passes_with_its_figures():
    f = judge_megatron(recorded(), {"torch": "2.13.0+cpu"})
    assert f.status is Status.PASS and f.fix is None
    assert f.title.startswith("Megatron GPT training (megatron-core local layers, TP=2 on cpu, cpu): 6 steps, loss 5.56")
    ev = f.evidence
    assert ev["tp"] == 2 and ev["loss_last"] < ev["loss_first"] * ev["fall_at"] and ev["step_s_median"] > 0
    assert ev["torch"] == "2.13.0+cpu" and ev["model"]["hidden"] == 64


def test_recorded_h100_runs_before_and_after_the_bf16_wrap():
    """benchmarks/probe_megatron.py on nvidia-h100-x1 (torch 2.11.0+cu130, NCCL 2.28.9, no TE: local layers):
    the first run, before Float16Module, failed on the dtype; the run after it passed."""
    before = json.loads((RECORDED.parent / "megatron-h100-tp1-unwrapped.json").read_text())
    f = judge_megatron(before)
    assert f.status is Status.FAIL and f.fix
    assert f.title.endswith("TP=1 on cuda:0) failed: rank 0: RuntimeError: expected mat1 and mat2 to have the same "
                            "dtype, but got: float != c10::BFloat16")
    after = json.loads((RECORDED.parent / "megatron-h100-tp1.json").read_text())
    f = judge_megatron(after)
    assert f.status is Status.PASS
    assert f.title == ("Megatron GPT training (megatron-core local layers, TP=1 on cuda:0, bf16): 8 steps, "
                       "loss 6.994 → 3.314, 14 ms/step")
    assert (f.evidence["backend"], f.evidence["torch"], f.evidence["megatron_core"]) == ("nccl", "2.11.0+cu130", "0.18.0")


def test_faults_fail_with_the_reason():
    nan = recorded()
    nan["losses"][2:] = [float("nan")]
    f = judge_megatron(nan)
    assert f.status is Status.FAIL and "loss nan at step 3 of 3" in f.title and f.fix

    flat = recorded()
    flat["losses"] = [5.56, 5.55, 5.57, 5.54, 5.55, 5.53]
    f = judge_megatron(flat)
    assert f.status is Status.FAIL and "did not fall below 90% of the first" in f.title

    crashed = copy.deepcopy(recorded())
    crashed.update(losses=[], step_s=[], error="worker exited 1: RuntimeError: NCCL error in: ProcessGroupNCCL.cpp")
    f = judge_megatron(crashed)
    assert f.status is Status.FAIL and "failed: worker exited 1: RuntimeError: NCCL error" in f.title

    other_rank = recorded()
    other_rank["rank_errors"] = ["rank 1: RuntimeError: HIP error: invalid device function"]
    f = judge_megatron(other_rank)
    assert f.status is Status.FAIL and "rank 1: RuntimeError: HIP error" in f.title

    one_step = recorded()
    one_step["losses"] = one_step["losses"][:1]
    assert "1 step(s) ran, 2 needed" in judge_megatron(one_step).title


def test_in_the_figures_document_before_vram_release():
    doc = {"gpus": [], "megatron": recorded(), "vram_release": {"available": False, "reason": "needs a GPU"}}
    ids = [f.id for f in judge(doc)]
    assert ids == ["probe.megatron", "probe.vram_release"]
    unmeasured = {"gpus": [], "megatron": {"available": False, "reason": "needs a GPU (device cpu)"}}
    (f,) = judge(unmeasured)
    assert f.status is Status.SKIP and f.title == "Megatron GPT training not run: needs a GPU (device cpu)"


@pytest.mark.gpu
@pytest.mark.parametrize("tp", [1, 2])
def test_on_gpu(tp):
    """What a GPU session runs (with megatron-core on the path): the doctor's own call, TE layers where TE is."""
    torch = pytest.importorskip("torch")
    if importlib.util.find_spec("megatron") is None:
        pytest.skip("megatron-core is not installed (pip install --target DIR megatron-core==0.18.0 --no-deps)")
    if torch.cuda.device_count() < tp:
        pytest.skip(f"TP={tp} needs {tp} GPUs")
    doc = measure_megatron([f"cuda:{i}" for i in range(tp)])
    f = judge_megatron(doc)
    assert f.status is Status.PASS, f.title
    assert doc["backend"] == "nccl" and doc["tp"] == tp and len(doc["losses"]) == doc["steps"]
