"""Judging level-2 figures against the arch table, on recorded measurements.

tests/data/probes/*.json are figures documents that `probes.measure()` recorded on real GPUs (an H100 SXM;
two H200s with their all-reduce). Degraded hosts are those recordings with figures scaled down the way the
fault shows (a GPU at low clocks, degraded HBM, a link trained at x8, a slow all-reduce). AMD products cannot
be measured here: their documents are generated at the arch table's expected figures, and say so.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from rocmkit import archs
from rocmkit.host.model import Status
from rocmkit.host.probes.judge import allreduce_peak, judge
from rocmkit.host.probes.verdict import PASS_AT, WARN_AT, verdict

DATA = Path(__file__).parent / "data" / "probes"
PER_GPU = ["probe.gemm.bf16", "probe.gemm.fp8", "probe.hbm", "probe.h2d", "probe.d2h"]


def recorded(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def by_id(doc: dict) -> dict:
    return {f.id: f for f in judge(doc)}


def scaled(doc: dict, factors: dict[str, float], gpu: int = 0) -> dict:
    """The recording with some figures of one GPU scaled (every sample, so median and spread follow)."""
    doc = copy.deepcopy(doc)
    target = doc["allreduce"]["figure"] if gpu == "allreduce" else doc["gpus"][gpu]["figures"]
    for key, k in factors.items():
        fig = target if key == "allreduce" else target[key]
        for field in ("value", "min", "max"):
            fig[field] *= k
        fig["samples"] = [s * k for s in fig["samples"]]
    return doc


# --- recorded, healthy ---------------------------------------------------------------------------------------

def test_recorded_h100_passes_every_probe():
    f = by_id(recorded("h100-sxm.json"))
    assert [i for i in f if i != "probe.allreduce"] == PER_GPU
    for fid in PER_GPU:
        assert f[fid].status is Status.PASS, f[fid].title
        row = f[fid].evidence["gpus"][0]
        assert row["product"] == "H100 SXM" and row["value"] > row["pass_at"] and row["figure"]["samples"]
    assert "H100 SXM peak 989" in f["probe.gemm.bf16"].title and "healthy ≥" in f["probe.gemm.bf16"].title
    assert f["probe.h2d"].evidence["links"] == ["GPU 0 (0000:00:06.0) link x16 32.0 GT/s PCIe of x16 32.0 GT/s PCIe"]
    assert f["probe.gemm.bf16"].evidence["torch"].startswith("2.")
    assert all(x.fix is None for x in f.values())


def test_recorded_h200_pair_passes_including_all_reduce():
    f = by_id(recorded("h200-x2.json"))
    assert list(f) == PER_GPU + ["probe.allreduce"]
    for x in f.values():
        assert x.status is Status.PASS, x.title
    ar = f["probe.allreduce"]
    assert ar.evidence["topology"] == "switch" and ar.evidence["peak"] == 450.0
    assert ar.evidence["figure"]["params"]["ranks"] == 2 and ar.evidence["figure"]["params"]["correct_sum"]
    assert "across 2 GPUs" in ar.title and "on 2 GPUs" in f["probe.hbm"].title


# --- recorded, degraded --------------------------------------------------------------------------------------

@pytest.mark.parametrize("factor,status", [(0.95, Status.PASS), (0.7, Status.WARN), (0.5, Status.FAIL)])
def test_low_clocks_flag_the_gemms(factor, status):
    f = by_id(scaled(recorded("h100-sxm.json"), {"gemm.bf16": factor, "gemm.fp8": factor}))
    assert f["probe.gemm.bf16"].status is status and f["probe.gemm.fp8"].status is status
    assert f["probe.hbm"].status is Status.PASS
    if status is not Status.PASS:
        assert "below the healthy" in f["probe.gemm.bf16"].title and "amd-smi" in f["probe.gemm.bf16"].fix


def test_degraded_hbm_fails():
    f = by_id(scaled(recorded("h100-sxm.json"), {"hbm": 0.5}))
    assert f["probe.hbm"].status is Status.FAIL and "bad-pages" in f["probe.hbm"].fix
    assert f["probe.hbm"].evidence["gpus"][0]["of_expected"] < WARN_AT


def test_pcie_x8_fails_both_directions_and_shows_the_link():
    doc = scaled(recorded("h100-sxm.json"), {"h2d": 0.5, "d2h": 0.5})
    doc["gpus"][0]["link"]["current_width"] = "8"
    f = by_id(doc)
    for fid in ("probe.h2d", "probe.d2h"):
        assert f[fid].status is Status.FAIL and "LnkSta" in f[fid].fix
    assert "x8 32.0 GT/s PCIe of x16" in f["probe.h2d"].evidence["links"][0]
    assert "(link x8 32.0 GT/s PCIe of x16" in f["probe.h2d"].title


def test_slow_all_reduce_fails_and_names_the_links():
    f = by_id(scaled(recorded("h200-x2.json"), {"allreduce": 0.3}, gpu="allreduce"))
    ar = f["probe.allreduce"]
    assert ar.status is Status.FAIL and "below the healthy" in ar.title and "nvidia-smi topo -m" in ar.fix


def test_one_slow_gpu_among_many_is_named():
    doc = recorded("h200-x2.json")
    doc["gpus"] = [dict(copy.deepcopy(doc["gpus"][i % 2]), index=i) for i in range(8)]
    doc["allreduce"] = None
    doc = scaled(doc, {"gemm.bf16": 0.55}, gpu=5)
    f = by_id(doc)["probe.gemm.bf16"]
    assert f.status is Status.FAIL and f.title.startswith("bf16 GEMM: GPU 5 at ")
    assert "the healthy ones" in f.title and f.evidence["gpus"][0]["gpu"] == 5  # worst first
    assert by_id(doc)["probe.allreduce"].status is Status.SKIP


def test_wrong_sum_and_failed_all_reduce_fail():
    doc = recorded("h200-x2.json")
    doc["allreduce"]["figure"]["params"]["correct_sum"] = False
    assert by_id(doc)["probe.allreduce"].status is Status.FAIL
    doc["allreduce"] = {"gpus": [0, 1], "error": "all-reduce across 2 devices failed: NCCL error: unhandled"}
    f = by_id(doc)["probe.allreduce"]
    assert f.status is Status.FAIL and "NCCL error" in f.title


def test_measurement_errors():
    doc = recorded("h100-sxm.json")
    g = doc["gpus"][0]
    del g["figures"]["gemm.fp8"], g["figures"]["hbm"]
    g["errors"] = {"gemm.fp8": "RuntimeError: fp8 GEMM not supported", "hbm": "RuntimeError: CUDA error: ECC"}
    f = by_id(doc)
    assert f["probe.gemm.fp8"].status is Status.WARN and "not supported" in f["probe.gemm.fp8"].title
    assert f["probe.hbm"].status is Status.FAIL and "ECC" in f["probe.hbm"].title


# --- what cannot be judged is skipped, with the reason --------------------------------------------------------

def test_unknown_product_is_measured_but_not_judged():
    doc = recorded("h100-sxm.json")
    doc["gpus"][0].update(product=None, name="NVIDIA H100 80GB HBM3 MIG 1g.10gb")
    for x in judge(doc)[:5]:
        assert x.status is Status.SKIP and "not judged" in x.title and "MIG" in x.title


def test_product_without_links_skips_all_reduce():
    doc = recorded("h200-x2.json")
    for g in doc["gpus"]:
        g["product"] = "H100 PCIe"
    f = by_id(doc)["probe.allreduce"]
    assert f.status is Status.SKIP and "no GPU-to-GPU link figures for H100 PCIe" in f.title


def test_no_gpu_document():
    assert judge({"gpus": [], "allreduce": None})[0].status is Status.SKIP


# --- AMD products: generated documents at the table's expected figures -----------------------------------------

def amd_gpu(product: str, index: int = 0, *, scale: float = 1.0, partitions: int = 1, fp8: bool = True) -> dict:
    p = archs.product_named(product)
    figures = {}
    for key, peak, fk in (("gemm.bf16", p.peak_bf16_tflops, "gemm_bf16"), ("gemm.fp8", p.peak_fp8_tflops, "gemm_fp8"),
                          ("hbm", (p.hbm_tbps or 0) * 1000, "hbm"), ("h2d", p.pcie_gbps, "pcie"),
                          ("d2h", p.pcie_gbps, "pcie")):
        if peak and (fp8 or key != "gemm.fp8") and p.expected_fraction(fk):
            v = peak * p.expected_fraction(fk) * scale / (partitions if key.startswith("gemm") else 1)
            figures[key] = {"value": v, "unit": "TFLOP/s" if key.startswith("gemm") else "GB/s", "min": v, "max": v,
                            "spread": 0.01, "stable": True, "n": 10, "seconds": 0.3, "samples": [v] * 10}
    return {"index": index, "name": p.torch_name, "arch": p.arch, "product": p.name, "partitions": partitions,
            "figures": figures, "errors": {}}


def ar_figure(value: float, ranks: int) -> dict:
    return {"gpus": list(range(ranks)), "figure": {"value": value, "unit": "GB/s", "spread": 0.01, "stable": True,
                                                   "n": 10, "seconds": 8.0, "params": {"ranks": ranks,
                                                                                       "correct_sum": True}}}


@pytest.mark.parametrize("product", ["MI300X", "MI300X VF", "MI325X", "MI355X", "MI350X VF"])
def test_amd_products_at_expected_figures_pass_and_low_clocks_fail(product):
    f = by_id({"gpus": [amd_gpu(product)]})
    assert all(f[i].status is Status.PASS for i in PER_GPU), [x.title for x in f.values()]
    f = by_id({"gpus": [amd_gpu(product, scale=0.5)]})
    assert all(f[i].status is Status.FAIL for i in PER_GPU)


def test_mi300x_warn_line_is_the_rvs_level3_floor():
    """The bf16/fp8 warn lines sit on RVS level 3 GST target_stress (MI300X 552/981, MI355X 956/2061 TFLOP/s)."""
    for product, key, fk, peak_attr, rvs in (("MI300X", "bf16", "gemm_bf16", "peak_bf16_tflops", 552),
                                            ("MI300X", "fp8", "gemm_fp8", "peak_fp8_tflops", 981),
                                            ("MI355X", "bf16", "gemm_bf16", "peak_bf16_tflops", 956),
                                            ("MI355X", "fp8", "gemm_fp8", "peak_fp8_tflops", 2061)):
        p = archs.product_named(product)
        assert getattr(p, peak_attr) * p.expected_fraction(fk) * PASS_AT == pytest.approx(rvs, rel=0.02), (product, key)


def test_cpx_partitions_split_compute_and_skip_bandwidths():
    doc = {"gpus": [amd_gpu("MI300X", i, partitions=8) for i in range(8)]}
    f = by_id(doc)
    assert f["probe.gemm.bf16"].status is Status.PASS
    assert f["probe.gemm.bf16"].evidence["gpus"][0]["peak"] == pytest.approx(1307.4 / 8, rel=1e-3)
    for fid in ("probe.hbm", "probe.h2d"):
        assert f[fid].status is Status.SKIP and "8 partitions" in f[fid].title


def test_arch_without_fp8_skips_fp8():
    gpu = amd_gpu("MI250X", fp8=False)
    gpu["figures"]["gemm.fp8"] = {"value": 10.0, "unit": "TFLOP/s", "spread": 0.0, "stable": True}
    f = by_id({"gpus": [gpu]})
    assert f["probe.gemm.fp8"].status is Status.SKIP and "no fp8" in f["probe.gemm.fp8"].title
    # No expected fraction in the table for gfx90a: measured, not judged.
    assert f["probe.gemm.bf16"].status is Status.SKIP


def test_mesh_all_reduce_peak_grows_with_gpus_switch_does_not():
    mi300x, h200 = archs.product_named("MI300X"), archs.product_named("H200")
    assert [allreduce_peak(mi300x, n) for n in (2, 4, 8)] == [64.0, 192.0, 448.0]
    assert {allreduce_peak(h200, n) for n in (2, 8)} == {450.0}
    assert allreduce_peak(archs.product_named("MI210"), 4) is None
    healthy = 448 * mi300x.expected_fraction("allreduce")
    gpus = [amd_gpu("MI300X", i) for i in range(8)]
    assert by_id({"gpus": gpus, "allreduce": ar_figure(healthy, 8)})["probe.allreduce"].status is Status.PASS
    # The same figure across 2 GPUs would be above one link's peak: a pair is judged against one link.
    pair = by_id({"gpus": gpus[:2], "allreduce": ar_figure(64 * 0.3, 2)})["probe.allreduce"]
    assert pair.status is Status.FAIL and pair.evidence["peak"] == 64.0


def test_verdict_bands():
    assert verdict(PASS_AT * 100, 100) is Status.PASS
    assert verdict(PASS_AT * 100 - 0.01, 100) is Status.WARN
    assert verdict(WARN_AT * 100 - 0.01, 100) is Status.FAIL


def test_every_product_with_a_peak_has_a_fraction_or_is_legacy():
    for arch in archs.all_archs().values():
        for p in arch.products:
            if p.peak_bf16_tflops and arch.status != "legacy":
                assert p.expected_fraction("gemm_bf16"), p.name


def test_every_probe_id_is_in_the_catalog():
    """The probes table of the manual is made from the catalog: every id a probe can produce is in it, and it
    names none that no probe produces (ids read from the probes' source: the literal `probe.*` strings and
    the measures' keys)."""
    import ast
    import re
    from pathlib import Path

    from rocmkit.host.probes import catalog, judge, verdict

    produced = {f"{verdict.AREA}.{m.key}" for m in judge.MEASURES}
    for path in Path(catalog.__file__).parent.glob("*.py"):
        if path.name == "catalog.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.fullmatch(
                    r"probe\.[a-z0-9_.]+", node.value):
                produced.add(node.value)
    produced.discard(f"{verdict.AREA}.gpu")  # "no GPU, nothing measured": the probes' skip, not a probe
    assert produced == catalog.declared_ids()
