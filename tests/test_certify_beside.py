"""What runs beside the engine's start-up (certify/beside.py): the GPU probes, then the setup's slow checks. The
probes' figures reach the verdict as before, unless another process held memory on the probed GPUs when they
ended; then they are reported, not judged. A check that fails stops the run (the watchdog asks `stop_reason`).
The GPU evidence for the probes (alone and beside, one H200) is in tests/test_certify_h200_before_after.py; the
whole flow on the CPU, with verl, in tests/test_certify_engines.py and test_certify_runs.py."""

from __future__ import annotations

import os
import threading
import time

from rocmkit.certify import beside as beside_mod
from rocmkit.certify import busy, flow
from rocmkit.certify.certificate import _own_time_line
from rocmkit.certify.judge import RunStatus, judge
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

    monkeypatch.setattr(busy, "read_holders", lambda: holders)
    timings = flow.Timings()
    beside = _probes(lambda: figures(None, None, None), pcis={PCI})
    assert beside.thread.is_alive()  # the caller goes on (to start the engine) while the probes measure
    return beside.result(time.monotonic() + 30, timings), timings


def _probes(probes, pcis=frozenset(), checks=None, refuses=lambda checked: None) -> beside_mod.Beside:
    return beside_mod.Beside(checks=checks, refuses=refuses, probes=probes, pcis=set(pcis),
                             deadline=time.monotonic() + 30)


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

    beside = _probes(lambda: broken(None, None, None))
    doc = beside.result(time.monotonic() + 30, flow.Timings())
    assert doc == {"error": "the GPU probes failed: RuntimeError: CUDA error: unspecified launch failure"}
    v = judge({1: {"loss": 0.1}}, 1, RunStatus.FINISHED, require_learning=False, probes=doc)
    assert v.passed and any(c["name"] == "GPU probes ran" and not c["required"] for c in v.checks)


def test_probes_still_running_at_the_deadline_are_named(monkeypatch):
    monkeypatch.setattr(beside_mod, "GRACE_S", 0.1)  # the wait ends a little after the deadline
    beside = _probes(lambda: time.sleep(3))
    doc = beside.result(time.monotonic() + 0.2, flow.Timings())
    assert doc == {"error": "the GPU probes were still running at the --timeout"}


def test_the_certificate_says_rocmkits_own_time_before_the_run():
    assert _own_time_line({"setup_s": 24.711, "probes_s": 16.484}) == [
        "- rocmkit before the run: setup 24.7 s; GPU probes 16.5 s"]
    assert _own_time_line({"setup_s": 9.2, "probes_s": 0.0, "probes_beside_s": 16.1}) == [
        "- rocmkit before the run: setup 9.2 s; GPU probes 16.1 s, beside the run's start-up"]
    assert _own_time_line({"setup_s": 8.4, "checks_beside_s": 17.2, "probes_beside_s": 16.1}) == [
        "- rocmkit before the run: setup 8.4 s; beside the run's start-up: GPU probes 16.1 s, the setup's checks "
        "17.2 s"]
    assert _own_time_line({"setup_s": 0.0}) == [] and _own_time_line(None) == []


def test_the_probes_come_first_then_the_checks_and_a_failed_check_stops_the_run(monkeypatch):
    order = []
    monkeypatch.setattr(busy, "read_holders", lambda: [])
    side = _probes(lambda: order.append("probes") or {"findings": []},
                   checks=lambda until, stop: order.append("checks") or ("res", {"conflicts": 1}, []),
                   refuses=lambda checked: "trl 1.13.0 is installed beside verl" if checked[1].get("conflicts")
                   else None)
    assert side.result(time.monotonic() + 30, timings := flow.Timings()) == {"findings": []}
    assert order == ["probes", "checks"] and "checks_beside_s" in timings and "probes_beside_s" in timings
    assert side.stop_reason() == beside_mod.STOPPED and side.refused == "trl 1.13.0 is installed beside verl"


def test_checks_that_pass_are_kept_and_the_run_goes_on():
    gate = threading.Event()
    side = _probes(None, checks=lambda until, stop: gate.wait(10) and ("res", {"verl_validation": {"ok": True}}, []))
    assert side.thread.is_alive() and side.stop_reason() is None  # the run goes on while they work
    gate.set()
    assert side.result(time.monotonic() + 30, flow.Timings()) is None
    assert side.stop_reason() is None and side.checked[1] == {"verl_validation": {"ok": True}}


def test_checks_that_cannot_run_stop_the_run_saying_why():
    def broken(until, stop):
        raise OSError("[Errno 24] Too many open files")

    side = _probes(None, checks=broken)
    side.result(time.monotonic() + 30, flow.Timings())
    assert side.refused == ("the setup's checks beside the run could not run: OSError: [Errno 24] Too many open "
                            "files") and side.stop_reason() == beside_mod.STOPPED


def test_certify_ending_before_the_run_does_stops_the_checks_through_their_runner():
    """A signal to certify (or an error) while the checks run: `cancel` makes the runner's stop_when say so, the
    runner stops the process (and removes its container), and the thread is waited for."""
    said = []

    def checks(until, stop):
        while (reason := stop([])) is None:  # the runner asks stop_when several times a second
            time.sleep(0.05)
        said.append(reason)
        return ("res", {}, [])

    side = _probes(None, checks=checks)
    started = time.monotonic()
    side.cancel()
    assert said == [beside_mod.CANCELLED] and not side.thread.is_alive() and time.monotonic() - started < 5
