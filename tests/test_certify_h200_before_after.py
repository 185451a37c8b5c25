"""The same-machine comparison of issue 48, kept: on one H200 (nvidia-h200: torch 2.11.0+cu130, verl 0.9.1, vLLM
0.24.0, Ray 2.60, carried by ../shared/tools/gpu-verl), one machine session, the default command a user types
(`certify --host --engine verl --gpus 1 --steps 16`, GPU probes on) through `benchmarks/certify_overhead.py
--with-probes`, each with a fresh VLLM_CACHE_ROOT:

- verl-h200-fe9814a.json: rocmkit at fe9814a (when the issue was filed): no start-up cuts, no inspection beside the
  setup; 324.4 s whole
- verl-h200-inspection.json: rocmkit with the start-up cuts and vLLM's model inspection beside the setup; 268.3 s

and, for issue 58 (the GPU probes beside verl's start-up), the default command `certify --host --engine verl --gpus 1`
on one H200 with the learning proof's early stop, before and after:

- verl-h200-early-stop.json: main cdb0304 (2026-11-28), the probes in series before the run; 293.4 s whole
- verl-h200-probes-beside.json: main cb854d6 (2026-11-29, the next day, same machine kind, through
  `benchmarks/time_to_verdict.py --gpus 1 --cases healthy`), the probes beside verl's start-up; 269.3 s whole
- verl-h200-default-2026-11-29.json: main 6227de6, the same command on the same machine kind the day after; 310.5 s

- verl-h200-head-ab484dc.json: main ab484dc, the default command the next session (2026-11-29); 271.2 s whole

and the setup in two parts (the second beside verl's start-up), in one machine session, in this order, through
`benchmarks/gpu_default/certify_default.sh NAME [ROCMKIT_DIR]` (fresh vLLM and Triton caches each):

- verl-h200-one-session-two-part-a.json, -b.json: main 38a3330, the first and second runs of the session; 300.7 and
  305.1 s whole
- verl-h200-one-session-6227de6.json: main 6227de6 (the setup in one part, before the run), the session's fifth run
  (two jobs ran between); 264.5 s whole

Both judged again by today's judge; the split is the benchmark's own (certify_overhead.from_timeline)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import scriptmodule

from rocmkit.certify.certificate import markdown
from rocmkit.certify.judge import RunStatus, judge
from rocmkit.certify.engines.verl import report as verl_report

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data" / "certify"


def cert(name: str) -> dict:
    return json.loads((DATA / f"verl-h200-{name}.json").read_text())


@pytest.fixture(scope="module")
def bench():
    return scriptmodule.load("benchmarks/certify_overhead.py")


@pytest.mark.parametrize("name", ["fe9814a", "inspection"])
def test_both_runs_pass_again_under_the_judge(name):
    c = cert(name)
    assert c["verdict"] == "pass" and c["device"] == "NVIDIA H200" and c["settings"]["steps"] == 16
    steps = {r["step"]: {k: v for k, v in r.items() if k != "step"} for r in c["metrics"]["per_step"]}
    v = judge(steps, 16, RunStatus(c["run"]["status"]), require_learning=True,
              extra=[verl_report.sleep_pool_check(c["setup"])])
    assert v.passed, v.checks
    assert c["probes"]["figures"]  # the default command: the GPU probes ran
    assert markdown(c).startswith("# rocmkit certificate: PASS")


def test_the_inspection_ran_beside_the_setup_and_the_rollout_started_sooner(bench):
    before, after = cert("fe9814a"), cert("inspection")
    assert "smoke_cuts" not in before["settings"] and len(after["settings"]["smoke_cuts"]) == 4
    mi = after["engine_run"]["model_inspection"]
    assert mi["status"] == "inspected" and mi["architecture"] == "Qwen2ForCausalLM"
    assert mi["wait_s"] < 5 < mi["wall_s"]  # it ran beside the setup, which waited seconds for it at its end
    assert "vLLM's model inspection of Qwen2ForCausalLM: done during the setup" in markdown(after)
    parts = {name: dict(bench.from_timeline(c["timeline"], c["timings"]["run_s"], 16)) for name, c in
             (("before", before), ("after", after))}
    vllm = "starting the vLLM engine"
    assert parts["after"][vllm] < parts["before"][vllm] - 30  # 101.2 -> 50.1 s
    whole = {k: c["timings"]["whole_s"] for k, c in (("before", before), ("after", after))}
    assert whole["after"] < whole["before"] - 40  # 323.8 -> 266.4 s


PROBES = ("probe.gemm.bf16", "probe.gemm.fp8", "probe.hbm", "probe.h2d", "probe.d2h")


def _figure(c: dict, probe: str) -> float:
    """A probe's figure from its finding's title ("bf16 GEMM 675 TFLOP/s: ...")."""
    title = next(f["title"] for f in c["probes"]["findings"] if f["id"] == probe)
    return float(title.split(":")[0].split()[-2])


def test_the_probes_beside_verls_start_up_measured_the_same_and_took_no_time_in_series():
    """Issue 58: the same probes, in series before the run and beside its start-up, one H200 each: each figure
    within 3 % of the other (the beside run measured nobody else's load: no overlap), rocmkit's own seconds before
    the run down by the probes' 16 s, the whole by about as much, and verl's start-up not slowed by them."""
    before, after = cert("early-stop"), cert("probes-beside")
    assert before["verdict"] == after["verdict"] == "pass" and "overlap" not in after["probes"]
    for probe in PROBES:
        a, b = _figure(before, probe), _figure(after, probe)
        assert abs(b - a) / a < 0.03, (probe, a, b)  # 675 -> 689 TFLOP/s, 4254 -> 4264 GB/s, ...
    tb, ta = before["timings"], after["timings"]
    own_before, own_after = tb["setup_s"] + tb["probes_s"], ta["setup_s"] + ta.get("probes_s", 0)
    assert own_after < own_before - 15 and ta["probes_beside_s"] > 15  # 41.2 -> 25.0 s; the probes took 16.4 s
    assert ta["whole_s"] < tb["whole_s"] - 15  # 293.4 -> 269.3 s
    trainer = {n: next(e["at_s"] for e in c["timeline"] if e["detail"] == "starting the trainer")
               for n, c in (("before", before), ("after", after))}
    assert abs(trainer["after"] - trainer["before"]) < 3  # Ray's start in verl: 24.9 -> 25.4 s
    assert "- rocmkit before the run: setup 25.0 s; GPU probes 16.4 s, beside the run's start-up" in markdown(after)


def test_the_same_default_command_the_next_day_passed_with_the_same_figures_and_a_slower_start():
    """verl-h200-default-2026-11-29.json: the default command at main 6227de6 (the run's processes now die with
    certify: PR_SET_PDEATHSIG), on the same machine kind a day after verl-h200-probes-beside.json. Same verdict and
    step, the probe figures within 5 % (bf16 GEMM 689 -> 668 TFLOP/s: not the same GPU, maybe); the whole took 310.5 s instead of 269.3 s, most of it in verl's own start-up (the first
    weight sync at 205 s instead of 172 s). A day apart, the same path differs by 15 %: a before/after comparison
    of rocmkit's share needs both runs in one machine session."""
    before, after = cert("probes-beside"), cert("default-2026-11-29")
    assert after["verdict"] == "pass" and after["run"]["ended_by"].startswith("learning proven at step 8")
    assert "overlap" not in after["probes"]
    for probe in PROBES:
        a, b = _figure(before, probe), _figure(after, probe)
        assert abs(b - a) / a < 0.05, (probe, a, b)
    sync = {n: next(e["at_s"] for e in c["timeline"] if e["detail"] == "step 1: first weight sync")
            for n, c in (("before", before), ("after", after))}
    grew = after["timings"]["whole_s"] - before["timings"]["whole_s"]
    assert sync["after"] - sync["before"] > 0.75 * grew > 0  # verl's start-up, not rocmkit's share, took the time
    own = {n: c["timings"]["setup_s"] for n, c in (("before", before), ("after", after))}
    assert own["after"] - own["before"] < 5  # 25.0 -> 29.0 s


