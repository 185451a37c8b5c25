"""The rollout against the trainer (certify/numerics.py) and the weight syncs (certify/syncproof.py), on the figures
real runs logged (kept logs of verl on a CPU, an H100 and two H200s) and on the witness's records."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from rocmkit.certify import metrics, numerics, syncproof
from rocmkit.certify.numerics import Band

DATA = Path(__file__).parent / "data" / "certify"


def _steps(name: str) -> dict:
    return metrics.read_console(gzip.open(DATA / name, "rt", errors="replace").read())


def _band(healthy: float, fault: float | None) -> Band:
    return Band("verl", "vllm", "cpu", "k3_kl", ((healthy, "h"),), ((fault, "f"),) if fault else ())


def test_every_band_is_measured_and_reads():
    for b in numerics.bands():
        assert b.healthy and all(v > 0 and s for v, s in b.healthy + b.faults), b
        assert b.limit is None or b.healthy_max < b.limit < b.fault_min


def test_the_limit_lies_half_way_between_healthy_and_broken_on_a_log_scale():
    assert _band(1e-6, 1e-2).limit == pytest.approx(1e-4)
    assert _band(1e-6, None).limit is None  # no fault measured: reported, not judged
    assert _band(1e-2, 1e-6).limit is None  # faults that do not separate from health judge nothing


def test_the_sglang_run_reads_every_step_and_is_reported_without_a_measured_fault():
    doc = numerics.judge(_steps("verl-sglang-h200x2-tp2.log.gz"), engine="verl", rollout="sglang", device="gpu")
    assert [r["step"] for r in doc["per_step"]] == list(range(1, 17))
    assert doc["figure"] == "k3_kl" and doc["worst"] == pytest.approx(2.704e-05, rel=1e-3)
    assert doc["per_step"][0]["pearson"] == pytest.approx(0.99998, abs=1e-5)
    band = numerics.find_band("verl", "sglang", "gpu", "k3_kl")
    if band.limit is None:
        assert doc["status"] == "reported" and "reported, not judged" in doc["summary"]
        (c,) = numerics.checks(doc)
        assert c["passed"] and not c["required"]


def test_the_padded_vocabulary_shows_from_the_first_step_as_a_normalisation_difference(monkeypatch):
    """The built-in model once had 384 output rows for 304 tokens; verl's vLLM rollout masks the rows beyond the
    tokenizer, the trainer does not: every sequence's log-perplexity differed by ln(384/304) (the kept CPU and H100
    runs). The judge says it from the first step, and names the normalisation, not the sync."""
    monkeypatch.setattr(numerics, "find_band", lambda *a: _band(1e-4, 1e-2))
    for log in ("verl-cpu-pass.log.gz", "verl-h100-tiny-graphs.log.gz"):
        steps = _steps(log)
        doc = numerics.judge(steps, engine="verl", rollout="vllm", device="cpu")
        assert doc["status"] == "out of band" and doc["onset"] == "first step", log
        assert "different sets of tokens" in doc["likely"], log
        assert steps[1]["rollout_corr/log_ppl_diff"] == pytest.approx(0.2336, abs=0.012)  # ln(384/304)
        (c, *_) = numerics.checks(doc)
        assert not c["passed"] and c["required"] and "first step" in c["detail"]


def test_a_mismatch_that_begins_after_the_first_update_names_the_weight_sync(monkeypatch):
    monkeypatch.setattr(numerics, "find_band", lambda *a: _band(1e-4, 1e-2))
    steps = {1: {"rollout_corr/k3_kl": 2e-6}, 2: {"rollout_corr/k3_kl": 0.05}, 3: {"rollout_corr/k3_kl": 0.2}}
    doc = numerics.judge(steps, engine="verl", rollout="vllm", device="cpu")
    assert doc["onset"] == "after step 1" and "weight sync" in doc["likely"] and doc["worst_step"] == 3


def test_a_first_step_mismatch_lists_what_each_side_used(monkeypatch):
    monkeypatch.setattr(numerics, "find_band", lambda *a: _band(1e-4, 1e-2))
    steps = {1: {"rollout_corr/k3_kl": 0.03}, 2: {"rollout_corr/k3_kl": 0.03}}
    doc = numerics.judge(steps, engine="verl", rollout="vllm", device="gpu",
                         context={"rollout dtype": "bfloat16", "KV cache dtype": "fp8", "graphs": None})
    assert "rollout's numerics" in doc["likely"] and doc["likely"].endswith("used rollout dtype bfloat16, KV cache "
                                                                            "dtype fp8")


def test_trl_is_judged_by_its_log_prob_difference_and_a_run_without_figures_is_not_measured():
    steps = {1: {"sampling/sampling_logp_difference/mean": 0.01, "sampling/sampling_logp_difference/max": 0.2}}
    doc = numerics.judge(steps, engine="trl", rollout="vllm", device="cpu")
    assert doc["figure"] == "logp_diff_mean" and doc["worst"] == 0.01
    none = numerics.judge({1: {"loss": 1.0}}, engine="trl", rollout=None, device="cpu")
    assert none["status"] == "not measured" and numerics.checks(none) == []


def _sent(sync, tensors):
    return {"side": "trainer", "pid": 1, "sync": sync, "tensors": tensors}


def _got(sync, tensors, model_sum, pid=2, rank=0):
    return {"side": "rollout", "pid": pid, "sync": sync, "tensors": tensors, "model_sum": model_sum, "rank": rank}


W1 = {"model.layers.0.mlp.w": 1.5, "model.layers.1.mlp.w": -2.0, "model.embed_tokens.weight": 0.25}
W2 = {k: v + 0.125 for k, v in W1.items()}


def test_a_sync_that_carried_everything_is_proven():
    doc = syncproof.judge([_sent(1, W1), _got(1, W1, 10.0), _sent(2, W2), _got(2, W2, 10.5)])
    assert doc["observed"] and not doc["problems"] and doc["syncs"] == 2 and doc["tensors"] == 3
    assert syncproof.check(doc)["passed"]


def test_a_sync_that_loaded_nothing_fails_naming_it():
    doc = syncproof.judge([_sent(1, W1), _got(1, W1, 10.0), _sent(2, W2), _got(2, {}, 10.0)])
    assert doc["summary"] == "weight sync 2 (after step 1): the trainer sent 3 tensors and the rollout loaded none"
    assert not syncproof.check(doc)["passed"]


def test_a_sync_that_skipped_a_layer_names_its_tensors():
    part = {k: v for k, v in W2.items() if "layers.1." not in k}
    doc = syncproof.judge([_sent(1, W1), _got(1, W1, 10.0), _sent(2, W2), _got(2, part, 10.3)])
    assert "did not load 1 of the 3 tensors the trainer sent: model.layers.1.mlp.w" in doc["summary"]


def test_changed_values_and_an_unchanged_model_are_named():
    bent = {**W2, "model.layers.0.mlp.w": 1.0}
    doc = syncproof.judge([_sent(1, W1), _got(1, W1, 10.0), _sent(2, W2), _got(2, bent, 10.0)])
    whats = [p["what"] for p in doc["problems"]]
    assert any("other values than the trainer sent: model.layers.0.mlp.w" in w for w in whats)
    assert any("model did not change" in w for w in whats)


def test_two_rollout_workers_are_named_apart_and_a_missing_receiver_is_a_failure():
    doc = syncproof.judge([_sent(1, W1), _got(1, W1, 1.0, pid=2, rank=0), _got(1, {}, 1.0, pid=3, rank=1),
                           _sent(2, W2)])
    whats = [p["what"] for p in doc["problems"]]
    assert "the trainer sent 3 tensors and rollout worker 1 loaded none" in whats
    assert "the trainer sent 3 tensors and no rollout worker received the sync" in whats


def test_a_watched_rollout_that_never_synced_fails_and_an_unwatched_run_is_not_judged(tmp_path):
    (tmp_path / "sync-7.jsonl").write_text('{"side": "rollout", "pid": 7, "installed": true}\n{"side": "rol')
    doc = syncproof.judge(syncproof.read(tmp_path))
    assert doc["observed"] and doc["summary"].startswith("no weight sync reached the rollout")
    empty = syncproof.judge(syncproof.read(tmp_path / "absent"))
    assert not empty["observed"] and syncproof.check(empty) is None


def test_the_bands_are_what_the_kept_runs_measured():
    """rocmkit/resources/numerics_bands.toml is benchmarks/numerics_bands.py's output over the kept runs, and the
    certification guide's table is the bands' (numerics.bands_markdown)."""
    from scriptmodule import REPO, load

    bands_file = REPO / "rocmkit" / "resources" / "numerics_bands.toml"
    assert bands_file.read_text() == load("benchmarks/numerics_bands.py").toml(), \
        "stale: python benchmarks/numerics_bands.py > rocmkit/resources/numerics_bands.toml"
    assert numerics.bands_markdown() in (REPO / "docs" / "guides" / "certification.md").read_text(), \
        "the guide's bands table is stale: paste numerics.bands_markdown() under 'The bands'"


def test_no_figure_is_worded_with_a_pipe_that_would_split_the_certificates_table():
    assert not [what for _, what in numerics.FIGURES.values() if "|" in what]


def test_the_kept_h100_job_with_an_fp8_kv_cache_is_judged_in_band_and_its_syncs_proven():
    """certify --script of tests/data/certify_job/ with `engine_kwargs.vllm.kv_cache_dtype=fp8` on one H100
    (2026-12-07, benchmarks/gpu_numerics/go.sh job-fp8kv): random weights, so learning is not judged and the
    numerics and the sync witness are the job's evidence. Its log and witness records, judged again, give what its
    certificate says."""
    import json
    kept = DATA / "verl-h100-job-fp8kv"
    cert = json.loads((kept / "certificate.json").read_text())
    assert cert["settings"]["learning_required"] is False
    doc = numerics.judge(_steps("verl-h100-job-fp8kv/run.log.gz"), engine="verl", rollout="vllm", device="gpu")
    assert [r["step"] for r in doc["per_step"]] == [1, 2, 3, 4]
    assert doc["status"] == "in band" and doc["worst"] == pytest.approx(cert["numerics"]["worst"])
    assert cert["numerics"]["context"]["KV cache dtype"] == "fp8"
    sync = syncproof.judge(syncproof.read(kept / "sync"))
    assert sync["summary"] == cert["numerics"]["sync"]["summary"] and sync["syncs"] == 5 and not sync["problems"]
    assert {c["name"]: (c["passed"], c["required"]) for c in cert["checks"]}["weight sync reached the rollout"] \
        == (True, True)
    assert "the rollout generated with the weights the trainer trained at every sync" in \
        (kept / "certificate.md").read_text()
