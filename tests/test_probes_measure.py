"""The measuring side of level 2, run for real on the CPU (same code paths as on a GPU: torch ops, the
sampling loop, spawned all-reduce ranks over gloo). GPU runs are in test_probes.py under the `gpu` marker."""

from __future__ import annotations

import itertools
import os

import pytest

from rocmkit.host.probes import measure as pm

if os.environ.get("ROCMKIT_REQUIRE_PROBES") == "1":  # CI provisioned torch (45-probes.sh): no skipping
    import torch
else:
    torch = pytest.importorskip("torch", reason="the probes measure through PyTorch (pip install torch)")
CPU = torch.device("cpu")


def _clock(step: float):
    t = itertools.count()
    return lambda: next(t) * step


def test_sample_stops_as_soon_as_steady():
    samples, stable, early = pm.sample(lambda reps: reps * 0.002, work=1.0, budget_s=100, warmup_s=0,
                                       clock=_clock(0.01))
    assert (len(samples), stable, early) == (2 * pm.WINDOW, True, True)
    assert samples[0] == pytest.approx(500.0)  # work / seconds per op, whatever the batch size


def test_sample_runs_its_slice_when_noisy_and_says_so():
    noisy = itertools.cycle([1.0, 1.5])
    samples, stable, early = pm.sample(lambda reps: reps * 0.001 * next(noisy), work=1.0, budget_s=1.0, warmup_s=0,
                                       clock=_clock(0.05))
    assert not stable and not early
    assert 1 < len(samples) < pm.MAX_SAMPLES  # stopped by the budget, not by the sample cap


def test_sample_decisions_go_through_agree():
    """Ranks of a collective must stop together: a peer that is over budget stops this rank too."""
    calls = []

    def agree(values):
        calls.append(values)
        return [values[0], 1.0]  # the peer says: time is up

    samples, stable, _ = pm.sample(lambda reps: reps * 0.001, work=1.0, budget_s=100, warmup_s=100, agree=agree,
                                   clock=_clock(0.001))
    assert len(samples) == 1 and not stable and len(calls) == 2


def test_steady_needs_a_flat_window_that_stopped_climbing():
    climbing = [1000, 1040, 1080, 1120, 1160, 1180, 1185, 1190, 1195, 1200]  # last 5 within 3%, still rising
    assert not pm.steady(climbing) and not pm.steady(climbing[-5:])
    assert pm.steady(climbing + [1200, 1198, 1203, 1201, 1199])
    assert not pm.steady([100, 200] * 5)


def test_figure_keeps_the_steady_window():
    fig = pm.Figure(unit="GB/s", samples=[10, 50, 100, 101, 99, 100, 100], stable=True, seconds=1.0, early=True)
    assert fig.kept == [100, 101, 99, 100, 100] and fig.value == 100 and fig.spread == pytest.approx(0.02)
    doc = fig.to_json()
    assert doc["value"] == 100 and doc["n"] == 7 and doc["samples"][0] == 10 and doc["stopped_early"]
    whole = pm.Figure(unit="GB/s", samples=[10, 50, 100], stable=False, seconds=1.0)
    assert whole.value == 50  # a probe that ran its slice keeps every sample


@pytest.mark.parametrize("dtype,fp8", [("bf16", None), ("fp8", "float8_e4m3fn"), ("fp8", "float8_e4m3fnuz")])
def test_gemm_measures_flops(dtype, fp8):
    try:
        fig = pm.gemm(CPU, n=64, dtype=dtype, fp8_dtype=fp8, budget_s=0.3, warmup_s=0.01)
    except pm.ProbeError as exc:  # torch before 2.13 has no fnuz in its CPU _scaled_mm
        if fp8 == "float8_e4m3fnuz" and "e4m3fnuz" in str(exc):
            pytest.skip(f"torch {torch.__version__} CPU: {exc}")
        raise
    assert fig.unit == "TFLOP/s" and fig.value > 0 and fig.params["m"] == 64
    assert fig.params["dtype"] == (fp8 or "bfloat16")


def test_gemm_unknown_fp8_flavour_is_a_probe_error():
    with pytest.raises(pm.ProbeError, match="float8_nope"):
        pm.gemm(CPU, n=16, dtype="fp8", fp8_dtype="float8_nope")


def test_copies_measure_bandwidth():
    fig = pm.device_copy(CPU, nbytes=1 << 20, budget_s=0.2, warmup_s=0.01)
    assert fig.unit == "GB/s" and fig.value > 0 and fig.params == {"bytes": 1 << 20}
    for direction in ("h2d", "d2h"):
        fig = pm.host_copy(CPU, direction=direction, nbytes=1 << 20, budget_s=0.2, warmup_s=0.01)
        assert fig.value > 0 and fig.params == {"bytes": 1 << 20, "pinned": False}


def test_busbw_factor_is_nccl_tests():
    assert [pm.busbw_factor(n) for n in (2, 4, 8)] == [1.0, 1.5, 1.75]


@pytest.mark.slow
def test_allreduce_spawns_ranks_and_checks_the_sum():
    fig = pm.allreduce(["cpu", "cpu"], nbytes=1 << 16, budget_s=0.5, warmup_s=0.05, timeout_s=60)
    assert fig.unit == "GB/s" and fig.value > 0 and fig.seconds > 0
    assert fig.params["ranks"] == 2 and fig.params["backend"] == "gloo" and fig.params["correct_sum"] is True


@pytest.mark.slow
def test_allreduce_rank_that_dies_is_a_probe_error_not_a_hang():
    bad = "cuda:0" if not torch.cuda.is_available() else f"cuda:{torch.cuda.device_count()}"
    with pytest.raises(pm.ProbeError, match="all-reduce across 2 devices failed"):
        pm.allreduce(["cpu", bad], nbytes=1 << 12, budget_s=0.2, timeout_s=60)


def test_allreduce_needs_two_devices():
    with pytest.raises(pm.ProbeError, match="at least 2"):
        pm.allreduce(["cpu"], nbytes=1 << 12)