def test_the_setup_in_two_parts_cut_rocmkits_share_by_two_seconds_and_did_not_make_the_default_faster():
    """Issue 58, one session: the setup's second part beside verl's start-up took 2 s off rocmkit's share in series
    (22.8 -> 20.9 and 20.6 s: the first part now pays transformers' import in the built-in model's step, which vLLM's
    import paid before), and both runs with it took longer than the one without: verl's Ray start 21.9 -> 24.6 and
    28.7 s while the checks ran beside it, the first weight sync 170 -> 198 and 208 s. The runs were not interleaved
    (two parts first, one part last): the order may explain part of it, and the gain the split was for is not
    there. The probe figures agree within 3 % across the three runs, none overlapped."""
    one = cert("one-session-6227de6")
    two = [cert("one-session-two-part-a"), cert("one-session-two-part-b")]
    for c in [one, *two]:
        assert c["verdict"] == "pass" and c["run"]["ended_by"].startswith("learning proven at step 8")
        assert "overlap" not in c["probes"]
        for probe in PROBES:
            a, b = _figure(one, probe), _figure(c, probe)
            assert abs(b - a) / a < 0.03, (probe, a, b)
    assert "checks_beside_s" not in one["timings"] and all(c["timings"]["checks_beside_s"] > 20 for c in two)
    assert all(0 < one["timings"]["setup_s"] - c["timings"]["setup_s"] < 3 for c in two)
    assert all(c["timings"]["whole_s"] > one["timings"]["whole_s"] + 30 for c in two)

    def at(c, detail):
        return next(e["at_s"] for e in c["timeline"] if e["detail"] == detail)

    assert all(at(c, "starting the trainer") > at(one, "starting the trainer") + 2 for c in two)
    assert all(at(c, "step 1: first weight sync") > at(one, "step 1: first weight sync") + 25 for c in two)
    first = two[0]["setup"]["timings"]
    assert first["model_s"] > 3 * one["setup"]["timings"]["model_s"]  # 3.1 -> 10.4 s: transformers' import moved
    assert "- rocmkit before the run: setup 20.9 s; beside the run's start-up: GPU probes 17.3 s, the setup's " \
           "checks 25.8 s" in markdown(two[0])


