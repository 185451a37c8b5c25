"""Level 2 end to end: the figures document, the findings, the doctor CLI. On the CPU for real (torch's CPU
device through the same code, and the no-GPU path this machine really has); on a GPU under the `gpu` marker."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from rocmkit.cli import cli
from rocmkit.errors import EnvironmentMissing, UsageError
from rocmkit.host.probes import run as probes
from rocmkit.host.model import Status

if os.environ.get("ROCMKIT_REQUIRE_PROBES") == "1":  # CI provisioned torch (45-probes.sh): no skipping
    import torch
else:
    torch = pytest.importorskip("torch", reason="the probes measure through PyTorch (pip install torch)")
TINY = probes.Sizes(gemm_n=64, hbm_bytes=1 << 20, host_bytes=1 << 20, allreduce_bytes=1 << 14)
IDS = ["probe.gemm.bf16", "probe.gemm.fp8", "probe.hbm", "probe.h2d", "probe.d2h"]
no_gpu = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the path of a machine without a GPU")


def test_cpu_device_document_and_findings():
    doc = probes.measure(devices=["cpu"], budget_s=0.5, sizes=TINY, progress=None)
    json.dumps(doc)  # plain data, as certificates embed it
    assert doc["available"] and doc["runtime"] and doc["sizes"]["gemm_n"] == 64 and doc["allreduce"] is None
    (gpu,) = doc["gpus"]
    assert set(gpu["figures"]) == {"gemm.bf16", "gemm.fp8", "hbm", "h2d", "d2h"} and not gpu["errors"]
    assert all(f["value"] > 0 and f["samples"] for f in gpu["figures"].values())
    findings = probes.findings_for(doc)
    assert [f.id for f in findings] == IDS + ["probe.allreduce", "probe.p2p", "probe.megatron", "probe.vram_release"]
    # A CPU is no product of the arch table: measured, shown, not judged.
    assert all(f.status is Status.SKIP for f in findings)
    assert "not in rocmkit's arch table" in findings[0].title and "TFLOP/s" in findings[0].title
    assert findings[0].evidence["gpus"][0]["figure"]["samples"]
    assert "1 GPU visible" in findings[-4].title and "no pair" in findings[-3].title
    assert findings[-2].status is Status.SKIP and "needs a GPU (device cpu)" in findings[-2].title
    assert findings[-1].status is Status.SKIP and "needs a GPU" in findings[-1].title


def test_progress_shows_each_probe_before_it_runs_and_its_result_after():
    import io

    from rocmkit.progress import Display

    out = io.StringIO()
    with Display("probe", mode="plain", stream=out) as shown:
        probes.measure(devices=["cpu"], budget_s=0.5, sizes=TINY, progress=shown)
    lines = out.getvalue().splitlines()
    for key in ("gemm.bf16", "hbm", "d2h"):
        started = next(i for i, line in enumerate(lines) if line.startswith("probe: cpu") and f") {key} — up to" in line)
        result = next(i for i, line in enumerate(lines) if f": {key} " in line and " in " in line and "up to" not in line)
        assert started < result, lines


@pytest.mark.slow
def test_two_cpu_ranks_all_reduce_in_the_document():
    doc = probes.measure(devices=["cpu", "cpu"], budget_s=0.3, sizes=TINY, progress=None)
    ar = doc["allreduce"]
    assert ar["figure"]["params"]["correct_sum"] and ar["figure"]["value"] > 0
    f = next(f for f in probes.findings_for(doc) if f.id == "probe.allreduce")
    assert f.status is Status.SKIP and "not judged" in f.title
    # two CPU "devices" are no GPU pair, and the VRAM probe needs a GPU: both say so
    assert doc["p2p"]["available"] is False and "no pair" in doc["p2p"]["reason"]
    assert doc["vram_release"] == {"available": False, "reason": "needs a GPU (device cpu)"}
    assert doc["megatron"] == {"available": False, "reason": "needs a GPU (device cpu)"}  # its CPU path: test_probes_megatron


@no_gpu
def test_no_gpu_is_a_skip_or_exit_3():
    doc = probes.measure(progress=None)
    assert doc["available"] is False and "sees no GPU" in doc["reason"]
    (f,) = probes.run_probes(require_gpu=False, progress=None)
    assert f.id == "probe.gpu" and f.status is Status.SKIP and "sees no GPU" in f.title
    with pytest.raises(EnvironmentMissing, match="level 2 needs a GPU"):
        probes.run_probes(progress=None)


@no_gpu
def test_doctor_level2_without_gpu_exits_3():
    r = CliRunner().invoke(cli, ["doctor", "--level", "2", "--json"])
    assert r.exit_code == 3, r.output
    assert "level 2 needs a GPU" in r.output and "sees no GPU" in r.output


def test_captured_tree_is_not_measured(tmp_path):
    from rocmkit.host.facts import collect

    facts = collect(str(tmp_path), process=False)
    with pytest.raises(UsageError, match="captured tree"):
        probes.run_probes(facts, progress=None)


def test_gpu_index_out_of_range_is_usage_error():
    if not torch.cuda.is_available():
        pytest.skip("needs torch to see a GPU to count")
    with pytest.raises(UsageError, match="not visible"):
        probes.measure(gpus=[torch.cuda.device_count()], progress=None)


# --- on a real GPU -------------------------------------------------------------------------------------------

@pytest.mark.gpu
def test_probes_on_gpu():
    doc = probes.measure(gpus=[0], with_allreduce=False, progress=None)
    gpu = doc["gpus"][0]
    assert gpu["arch"] and gpu["name"] and not gpu["errors"], gpu["errors"]
    for key in ("gemm.bf16", "hbm", "h2d", "d2h"):
        fig = gpu["figures"][key]
        assert fig["value"] > 0 and fig["stable"], (key, fig)
    assert gpu["seconds"] < 3 * probes.DEFAULT_BUDGET_S  # seconds per GPU, allocation included
    findings = probes.findings_for(doc)
    if gpu["product"]:  # a known product on a healthy test machine: judged, and nothing fails
        assert all(f.status is not Status.SKIP for f in findings[:4]), [f.title for f in findings]
        assert not [f for f in findings if f.status is Status.FAIL], [f.title for f in findings]


@pytest.mark.gpu
def test_allreduce_on_gpus():
    if torch.cuda.device_count() < 2:
        pytest.skip("one GPU: nothing to all-reduce across")
    doc = probes.measure(budget_s=1.0, progress=None)
    ar = doc["allreduce"]
    assert "error" not in ar, ar
    assert ar["figure"]["params"]["correct_sum"] and ar["figure"]["params"]["backend"] == "nccl"
    f = next(f for f in probes.findings_for(doc) if f.id == "probe.allreduce")
    assert f.status is not Status.FAIL, f.title
    p2p = next(f for f in probes.findings_for(doc) if f.id == "probe.p2p")
    assert p2p.status is not Status.FAIL and len(p2p.evidence["pairs"]) == torch.cuda.device_count() * (
        torch.cuda.device_count() - 1), p2p.title


@pytest.mark.gpu
def test_doctor_level2_json_on_gpu():
    r = subprocess.run([sys.executable, "-m", "rocmkit", "doctor", "--level", "2", "--json", "--only", "probe"],
                       check=False, capture_output=True, text=True, timeout=300)
    assert r.returncode in (0, 1), r.stderr
    assert "probe: cuda:0" in r.stderr  # progress lines go to stderr, the document to stdout
    doc = json.loads(r.stdout)
    ids = [f["id"] for f in doc["findings"]]
    assert ids[:5] == IDS and ids[-4:] == ["probe.allreduce", "probe.p2p", "probe.megatron", "probe.vram_release"]
    assert doc["findings"][0]["evidence"]["gpus"][0]["figure"]["samples"]


@pytest.mark.gpu
def test_vram_release_on_gpu():
    from rocmkit.host.probes.vram import judge_vram, measure_vram

    doc = measure_vram(0, cycles=2)
    torch_mode = doc["modes"]["torch"]
    assert "error" not in torch_mode and len(torch_mode["cycles"]) == 2, torch_mode
    assert all(c["taken"] > 1 << 30 for c in torch_mode["cycles"])
    f = judge_vram(doc)
    assert f.status is Status.PASS, f.title  # a healthy test machine gives its memory back
