"""The time-to-verdict table in the docs is what benchmarks/time_to_verdict.py writes from its kept results, and
it has a row for a healthy stack and for each failure a user meets. Figures are reported, never asserted."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
KEPT = REPO / "tests" / "data" / "crash" / "cpu-time-to-verdict.json"
DOC = REPO / "docs" / "guides" / "certification.md"


def bench():
    spec = importlib.util.spec_from_file_location("time_to_verdict", REPO / "benchmarks" / "time_to_verdict.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_docs_table_is_the_scripts_rendering_of_the_kept_results():
    ttv = bench()
    text = DOC.read_text()
    [between] = re.findall(re.escape(ttv.MARK) + r"\n(.*?)" + re.escape(ttv.MARK), text, re.S)
    assert between == ttv.table(json.loads(KEPT.read_text())), \
        "stale: python benchmarks/time_to_verdict.py --results tests/data/crash/cpu-time-to-verdict.json --docs ..."


def test_every_failure_has_a_row_and_each_verdict_is_the_expected_one():
    ttv = bench()
    results = {r["case"]: r for r in json.loads(KEPT.read_text())}
    assert set(results) == set(ttv.CASES.split(","))
    assert results["healthy"]["verdict"] == "pass" and results["healthy"]["ended_by"].startswith("learning proven")
    assert results["fixed"]["ended_by"] == "all 16 steps"
    assert results["rank"]["verdict"] == results["stall"]["verdict"] == "fail"
    assert results["weights"]["exit"] == results["data"]["exit"] == 2
    assert "busy GPU" in ttv.table([]) and "not made on the CPU" in ttv.table([])


def test_the_docs_gpu_table_is_the_scripts_rendering_of_the_kept_gpu_runs():
    """The GPU table: the kept GPU hosts' runs (one H200: healthy, busy, refused inputs; two H200s: the kills), the
    stall named as not run."""
    ttv = bench()
    files = [REPO / f for f in (REPO / "tests/data/crash/gpu-time-to-verdict.files").read_text().split()]
    text = DOC.read_text()
    [between] = re.findall(re.escape(ttv.GPU_MARK) + r"\n(.*?)" + re.escape(ttv.GPU_MARK), text, re.S)
    assert between == ttv.render(files, gpu=True), "stale: python benchmarks/time_to_verdict.py --gpu-table ..."
    rows = {r["case"]: r for r in ttv.kept(files)}
    assert rows["healthy"]["verdict"] == "pass" and "--gpus 1" in rows["healthy"]["command"]
    assert "--no-probes" not in rows["healthy"]["command"]  # the default command: the probes ran beside start-up
    assert rows["busy"]["exit"] == 3 and rows["weights"]["exit"] == rows["data"]["exit"] == 2
    assert rows["rank"]["verdict"] == rows["vllm"]["verdict"] == "fail"
    assert "| stall (SIGSTOP after step 1, `--stall-timeout 60`) | - |" in between and "not run here yet" in between