def test_interleaved_the_setup_in_series_took_5_to_7_s_and_the_whole_did_not_shrink_with_it():
    """Issue 58, one session, four runs in this order: after (main 20a2583: the setup's first part in series, the
    built-in model written without transformers, the attention probe without transformers when flash_attn is
    absent, the second part beside verl's start-up), before (main 6227de6: the setup in one part), after, before.
    rocmkit's own share in series 6.5 and 4.8 s against 23.0 and 24.6 s (goal: at most 10 s); the whole 275.2,
    265.4, 243.6, 251.0 s: the first run of the session was the slowest, and the two after runs took verl's run
    5 and 16 s longer to its first weight sync than the before runs beside them, which took back most of what the
    setup gave. The probe figures agree within 4 % (fp8 GEMM varied most, in both), none overlapped."""
    runs = {n: cert(f"interleaved-{n}") for n in ("after-1", "before-1", "after-2", "before-2")}
    for c in runs.values():
        assert c["verdict"] == "pass" and c["run"]["ended_by"].startswith("learning proven at step 8")
        assert "overlap" not in c["probes"]
        for probe in PROBES:
            a, b = _figure(runs["before-1"], probe), _figure(c, probe)
            assert abs(b - a) / a < 0.04, (probe, a, b)  # fp8 GEMM 1203-1249 TFLOP/s, before and after alike
    after, before = [runs["after-1"], runs["after-2"]], [runs["before-1"], runs["before-2"]]
    own = {n: c["timings"]["setup_s"] + c["timings"]["judge_s"] + c["timings"].get("probes_s", 0)
           for n, c in runs.items()}
    assert all(own[n] < 7 for n in ("after-1", "after-2")) and all(own[n] > 22 for n in ("before-1", "before-2"))
    for c in after:  # transformers imported nowhere in the first part: the model 0.1-0.2 s, the attention 0 s
        t = c["setup"]["timings"]
        assert t["model_s"] < 0.5 and t["attention_s"] < 0.5 and c["timings"]["checks_beside_s"] > 20
    whole = [c["timings"]["whole_s"] for c in runs.values()]
    assert max(whole) == whole[0]  # the session's first run
    assert abs(sum(c["timings"]["whole_s"] for c in after) - sum(c["timings"]["whole_s"] for c in before)) < 5

    def sync(c):
        return next(e["at_s"] for e in c["timeline"] if e["detail"] == "step 1: first weight sync")

    assert sync(runs["after-2"]) > sync(runs["before-1"]) > sync(runs["before-2"])  # 174.4, 169.4, 158.8 s
    assert "- rocmkit before the run: setup 4.8 s; beside the run's start-up: GPU probes 17.2 s, the setup's " \
           "checks 25.2 s" in markdown(runs["after-2"])


def test_main_at_ab484dc_the_default_command_passed_with_rocmkits_share_under_ten_seconds():
    """Issue 58, the next session (2026-11-29, the session's first run, fresh caches): the default command with
    main at ab484dc (after the interleaved runs, the watchdog's and the cause's changes of issue 57 on the same
    path) through `certify_default.sh after`. PASS at step 8; rocmkit's own share in series 6.4 s (setup 6.36 s,
    judge 0.01 s; the probes and the setup's checks beside verl's start-up); the whole 271.2 s; the probe figures
    within 5 % of the interleaved runs' (another machine of the same kind: host-to-device 52.9 against 55.5 GB/s
    varied most)."""
    c, before = cert("head-ab484dc"), cert("interleaved-before-1")
    assert c["verdict"] == "pass" and c["run"]["ended_by"].startswith("learning proven at step 8")
    t = c["timings"]
    assert t["setup_s"] + t["judge_s"] + t.get("probes_s", 0) < 7 and t["probes_beside_s"] > 15
    assert "overlap" not in c["probes"]
    for probe in PROBES:
        a, b = _figure(before, probe), _figure(c, probe)
        assert abs(b - a) / a < 0.05, (probe, a, b)
    assert "- rocmkit before the run: setup 6.4 s; beside the run's start-up: GPU probes 16.5 s, the setup's " \
           "checks 28.6 s" in markdown(c)
