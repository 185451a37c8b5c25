"""Real verl on the CPU (the verl-cpu stack) with its weight sync broken on purpose in the rollout
(ROCMKIT_TEST_SYNC_FAULT, rocmkit/certify/intarget/verl_sync_witness.py): a sync that loads nothing, one that misses
a decoder layer, one that rounds every weight to fp8. One run of four steps breaks a different sync each way, and the
certificate must fail naming each sync and what it missed, and say from its log-probs that the rollout left the
trainer's policy after the first update. The kept runs (tests/data/numerics/) are judged with the current bands:
every healthy one passes, every broken one fails."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
from pathlib import Path

import pytest
from provisioned import provisioned

from rocmkit.certify import numerics

KEPT = Path(__file__).resolve().parent / "data" / "numerics"
FAULTS = "noop@2,skip:1@3,cast:float8_e4m3fn@4"


@pytest.mark.slow
def test_each_broken_sync_fails_the_certificate_naming_it(tmp_path, ray_host):
    python = provisioned("ROCMKIT_VERL_CPU_PYTHON", ".ci/provision/50-cpu-stacks.sh makes the verl-cpu venv", "VERL_CPU")
    home, out = tmp_path / "home", tmp_path / "c"
    home.mkdir()
    r = subprocess.run([python, "-m", "rocmkit", "certify", "--host", "--engine", "verl", "--gpus", "0", "--steps", "4",
                        "--out", str(out), "--json"], capture_output=True, text=True, timeout=1200,
                       env={**os.environ, "CI": "true", "HOME": str(home), "ROCMKIT_TEST_SYNC_FAULT": FAULTS})
    assert r.returncode == 1, r.stderr[-3000:]
    cert = json.loads(r.stdout)
    sync = cert["numerics"]["sync"]
    problems = {p["sync"]: p["what"] for p in sync["problems"]}
    assert problems[2] == "the trainer sent 27 tensors and the rollout loaded none"
    assert problems[3].startswith("the rollout did not load 12 of the 27 tensors the trainer sent: model.layers.1.")
    assert "reached the rollout with other values than the trainer sent" in problems[4]
    assert set(problems) == {2, 3, 4}  # sync 1 (before the first step) and 5 (after the last) were whole
    (check,) = [c for c in cert["checks"] if c["name"] == "weight sync reached the rollout"]
    assert not check["passed"] and check["required"] and check["detail"].startswith("weight sync 2 (after step 1)")
    # the log-probs say it too, from the engine's own figures: step 1 agreed, the rollout drifted after the update
    num = cert["numerics"]
    if num["status"] != "reported":
        assert num["status"] == "out of band" and num["onset"] == "after step 1" and "weight sync" in num["likely"]
    md = (out / "certificate.md").read_text()
    assert "| weight sync reached the rollout | FAIL | weight sync 2 (after step 1)" in md


def _kept() -> list[tuple[str, dict]]:
    return [(p.name, json.loads(gzip.open(p, "rt").read())) for p in sorted(KEPT.glob("*.json.gz"))]


@pytest.mark.parametrize("name,cert", _kept(), ids=lambda v: v if isinstance(v, str) else "")
def test_the_kept_runs_are_judged_as_they_were_measured(name, cert):
    """Healthy runs pass the current band (no false alarm); a broken sync fails it and the witness names it. A
    band without a broken run (SGLang's: its sync has no witness yet) reports a healthy run, judges nothing."""
    steps = numerics.steps_of(cert["numerics"]["per_step"])
    s = cert["settings"]
    device = "cpu" if cert["device"] == "cpu" else "gpu"
    doc = numerics.judge(steps, engine=cert["engine"], rollout=s.get("rollout", "vllm"), device=device)
    healthy = "healthy" in name
    judged = numerics.find_band(cert["engine"], s.get("rollout", "vllm"), device, doc["figure"]).limit is not None
    expect = ("in band" if healthy else "out of band") if judged else "reported"
    assert healthy or judged, f"{name}: a broken run's band must judge"
    assert doc["status"] == expect, (name, doc.get("summary"))
    # the witness, as it judged the run (where there was one: SGLang's rollout has none, so no sync record)
    sync = cert["numerics"].get("sync")
    assert sync is not None or s.get("rollout") == "sglang", name
    assert bool((sync or {}).get("problems")) is not healthy, name
