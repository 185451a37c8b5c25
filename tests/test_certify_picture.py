"""The certificate's picture (rocmkit/certify/picture.py), drawn from real recorded certificates: verl on one H100
(tests/data/certify/verl-h100-tiny.json), verl on four H200s and TRL on one (gpu-check/), and the CPU images CI
builds (verl-cpu-image.json and trl-cpu-image.json: what .ci/image-gate.sh's `rocmkit certify --image` wrote on
2026-11-28). What is drawn is read by pure functions, tested first; the SVG is then read back as XML."""

from __future__ import annotations

import copy
import functools
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from types import SimpleNamespace

import pytest

from rocmkit.certify import picture, workspace
from rocmkit.certify.certificate import markdown
from rocmkit.certify.outcome import write_certificate

DATA = Path(__file__).parent / "data" / "certify"
SVG = "{http://www.w3.org/2000/svg}"


def load(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def stalled(cert: dict, after_s: float, quiet_s: float = 31.2) -> dict:
    """A real certificate cut where its run would have stalled: the timeline and steps before `after_s`, and the
    watchdog's stop in the phase it was in (the shape flow.py records for a stalled run)."""
    out = copy.deepcopy(cert)
    out["timeline"] = [e for e in cert["timeline"] if e["at_s"] < after_s]
    last = out["timeline"][-1]
    steps = sum(1 for e in out["timeline"] if e["phase"] == "rollout")
    out["metrics"]["per_step"] = cert["metrics"]["per_step"][:steps]
    out["metrics"]["steps"] = steps
    out["verdict"], out["exit_code"] = "fail", 1
    out["timings"]["run_s"] = after_s + quiet_s
    out["run"].update(status="stalled", stop={"reason": "stalled", "phase": last["phase"], "detail": last["detail"],
                                              "quiet_s": quiet_s})
    return out


@functools.cache
def drawn(name: str) -> str:
    """Each recorded certificate drawn once for all the tests (a drawing takes about a second)."""
    return picture.draw(load(name))


def texts(svg: str) -> list[str]:
    root = ET.fromstring(svg)
    return ["".join(t.itertext()).strip() for t in root.iter(f"{SVG}text")]


def group_ids(svg: str) -> list[str]:
    return [g.get("id") for g in ET.fromstring(svg).iter(f"{SVG}g") if g.get("id")]


# ---- pure: what is drawn ----

def test_verl_on_a_gpu_splits_each_step_into_its_three_phases():
    cert = load("verl-h100-tiny.json")
    segs = picture.segments(cert)
    startup = [s.row for s in segs if s.kind == "start-up"]
    assert startup == ["Starting Ray", "Starting the trainer", "Starting the actor and reference workers",
                       "Starting the vLLM engine"]
    kinds = {s.kind for s in segs}
    assert kinds == {"start-up", "generation", "update", "sync", "finishing"}
    assert {s.step for s in segs if s.kind == "generation"} == set(range(1, 17))
    # the bars tile the run: each phase until the next, the last one until the run ended
    assert segs[0].start == 0.0 and segs[-1].end == picture.run_end(cert) == cert["timings"]["run_s"]
    assert all(a.end == b.start for a, b in zip(segs, segs[1:]))
    # step 1: vLLM woke (the sync marker) and generated until it slept again: drawn as its generation
    first = [s for s in segs if s.step == 1]
    assert [s.kind for s in first] == ["update", "generation", "update", "sync"]
    # the other steps: generation about as long as verl measured it (timing_s/gen)
    gen = {s.step: s.end - s.start for s in segs if s.kind == "generation"}
    for row in cert["metrics"]["per_step"][1:]:
        assert abs(gen[row["step"]] - row["timing_s/gen"]) < 0.25, row["step"]


@pytest.mark.parametrize("name", ["gpu-check/trl-1gpu.json", "trl-cpu-image.json", "verl-cpu-image.json"])
def test_steps_without_update_markers_are_whole_steps(name):
    """TRL prints one line a step, and verl without vLLM's sleep mode (the CPU) no update marker: each step is one
    bar, never called generation."""
    cert = load(name)
    segs = picture.segments(cert)
    assert {s.kind for s in segs} == {"start-up", "step", "finishing"}
    assert all(s.row == "Training steps" for s in segs if s.kind == "step")
    assert [s.step for s in segs if s.kind == "step"] == [r["step"] for r in cert["metrics"]["per_step"]]
    assert all(a.end == b.start for a, b in zip(segs, segs[1:]))


def test_trls_first_step_is_placed_by_its_own_time():
    """TRL says nothing when step 1 starts: it is cut from the start-up phase it ran in, as long as TRL timed it,
    ending where step 2 begins."""
    cert = load("trl-cpu-image.json")
    first, second = [s for s in picture.segments(cert) if s.step in (1, 2)]
    assert second.start == 152.46 and first.end == second.start
    assert abs(first.end - first.start - cert["metrics"]["per_step"][0]["timing_s/step"]) < 1e-9


def test_rewards_and_how_they_were_judged():
    verl, trl = load("verl-h100-tiny.json"), load("gpu-check/trl-1gpu.json")
    assert picture.rewards(verl) == [(r["step"], r["critic/score/mean"]) for r in verl["metrics"]["per_step"]]
    assert picture.rewards(trl) == [(r["step"], r["reward"]) for r in trl["metrics"]["per_step"]]
    assert picture.judged(verl) == {"first": 0.09, "steps": 4, "last": 0.994, "margin": 0.3, "passed": True,
                                    "required": True}
    assert picture.judged({"checks": []}) is None


def test_the_judges_words_are_what_the_picture_reads():
    """picture.judged reads the "reward rose" check as judge.judge writes it today, not only as it once did."""
    from rocmkit.certify.judge import RunStatus, judge

    steps = {n: {"reward": r, "loss": 0.1} for n, r in enumerate([0.1, 0.2, 0.1, 0.3, 0.5, 0.6, 0.8, 0.9], 1)}
    verdict = judge(steps, 8, RunStatus.FINISHED, require_learning=False, margin=0.25)
    assert picture.judged({"checks": verdict.checks}) == {"first": 0.15, "steps": 2, "last": 0.85, "margin": 0.25,
                                                          "passed": True, "required": False}


def test_the_run_time_is_one_figure_in_the_progress_the_certificate_and_the_picture():
    """TRL's runner records its trainer's own time (70.9 s in this kept certificate) where the run took 216.7 s
    from launch to end: the certificate, its picture and certify's progress line all say the latter."""
    import io

    from rocmkit.certify.bars import run_seconds
    from rocmkit.certify.certificate import build
    from rocmkit.certify.judge import Status, Verdict
    from rocmkit.progress import Display

    cert = load("trl-cpu-image.json")
    ran = run_seconds(cert["timings"], cert["timeline"], cert["run"]["wall_s"])
    assert ran == cert["timings"]["run_s"] == 216.748 and cert["run"]["wall_s"] < 71
    assert f"wall: {ran:.1f} s" in markdown(cert)
    assert f"; {ran:.1f} s from launch to end" in picture.subtitle(cert) and picture.run_end(cert) == ran
    rebuilt = build(settings=cert["settings"], target=cert["target"], host=cert["host"],
                    verdict=Verdict(Status.PASS, cert["checks"]), run={"status": "finished", "exit_code": 0,
                                                                        "wall_s": 214.9},
                    device="cpu", info={"wall_s": cert["run"]["wall_s"]}, timings=cert["timings"],
                    timeline=cert["timeline"])
    assert rebuilt["run"]["wall_s"] == 216.75 and rebuilt["run"]["engine_s"] == 70.89
    shown = io.StringIO()
    display = Display("certify", "plain", shown)
    display.stage("training")
    display.stage("judging", took=ran)
    assert f"certify: training ({ran:.1f} s)" in shown.getvalue().splitlines()


@pytest.mark.parametrize("name", ["verl-h100-tiny.json", "gpu-check/trl-1gpu.json", "verl-cpu-image.json",
                                  "trl-cpu-image.json"])
def test_step_numbers_are_all_there_or_every_kth_and_said_so(name):
    """Numbers that do not fit were dropped here and there (trl-cpu-image.json: 1 to 5, 7 to 10, 12): now every
    step is numbered, or the first and every k-th, and the words before them say which."""
    svg = drawn(name)
    steps = sorted({s.step for s in picture.segments(load(name)) if s.step is not None})
    numbered = [int(i.rpartition("-")[2]) for i in group_ids(svg) if i.startswith("step-number-")]
    prefix = next(t for t in ET.fromstring(svg).iter(f"{SVG}g") if t.get("id") == "step-numbers")
    said = "".join(prefix.itertext()).strip()
    every = int(said.split("every ")[1][:-3]) if "every" in said else 1
    assert said == "step" if every == 1 else said == f"step (every {every}{'nd' if every == 2 else 'th'})"
    assert numbered == [n for n in steps if n == steps[0] or n % every == 0], said
    # the words end a gap before the first number starts (SVG drops a trailing space: "step (every 2nd)1" on an H100)
    first = next(t for t in ET.fromstring(svg).iter(f"{SVG}g") if t.get("id") == f"step-number-{numbered[0]}")
    x = [float(next(g.iter(f"{SVG}text")).get("x")) for g in (prefix, first)]
    assert x[1] - x[0] >= 2, x
    assert picture.numbered_steps({n: float(n) for n in range(1, 17)}, 10.0) == (1, list(range(1, 17)))


def test_titles_name_the_engine_the_device_and_the_verdict():
    assert picture.title(load("verl-h100-tiny.json")) == "verl on NVIDIA H100 80GB HBM3: PASS"
    assert picture.title(load("gpu-check/verl-4gpu-rollout-tp2.json")) == "verl on 4 × NVIDIA H200: PASS"
    assert picture.title(load("trl-cpu-image.json")) == "TRL on the CPU: PASS"
    assert "image rocmkit-ci/trl-cpu:gate" in picture.subtitle(load("trl-cpu-image.json"))
    assert picture.title({"engine": "verl", "verdict": "not certified: setup"}) == \
        "verl on an unknown device: NOT CERTIFIED (setup)"


def test_a_stalled_run_is_marked_where_it_was_stopped():
    cert = stalled(load("verl-h100-tiny.json"), 300.0)
    at, text, quiet = picture.stop_mark(cert)
    assert at == 331.2 and quiet == 31.2
    assert text == "stopped: stalled in generation (step 7)"
    assert picture.segments(cert)[-1].end == at  # the last phase lasts until the stop
    assert picture.stop_mark(load("verl-h100-tiny.json")) is None


# ---- the SVG ----

@pytest.mark.parametrize("name,steps", [("verl-h100-tiny.json", 16), ("gpu-check/verl-4gpu-rollout-tp2.json", 16),
                                        ("gpu-check/trl-1gpu.json", 16), ("verl-cpu-image.json", 16),
                                        ("trl-cpu-image.json", 12)])
def test_real_certificates_draw_with_their_labels_bars_and_steps(name, steps):
    cert = load(name)
    svg = drawn(name)
    words = texts(svg)
    assert picture.title(cert) in words
    for label in ("seconds since the training command started", "training step", "mean reward of the step's answers",
                  "start-up", "reward per step", "Finishing"):
        assert label in words, label
    assert [w for w in words if w.startswith("needed for a pass: first + 0.3")]
    ids = group_ids(svg)
    bars = [i for i in ids if i.startswith("bar-")]
    assert len(bars) == len(picture.segments(cert))
    # one marker per step on the reward line
    line = next(g for g in ET.fromstring(svg).iter(f"{SVG}g") if g.get("id") == "reward-per-step")
    assert len(list(line.iter(f"{SVG}use"))) == steps
    assert "stopped-here" not in ids
    assert len(svg) < 120_000 and "glyph" not in svg  # text stays text (svg.fonttype none), not glyph outlines


def test_gpu_steps_are_drawn_in_their_three_rows_with_a_legend():
    words = texts(drawn("verl-h100-tiny.json"))
    for row in ("Starting Ray", "Starting the vLLM engine", "Generation", "Log-probs and update", "Weight sync"):
        assert row in words, row
    assert "generation (the model answers the prompts)" in words
    assert "weight sync (new weights to the generator)" in words
    assert {str(n) for n in range(2, 17, 2)} <= set(words)  # step numbers over the bars


def test_the_same_certificate_draws_the_same_bytes():
    assert picture.draw(load("gpu-check/trl-1gpu.json")) == drawn("gpu-check/trl-1gpu.json")


def test_a_stalled_run_and_a_run_that_never_started_still_draw():
    svg = picture.draw(stalled(load("verl-h100-tiny.json"), 300.0))
    assert "stopped-here" in group_ids(svg)
    assert "stopped: stalled in generation (step 7)" in " ".join(texts(svg))
    never = {"engine": "verl", "verdict": "not certified: setup", "device": None, "timeline": [],
             "metrics": {"steps": 0, "per_step": []}, "settings": {"steps": 16}, "target": {"image": "x:1"},
             "run": {"status": "not started", "exit_code": None, "wall_s": 0.0},
             "checks": [{"name": "target can run the check", "passed": False, "required": True,
                         "detail": "the image x:1 lacks torch"}]}
    words = " ".join(texts(picture.draw(never)))
    assert "The training did not start" in words and "lacks torch" in words and "No step logged a reward." in words


# ---- the run folder ----

def folder(tmp_path: Path):
    return workspace.layout(tmp_path, SimpleNamespace(model=None, data=None))


def test_the_certificate_lists_and_links_its_picture(tmp_path):
    cert = load("verl-h100-tiny.json")
    cert["schema"] = "rocmkit.certificate/v2"
    write_certificate(folder(tmp_path), cert)
    assert (tmp_path / picture.FILE).read_text().startswith("<?xml")
    written = json.loads((tmp_path / "certificate.json").read_text())
    assert written["files"]["picture"] == str(tmp_path / picture.FILE)
    assert f"]({picture.FILE})" in (tmp_path / "certificate.md").read_text()
    assert picture.FILE in workspace.OWN  # a later run in the folder replaces it


def test_without_matplotlib_the_certificate_says_why_in_one_line(tmp_path, monkeypatch):
    # None in sys.modules is how Python itself makes a module unimportable
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    cert = load("gpu-check/trl-1gpu.json")
    write_certificate(folder(tmp_path), cert)
    assert not (tmp_path / picture.FILE).exists()
    written = json.loads((tmp_path / "certificate.json").read_text())
    assert "picture" not in written["files"]
    note = written["notes"][-1]
    assert note.startswith(f"no picture ({picture.FILE}): matplotlib is not installed in {sys.executable}")
    md = (tmp_path / "certificate.md").read_text()
    assert f"- note: {note}" in md and "](certificate.svg)" not in md and "Traceback" not in md
    assert markdown(written) == md


def test_the_guides_picture_is_what_rocmkit_draws_now():
    """docs/guides/img/certificate-verl-h100.svg is this certificate's picture: the same words in the same places
    (its bytes follow the matplotlib that drew it). When this fails, redraw it: `python -m rocmkit.certify.picture
    tests/data/certify/verl-h100-tiny.json docs/guides/img/certificate-verl-h100.svg`."""
    committed = (Path(__file__).parent.parent / "docs" / "guides" / "img" / "certificate-verl-h100.svg").read_text()
    assert texts(committed) == texts(drawn("verl-h100-tiny.json"))
    assert group_ids(committed) == group_ids(drawn("verl-h100-tiny.json"))


def _numerics_kept(name: str) -> dict:
    import gzip

    return json.loads(gzip.decompress((DATA.parent / "numerics" / f"{name}.json.gz").read_bytes()))


def test_a_step_that_never_ran_after_learning_was_proven_is_the_finishing_bar():
    """verl marks step 9 as it logs step 8; learning proven at step 8 ended the run there, so no "9" over the bars
    (the certificate's own words: "steps: 8 of 16") and its time is the finishing."""
    cert = _numerics_kept("cpu-healthy-8-steps")
    segs = picture.segments(cert)
    assert max(s.step for s in segs if s.step) == cert["metrics"]["steps"] == 8
    assert segs[-1].kind == "finishing" and segs[-1].start == 163.67
    stalled_in_9 = stalled(cert, 164.0)  # a run stopped in step 9 still shows it: it ran there
    assert stalled_in_9["run"]["status"] != "finished" and any(s.step == 9 for s in picture.segments(stalled_in_9))


@pytest.mark.parametrize("cert", [load("trl-cpu-image.json"), _numerics_kept("cpu-healthy-8-steps"),
                                  _numerics_kept("gpu-h100-healthy-8-steps")], ids=["trl", "verl-cpu", "verl-h100"])
def test_the_texts_start_up_is_the_pictures_start_up_bar(cert):
    """TRL's step 1 ran inside its last start-up phase: the picture cuts it out (by TRL's own timing), and the text
    says the same seconds, not the time until step 2."""
    bars = picture.segments(cert)
    first = next(s for s in bars if s.kind != "start-up")
    assert max(s.end for s in bars if s.kind == "start-up") == first.start
    assert f"\n- start-up: {first.start:.1f} s, until {first.detail}\n" in markdown(cert)


def test_the_text_says_what_was_trained_and_the_steps_whole_time_apart_from_the_phases():
    text = markdown(_numerics_kept("cpu-healthy-8-steps"))
    assert ("\n- trained: the built-in tiny model (Qwen2ForCausalLM, 2 layers, hidden 256, made here) on the "
            "built-in digits task\n") in text
    assert ("\n- time in each phase over the 8 step(s) (s): generation 10.7217, reference_log_probs 2.274, "
            "old_log_probs 1.8585, reward 0.0, update 3.735; the steps in all 37.5794\n") in text
    job = load("verl-h200-job-qwen2.5-7b.json")
    assert "; learning not judged (its reward means nothing)\n" in markdown(job)


def test_a_slow_first_step_is_said_apart_from_the_pace_of_the_others():
    """SGLang's rollout on one H100 (2026-12-07): step 1 took 110 s, 88 of them generating (SGLang's kernels
    compiled at their first use), the others 2.8-3.0 s; the phase totals hold both, so the text says step 1 apart.
    A run whose first step is like the others, or too short a run to tell, says nothing of it."""
    sglang = json.loads((Path(__file__).parent / "data" / "certify" / "verl-sglang-h100-1gpu.json").read_text())
    assert ("\n- step 1: 110.0 s, generation 88.1 s of it, the later steps 2.8–3.0 s (median 2.9 s): one-off "
            "warm-up (compilation, allocator, caches), which the throughput figures leave out\n") in markdown(sglang)
    trl = markdown(load("gpu-check/trl-1gpu.json"))
    assert "\n- step 1: 1.8 s, generation 0.51 s of it, the later steps 0.059–0.09 s (median 0.068 s)" in trl
    even = copy.deepcopy(sglang)
    even["metrics"]["per_step"][0]["timing_s/step"] = 3.1
    assert "\n- step 1:" not in markdown(even)
    even["metrics"]["per_step"] = even["metrics"]["per_step"][:2]
    assert "\n- step 1:" not in markdown(even)
