"""The GPU probes run beside the engine's start-up (certify/flow.py ProbesBeside): their figures reach the verdict
as before, unless another process held memory on the probed GPUs when they ended; then they are reported, not
judged. The GPU evidence (the same probes alone and beside, one H200) is in tests/test_certify_h200_before_after.py."""

from __future__ import annotations

import os
import time

from rocmkit.certify import busy, flow
from rocmkit.certify.certificate import _own_time_line
from rocmkit.certify.judge import RunStatus, judge
from rocmkit.certify.settings import Settings
from rocmkit.host.facts.gpu_holders import Holder

PCI = "0000:19:00.0"
FINDINGS = [{"id": "probe.gemm.bf16", "status": "fail", "title": "GEMM bf16: 310 TFLOP/s (31% of peak)"},
            {"id": "probe.hbm", "status": "pass", "title": "HBM: 4254 GB/s"}]


def _holder(pid: int, pci: str = PCI) -> Holder:
    return Holder(pid=pid, comm="python3", cmdline="python3 -m verl.trainer.main_ppo", started=None,
                  memory={pci: 8 << 30}, source="nvidia-smi")


def _beside(monkeypatch, holders: list[Holder], doc: dict | None = None, seconds: float = 0.2):
    def figures(s, target, deadline):
        time.sleep(seconds)
        return {"figures": {"gpus": []}, "findings": [dict(f) for f in FINDINGS]} if doc is None else doc

    monkeypatch.setattr(flow, "probe_figures", figures)
    monkeypatch.setattr(busy, "read_holders", lambda: holders)
    timings = flow.Timings()
    beside = flow.ProbesBeside(Settings(gpus=1), None, time.monotonic() + 30,
                               {"gpu_memory": [{"index": 0, "pci": PCI}]})
    assert beside.thread.is_alive()  # the caller goes on (to start the engine) while the probes measure
    return beside.result(time.monotonic() + 30, timings), timings


def test_probes_measured_on_a_gpu_nobody_else_holds_are_judged(monkeypatch):
    # this process's own probe context and another GPU's holder do not count
    doc, timings = _beside(monkeypatch, [_holder(os.getpid()), _holder(4242, pci="0000:2a:00.0")])
    assert "overlap" not in doc and timings["probes_beside_s"] >= 0.2
    v = judge({1: {"loss": 0.1}}, 1, RunStatus.FINISHED, require_learning=False, probes=doc)
    gemm = next(c for c in v.checks if c["name"] == "probe.gemm.bf16")
    assert not gemm["passed"] and gemm["required"] and not v.passed


def test_probes_that_ended_while_the_engine_held_the_gpu_are_reported_not_judged(monkeypatch):
    doc, _ = _beside(monkeypatch, [_holder(4242)])
    assert doc["overlap"].startswith("measured while pid 4242 (python3) held memory on the probed GPUs")
    v = judge({1: {"loss": 0.1}}, 1, RunStatus.FINISHED, require_learning=False, probes=doc)
    gemm = next(c for c in v.checks if c["name"] == "probe.gemm.bf16")
    assert not gemm["passed"] and not gemm["required"] and "reported, not judged" in gemm["detail"] and v.passed


def test_probes_that_break_are_a_finding_and_the_run_goes_on(monkeypatch):
    def broken(s, target, deadline):
        raise RuntimeError("CUDA error: unspecified launch failure")

    monkeypatch.setattr(flow, "probe_figures", broken)
    beside = flow.ProbesBeside(Settings(gpus=1), None, time.monotonic() + 30, {})
    doc = beside.result(time.monotonic() + 30, flow.Timings())
    assert doc == {"error": "the GPU probes failed: RuntimeError: CUDA error: unspecified launch failure"}
    v = judge({1: {"loss": 0.1}}, 1, RunStatus.FINISHED, require_learning=False, probes=doc)
    assert v.passed and any(c["name"] == "GPU probes ran" and not c["required"] for c in v.checks)


def test_probes_still_running_at_the_deadline_are_named(monkeypatch):
    monkeypatch.setattr(flow, "probe_figures", lambda s, t, d: time.sleep(3))
    beside = flow.ProbesBeside(Settings(gpus=1), None, time.monotonic() + 30, {})
    doc = beside.result(time.monotonic() + 0.2, flow.Timings())
    assert doc == {"error": "the GPU probes were still running at the --timeout"}


def test_the_certificate_says_rocmkits_own_time_before_the_run():
    assert _own_time_line({"setup_s": 24.711, "probes_s": 16.484}) == [
        "- rocmkit before the run: setup 24.7 s; GPU probes 16.5 s"]
    assert _own_time_line({"setup_s": 9.2, "probes_s": 0.0, "probes_beside_s": 16.1}) == [
        "- rocmkit before the run: setup 9.2 s; GPU probes 16.1 s, beside the run's start-up"]
    assert _own_time_line({"setup_s": 0.0}) == [] and _own_time_line(None) == []
