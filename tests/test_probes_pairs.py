"""probe.p2p and probe.vram_release judged on documents recorded on real GPUs (tests/data/probes: two H200s
on NVSwitch and one H100 SXM, from `benchmarks/probes_pairs.py` and `probes.measure()`), and on the same
documents with one figure changed the way a fault changes it."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from rocmkit.host.model import Status
from rocmkit.host.probes.judge import judge
from rocmkit.host.probes.p2p import judge_p2p, pair_peak
from rocmkit.host.probes.vram import judge_vram
from rocmkit import archs

DATA = Path(__file__).parent / "data" / "probes"


def load(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def by_id(doc: dict) -> dict:
    return {f.id: f for f in judge(doc)}


def test_recorded_h200_pair_passes_every_probe():
    f = by_id(load("h200-x2-pairs.json"))
    assert list(f)[-3:] == ["probe.allreduce", "probe.p2p", "probe.vram_release"]
    assert all(x.status is Status.PASS for x in f.values()), [x.title for x in f.values()]
    p2p = f["probe.p2p"]
    assert "2 GPU pairs" in p2p.title and "NVSwitch" in p2p.title and p2p.evidence["peak"] == 450
    assert {(r["src"], r["dst"]) for r in p2p.evidence["pairs"]} == {(0, 1), (1, 0)}
    vram = f["probe.vram_release"]
    assert "expandable segments: 3 cycles of 90.0 GiB" in vram.title and "torch_memory_saver" in vram.title
    assert vram.evidence["alloc_conf"]["PYTORCH_HIP_ALLOC_CONF"] == "expandable_segments:True"


def test_recorded_h100_single_gpu():
    f = by_id(load("h100-sxm-vram.json"))
    assert f["probe.p2p"].status is Status.SKIP and "1 GPU visible" in f["probe.p2p"].title
    assert f["probe.vram_release"].status is Status.PASS


def test_older_documents_have_no_new_findings():
    assert "probe.p2p" not in by_id(load("h200-x2.json")) and "probe.vram_release" not in by_id(load("h200-x2.json"))


def _eight_mi300x(slow: dict[tuple[int, int], float]) -> tuple[dict, list[dict]]:
    gpus = [{"index": i, "product": "MI300X", "arch": "gfx942", "partitions": 1} for i in range(8)]
    pairs = [{"src": a, "dst": b, "peer_access": True,
              "figure": {"value": slow.get((a, b), 40.0), "unit": "GB/s", "samples": [40.0]}}
             for a in range(8) for b in range(8) if a != b]
    return {"available": True, "bytes": 256 << 20, "pairs": pairs}, gpus


def test_mi300x_thresholds_from_the_link_budget():
    product = archs.product_named("MI300X")
    assert pair_peak(product) == 64.0  # one xGMI link per peer
    f = judge_p2p(*_eight_mi300x({}))
    assert f.status is Status.PASS and "56 GPU pairs" in f.title
    assert abs(f.evidence["pass_at"] - 33.9) < 0.5  # the pass line sits on ROCm/cvs's 33.9 GB/s


def test_one_slow_link_is_named():
    f = judge_p2p(*_eight_mi300x({(2, 5): 14.0, (5, 2): 15.0}))
    assert f.status is Status.FAIL and "GPU 2→5 14.0 GB/s" in f.title and "GPU 5→2" in f.title
    assert "one slow link" in f.title and "the other 54 pairs" in f.title and f.fix and "topology" in f.fix


def test_every_pair_slow_and_no_peer_access():
    doc, gpus = _eight_mi300x({(a, b): 30.0 for a in range(8) for b in range(8)})
    for r in doc["pairs"]:
        r["peer_access"] = False
    f = judge_p2p(doc, gpus)
    assert f.status is Status.WARN and "every pair slow" in f.title and "through host memory" in f.title


def test_p2p_skips_and_errors():
    doc, gpus = _eight_mi300x({})
    assert judge_p2p(doc, [dict(g, product=None) for g in gpus]).status is Status.SKIP
    assert "partitioned" in judge_p2p(doc, [dict(g, partitions=4) for g in gpus]).title
    doc["pairs"][3]["error"] = "RuntimeError: peer mapping failed"
    f = judge_p2p(doc, gpus)
    assert f.status is Status.FAIL and "peer mapping failed" in f.title
    assert judge_p2p({"available": True, "error": "RuntimeError: out of memory"}, gpus).status is Status.FAIL


def test_pages_kept_after_release_fail():
    doc = load("h200-x2-pairs.json")["vram_release"]
    bad = copy.deepcopy(doc)
    c = bad["modes"]["torch"]["cycles"][1]  # the bug at the second wake: the pages stay mapped
    c["free_after"] = c["free_held"] + c["taken"] // 50
    c["returned"] = c["free_after"] - c["free_held"]
    c["ratio"] = round(c["returned"] / c["taken"], 4)
    f = judge_vram(bad)
    assert f.status is Status.FAIL and "cycle 2 of 3" in f.title and "(2%" in f.title
    assert "enable_sleep_mode=False" in f.fix and "37533" in f.reference
    bad["modes"]["torch"]["cycles"][1]["ratio"] = 0.9
    assert judge_vram(bad).status is Status.WARN


def test_oom_at_wake_fails_and_missing_saver_is_said():
    doc = load("h100-sxm-vram.json")["vram_release"]
    oom = copy.deepcopy(doc)
    oom["modes"]["torch_memory_saver"]["cycles"] = oom["modes"]["torch_memory_saver"]["cycles"][:1]
    oom["modes"]["torch_memory_saver"]["error"] = "cycle 2: RuntimeError: CUDA error: out of memory"
    f = judge_vram(oom)
    assert f.status is Status.FAIL and "cycle 2: RuntimeError" in f.title
    none = copy.deepcopy(doc)
    none["modes"]["torch_memory_saver"] = {"mode": "torch_memory_saver", "cycles": [],
                                           "skipped": "torch_memory_saver is not installed"}
    f = judge_vram(none)
    assert f.status is Status.PASS and "torch_memory_saver is not installed" in f.title


def test_vram_unreadable_is_never_a_pass():
    assert judge_vram({"available": False, "reason": "needs a GPU (device cpu)"}).status is Status.SKIP
    died = {"available": True, "gpu": 0, "modes": {"torch": {"error": "worker exited -9: Killed", "cycles": []}}}
    assert judge_vram(died).status is Status.FAIL
    small = {"available": True, "gpu": 0, "modes": {"torch": {"cycles": [
        {"taken": 1 << 20, "returned": 1 << 20, "ratio": 1.0}]}}}
    assert judge_vram(small).status is Status.SKIP
    assert judge_vram(None).status is Status.SKIP
