"""What `benchmarks/gpu_check.py` recorded on lent GPUs (tests/data/certify/gpu-check/: README.md says where and when),
judged again here: CI has no GPU, so these documents are how the GPU path's last real run stays in view.

Each certificate passed with the options a user types (probes on), its probe figures are in it and judged, the
verl runs trained on as many GPUs as they asked for (with the all-reduce measured across two), the reward rose,
and rocmkit's own judge reaches the same verdict from the certificate's steps."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from rocmkit.certify.certificate import markdown, upgrade
from rocmkit.certify.judge import RunStatus, judge
from rocmkit.certify.engines.verl import report as verl_report

DATA = Path(__file__).resolve().parent / "data" / "certify" / "gpu-check"
SUMMARY = json.loads((DATA / "summary.json").read_text())
RUNS = {r["name"]: r for r in SUMMARY["runs"]}
CERTIFICATES = sorted(n for n in RUNS if n != "doctor" and (DATA / f"{n}.json").exists())


def doc(name: str) -> dict:
    return json.loads((DATA / f"{name}.json").read_text())


def test_every_run_of_the_check_was_made_and_passed():
    core = {"doctor", "verl-1gpu", "verl-2gpu", "trl-1gpu"}
    assert core <= set(RUNS)
    assert {n: RUNS[n]["verdict"] for n in core} == dict.fromkeys(core, "pass")
    # every run that left a certificate passed; one the script's own --deadline cut short (exit 124) left none,
    # and the data's README says what it reached
    for name, r in RUNS.items():
        if name == "doctor":
            continue
        if (DATA / f"{name}.json").exists():
            assert (r["exit"], r["verdict"]) == (0, "pass"), name
        else:
            assert r["exit"] == 124 and name in (DATA / "README.md").read_text(), name
    # the commands are a user's, default options included: no --no-probes, no --steps
    for r in RUNS.values():
        assert "--no-probes" not in r["command"] and "--steps" not in r["command"]


@pytest.mark.parametrize("name", CERTIFICATES)
def test_each_certificate_passes_again_under_the_judge(name):
    c = upgrade(doc(name))
    assert c["schema"] == "rocmkit.certificate/v2" and c["verdict"] == "pass"
    steps = {r["step"]: {k: v for k, v in r.items() if k != "step"} for r in c["metrics"]["per_step"]}
    v = judge(steps, c["settings"]["steps"], RunStatus(c["run"]["status"]), require_learning=True,
              probes=c["probes"], extra=[x for x in c["checks"] if not x["name"].startswith(("run ", "all ", "losses",
                                                                                           "reward", "probe."))])
    assert v.passed
    assert c["metrics"]["reward"]["last"] - c["metrics"]["reward"]["first"] >= 0.3
    assert markdown(c).startswith("# rocmkit certificate: PASS")


@pytest.mark.parametrize("name", CERTIFICATES)
def test_the_probes_ran_where_the_run_happened(name):
    c = doc(name)
    gpus = c["settings"]["gpus"]
    figures = c["probes"]["figures"]
    assert figures["available"] and len(figures["gpus"]) == gpus
    ids = {f["id"]: f["status"] for f in c["probes"]["findings"]}
    assert {"probe.gemm.bf16", "probe.hbm", "probe.h2d", "probe.d2h"} <= set(ids)
    assert not [i for i, s in ids.items() if s in ("fail", "warn")]
    if gpus > 1:
        assert figures["allreduce"]["figure"]["value"] > 0 and ids["probe.allreduce"] == "pass"
    # every probe finding is a check of the certificate
    assert {x["name"] for x in c["checks"]} >= set(ids)


def test_the_verl_runs_trained_on_the_gpus_they_asked_for_in_the_layout_asked():
    verl = [n for n in CERTIFICATES if n.startswith("verl-")]
    assert {"verl-1gpu", "verl-2gpu"} <= set(verl)
    for name in verl:
        c = doc(name)
        gpus, tp = c["settings"]["gpus"], c["settings"]["rollout_tp"]
        assert c["engine"] == "verl" and name.startswith(f"verl-{gpus}gpu")
        assert len(c["device"].split(", ")) == gpus and c["setup"]["devices"]["visible"] >= gpus
        assert c["run"]["status"] == "finished" and len(c["metrics"]["per_step"]) == c["settings"]["steps"]
        lay = c["engine_run"]["layout"]
        if c["settings"]["backend"] == "megatron":  # Megatron's own attention (TransformerEngine's), its TP groups
            mp = c["settings"]["megatron"]["tp"] * c["settings"]["megatron"]["pp"]
            assert c["engine_run"]["attention"] is None and lay["megatron"]["dp"] == lay["data_parallel"] == gpus // mp
        else:
            assert c["engine_run"]["attention"]["chosen"] in ("sdpa", "flash_attention_2")
            assert lay["data_parallel"] == gpus
        assert (lay["rollout_replicas"], lay["rollout_tp"]) == (gpus // tp, tp)
        assert f"actor_rollout_ref.rollout.tensor_model_parallel_size={tp}" in c["settings"]["command"]


def test_verl_megatron_trained_over_tp_2_with_transformer_engine_layers():
    # --backend megatron --tp 2 on two H100s: one TP group of 2 (DP 1), the model built by mbridge from
    # TransformerEngine layer specs, TE choosing its attention (attention_backend=auto: no flash-attn there)
    c = doc("verl-2gpu-megatron-tp2")
    assert c["settings"]["backend"] == "megatron" and c["settings"]["megatron"] == {"tp": 2, "pp": 1}
    assert c["engine_run"]["layout"]["megatron"] == {"tp": 2, "pp": 1, "dp": 1}
    command = c["settings"]["command"]
    assert {"model_engine=megatron", "actor_rollout_ref.actor.megatron.tensor_model_parallel_size=2",
            "actor_rollout_ref.actor.megatron.vanilla_mbridge=True",
            "actor_rollout_ref.actor.megatron.override_transformer_config.attention_backend=auto"} <= set(command)
    packages = c["target"]["packages"]
    assert (packages["megatron-core"], packages["mbridge"], packages["transformer-engine"]) == ("0.16.1", "0.15.1",
                                                                                                 "2.20.2")
    log = gzip.open(DATA / "verl-2gpu-megatron-tp2.run.log.gz", "rt").read()
    assert verl_report.megatron_model(log) == {"transformer_impl": "transformer_engine", "attention_backend": "auto",
                                               "sequence_parallel": True, "transformer_engine": True}
    # both actor ranks reported the model config, and the rollout took 17 weight syncs from them
    assert log.count("TF config: TransformerConfig(") == 2
    assert c["engine_run"]["sleep_mode"]["weight_syncs"] == 2 * (c["settings"]["steps"] + 1)


def test_each_rollout_replica_slept_and_synced_every_step_and_is_counted_apart():
    for name in (n for n in CERTIFICATES if n.startswith("verl-")):
        c = doc(name)
        sm, lay = c["engine_run"]["sleep_mode"], c["engine_run"]["layout"]
        assert not sm["folded_by_ray"] and len(sm["per_replica"]) == lay["rollout_replicas"]
        steps = c["settings"]["steps"]
        # one sleep at start-up and one a step, per replica, said by each of its TP workers, and one weight sync
        # each time it wakes: none is lost to Ray's log folding
        assert set(sm["per_replica"].values()) == {(steps + 1) * lay["rollout_tp"]}
        assert set(sm["weight_syncs_per_replica"].values()) == {steps + 1}
        assert sm["sleeps"] == (steps + 1) * lay["rollout_tp"] * lay["rollout_replicas"]
        if lay["rollout_replicas"] > 1:
            assert set(c["run"]["replica_timelines"]) >= set(sm["per_replica"])


def test_the_doctor_measured_every_visible_gpu_and_no_probe_failed():
    d = doc("doctor")
    probes = {f["id"]: f for f in d["findings"] if f["id"].startswith("probe")}
    assert probes and not [i for i, f in probes.items() if f["status"] in ("fail", "warn")]
    assert probes["probe.gemm.bf16"]["status"] == "pass"
    visible = SUMMARY["gpus"]
    assert len(probes["probe.gemm.bf16"]["evidence"]["gpus"]) == visible
    if visible > 1:
        assert probes["probe.allreduce"]["status"] == "pass" and probes["probe.p2p"]["status"] == "pass"
