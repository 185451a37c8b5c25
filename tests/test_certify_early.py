"""A verdict as soon as it is known (certify/early.py): the kept runs as the rule's evidence, a kept passing log
replayed through the watchdog until learning is proven, and the stop read as a finished, passing run."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from click.testing import CliRunner

from rocmkit.certify import early, engines, flow, metrics, outcome
from rocmkit.certify.judge import REWARD_KEYS, RunStatus, judge
from rocmkit.certify.settings import Settings
from rocmkit.certify.watchdog import Watch
from rocmkit.progress import Display

DATA = Path(__file__).parent / "data"
KEPT = sorted([*DATA.glob("certify/*.json"), *DATA.glob("certify/gpu-check/*.json"), *DATA.glob("crash/*.json")])


def kept_passing_runs() -> dict[str, list[dict]]:
    out = {}
    for path in KEPT:
        cert = json.loads(path.read_text())
        if isinstance(cert, dict) and cert.get("verdict") == "pass" and cert["settings"].get("learning_required"):
            out[path.name] = cert["metrics"]["per_step"]
    return out


def rewards_of(per_step: list[dict]) -> dict[int, float]:
    return {row["step"]: next(row[k] for k in REWARD_KEYS if k in row) for row in per_step}


def follow_of(watch: Watch) -> early.ProvingFollow:
    return early.ProvingFollow(Display("test", mode="plain", stream=io.StringIO()), watch)


def test_in_every_kept_passing_run_the_rule_holds_by_step_9_and_never_fails_once_it_held():
    runs = kept_passing_runs()
    assert len(runs) >= 19
    first_held = {}
    for name, per_step in runs.items():
        rewards = rewards_of(per_step)
        held = [n for n in range(early.MIN_STEPS, len(rewards) + 1)
                if early.proof({k: rewards[k] for k in range(1, n + 1)})]
        assert held and held == list(range(held[0], len(rewards) + 1)), name  # once held, held to the end
        first_held[name] = held[0]
    assert max(first_held.values()) == 9 and sorted(first_held.values()).count(8) == len(runs) - 1


def test_a_kept_passing_verl_log_replayed_stops_once_proven_at_step_8_and_not_as_a_stall():
    lines = gzip.open(DATA / "certify" / "verl-cpu-pass.log.gz", "rt").read().splitlines()
    clock = iter(range(10**7)).__next__
    follow = follow_of(Watch(16, stall_s=600, clock=clock))
    reason = None
    for line in lines:
        follow.line(line)
        if (reason := follow.tick()) is not None:
            break
    assert reason == early.REASON and follow.watch.stopped is None  # no stall, no engine error
    assert follow.proof.step == follow.watch.step == 8 and follow.proof.quarter == 2
    assert follow.proof.text().startswith("learning proven at step 8 (rule: the mean reward of the last 2 steps")
    # the judge reads the same steps and passes them: one rule for the stop and the verdict
    steps = {k: v for k, v in metrics.read_console("\n".join(lines)).items() if k <= 8}
    assert judge(steps, follow.proof.step, RunStatus.FINISHED, require_learning=True).passed


def test_a_pending_fatal_line_is_decided_before_the_proof():
    follow = follow_of(Watch(16, clock=iter(range(10**7)).__next__))
    for n in range(1, 9):
        follow.line(f"step:{n} - critic/score/mean:{0.1 * n} - actor/pg_loss:0.1")
    follow.line("Traceback (most recent call last):")
    follow.line("RuntimeError: boom")
    assert follow.tick() is None and follow.proof is None  # the engine error's grace runs first
    follow.line("step:9 - critic/score/mean:0.9 - actor/pg_loss:0.1")  # progress: the run survived it
    assert follow.tick() == early.REASON and follow.proof.step == 9


def test_no_proof_before_the_minimum_with_a_gap_or_without_learning():
    rising = {n: 0.1 * n for n in range(1, 9)}
    assert early.proof({k: v for k, v in rising.items() if k < 8}) is None
    assert early.proof({k: v for k, v in rising.items() if k != 3}) is None
    assert early.proof({n: 0.05 for n in range(1, 17)}) is None
    assert early.proof(rising).step == 8


def test_the_early_stop_is_read_as_a_finished_run_and_the_certificate_says_what_ended_it():
    run = SimpleNamespace(timed_out=False, stopped=early.REASON, returncode=None)
    assert outcome.run_status(run) is RunStatus.FINISHED
    assert outcome.run_status(SimpleNamespace(timed_out=False, stopped="stalled", returncode=None)) \
        is RunStatus.STALLED
    assert early.ended_by(16, None) == "all 16 steps"


@pytest.mark.parametrize("kw, applies", [
    ({}, True),
    ({"steps_given": True}, False),  # --steps is the user's word
    ({"data": Path("/d.parquet")}, False),  # a user's data need not learn within the smoke budget
    ({"steps": 8}, False),
    ({"engine": "miles"}, False),
])
def test_it_applies_to_the_built_in_task_with_the_steps_left_to_rocmkit(kw, applies):
    s = Settings(**{"engine": "verl", **kw})
    assert early.applies(s, engines.of(s)) is applies


def test_steps_given_on_the_command_line_are_kept(monkeypatch):
    seen = []

    def fake(s, display):
        seen.append(s)
        raise SystemExit(0)

    monkeypatch.setattr(flow, "certify", fake)
    from rocmkit.cli.certify import certify

    CliRunner().invoke(certify, ["--host", "--gpus", "0"])
    CliRunner().invoke(certify, ["--host", "--gpus", "0", "--steps", "16"])
    assert [(s.steps, s.steps_given) for s in seen] == [(16, False), (16, True)]


def test_a_step_printed_but_not_yet_filed_when_stopped_is_read_from_the_console(tmp_path):
    ws = SimpleNamespace(metrics=tmp_path / "metrics.jsonl", log=tmp_path / "run.log")
    ws.metrics.write_text("".join(json.dumps({"step": n, "data": {"reward": 0.1 * n}}) + "\n" for n in range(1, 8)))
    ws.log.write_text("step:7 - reward:9.0\nstep:8 - reward:0.8\n")
    steps = flow.read_steps(ws)
    assert sorted(steps) == list(range(1, 9)) and steps[7]["reward"] == pytest.approx(0.7)  # the file wins


def test_the_certificates_markdown_says_what_ended_the_run():
    from rocmkit.certify.certificate import markdown

    cert = json.loads((DATA / "certify" / "verl-h200-fe9814a.json").read_text())
    assert "ended by" not in markdown(cert)  # kept from before the rule: it says nothing it does not know
    cert["run"]["ended_by"] = "all 16 steps"
    assert "\n- ended by: all 16 steps\n" in markdown(cert)


def test_the_default_command_on_an_h200_stopped_at_step_8_and_passed():
    # `rocmkit certify --host --engine verl --gpus 1`, defaults and probes, on one H200 (2026-11-28): the first GPU
    # run with the proof; its certificate as written, judged again by the same rule
    cert = json.loads((DATA / "certify" / "verl-h200-early-stop.json").read_text())
    assert cert["verdict"] == "pass" and cert["run"]["status"] == "finished"
    assert cert["run"]["ended_by"].startswith("learning proven at step 8 ")
    rewards = rewards_of(cert["metrics"]["per_step"])
    assert sorted(rewards) == list(range(1, 9)) and early.proof(rewards).step == 8
    assert all(c["passed"] for c in cert["checks"])  # "all steps ran": 8 of the 8 it meant to run


def test_the_certificate_says_how_long_the_start_up_took():
    from rocmkit.certify.certificate import markdown

    cert = json.loads((DATA / "certify" / "verl-h200-early-stop.json").read_text())
    assert "\n- start-up: 177.7 s, until step 1: first weight sync\n" in markdown(cert)
    cert["timeline"] = [e for e in cert["timeline"] if e["phase"] == "start-up"]  # a run that never got further
    assert "start-up:" not in markdown(cert)
