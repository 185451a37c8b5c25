"""Counting a verl run's sleeps and weight syncs per rollout replica from its log (certify/engines/verl/report.py), on
real logs: Ray prefixes each worker's line with its actor and pid, and its driver folds lines that repeat across
workers into "[repeated Nx across cluster]" (certify turns that off for verl with RAY_DEDUP_LOGS=0; a folded
line still counts N times)."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

from rocmkit.certify.loglines import source
from rocmkit.certify.watchdog import Watch
from rocmkit.certify.engines.verl import report
from rocmkit.certify.engines.verl import overrides

DATA = Path(__file__).resolve().parent / "data" / "certify"


def log(name: str) -> str:
    return gzip.open(DATA / name, "rt", errors="replace").read()


def test_a_line_names_the_worker_it_came_from():
    assert source("\x1b[36m(vLLMHttpServer pid=9553)\x1b[0m (Worker pid=9762) INFO x") == "vLLMHttpServer pid=9553"
    assert source("(pid=2693) WARNING x") == "pid=2693"
    assert source("(WorkerDict pid=7, ip=10.0.0.2) x") == "WorkerDict pid=7"
    assert source("step:1 - x") == "driver"


def test_one_replica_on_an_h100_slept_and_synced_every_step():
    seen = report.from_log(log("verl-h100-tiny-graphs.log.gz"))
    assert seen["sleeps_per_replica"] == {"vLLMHttpServer pid=9553": 17} and seen["sleeps"] == 17
    assert seen["weight_syncs_per_replica"] == {"vLLMHttpServer pid=9553": 17} and not seen["folded"]


def test_a_line_ray_folded_counts_as_often_as_it_was_printed():
    text = log("verl-h100-tiny-graphs.log.gz")
    rx = re.compile(r"Failed to import from vllm\._qutlass_C")
    lines = [line for line in text.splitlines() if rx.search(line)]
    folded = [int(m.group(1)) for line in lines if (m := report.FOLDED_RE.search(line))]
    counts, was_folded = report.per_source(text, rx)
    assert was_folded and folded and sum(counts.values()) == len(lines) - len(folded) + sum(folded)


def test_certify_turns_ray_folding_off_for_verl():
    run = overrides.VerlRun(model_dir="m", train_file="t", val_file="v", reward_file="r", gpus=2)
    assert overrides.environment(run, "metrics.jsonl")["RAY_DEDUP_LOGS"] == "0"


def test_the_watchdog_keeps_each_replicas_events_apart():
    w = Watch(2, clock=iter(range(100)).__next__)
    for line in ["step:1 - critic/score/mean:0.1",
                 "(vLLMHttpServer pid=1) (Worker pid=3) INFO Sleep mode freed 31.2 GiB memory, 2.1 GiB memory is still in use.",
                 "(vLLMHttpServer pid=2) (Worker pid=4) INFO Sleep mode freed 31.2 GiB memory, 2.1 GiB memory is still in use.",
                 "(vLLMHttpServer pid=2) (EngineCore pid=5) INFO It took 0.01 seconds to wake up tags ['weights'].",
                 "(vLLMHttpServer pid=1) (EngineCore pid=6) INFO It took 0.01 seconds to wake up tags ['weights'].",
                 "step:2 - critic/score/mean:0.5",
                 "(vLLMHttpServer pid=1) (EngineCore pid=6) INFO It took 0.01 seconds to wake up tags ['weights']."]:
        w.line(line)
    replicas = w.record()["replicas"]
    assert set(replicas) == {"vLLMHttpServer pid=1", "vLLMHttpServer pid=2"}
    assert [e["detail"] for e in replicas["vLLMHttpServer pid=1"]] == [
        "step 2: log-probs and update", "step 2: weight sync", "finishing: weight sync"]
    assert [e["phase"] for e in replicas["vLLMHttpServer pid=2"]] == ["update", "weight sync"]


GPU_CHECK = Path(__file__).resolve().parent / "data" / "certify" / "gpu-check"


def replay(name: str) -> tuple[dict, dict]:
    """A real run's log from lent GPUs (tests/data/certify/gpu-check), read again by the report and the watchdog."""
    text = gzip.open(GPU_CHECK / f"{name}.run.log.gz", "rt", errors="replace").read()
    watch = Watch(16, clock=iter(range(10**7)).__next__)
    for line in text.splitlines():
        watch.line(line)
    return report.from_log(text), watch.record()


def test_two_replicas_on_two_gpus_each_slept_and_synced_every_step_and_stay_apart():
    """verl --gpus 2 on two H200s: two vLLM replicas of TP 1. With Ray's folding this run's certificate once read
    "14 sleeps" where 34 happened; each replica now has its own 17 (start-up and 16 steps)."""
    seen, watched = replay("verl-2gpu")
    assert len(seen["sleeps_per_replica"]) == 2 and set(seen["sleeps_per_replica"].values()) == {17}
    assert set(seen["weight_syncs_per_replica"].values()) == {17} and not seen["folded"]
    replicas = watched["replicas"]
    assert set(replicas) == set(seen["sleeps_per_replica"])
    for events in replicas.values():
        assert [e["phase"] for e in events] == ["update", "weight sync"] * 17
        assert events[-1]["detail"] == "step 16: weight sync"
        assert [e["at_s"] for e in events] == sorted(e["at_s"] for e in events)
    assert watched["timeline"][-1]["detail"] == "finishing"


def test_two_replicas_of_tp2_on_four_gpus_count_each_workers_sleep_and_each_replicas_sync():
    """verl --gpus 4 --rollout-tp 2 on four H200s: each replica's two TP workers free their own share at every
    sleep (34 lines a replica), and the replica wakes its weights once a step (17)."""
    seen, watched = replay("verl-4gpu-rollout-tp2")
    assert len(seen["sleeps_per_replica"]) == 2 and set(seen["sleeps_per_replica"].values()) == {34}
    assert set(seen["weight_syncs_per_replica"].values()) == {17}
    for events in watched["replicas"].values():
        assert [e["phase"] for e in events] == ["update", "weight sync"] * 17


def test_one_replica_of_tp2_on_two_gpus_counts_both_workers_sleeps():
    """verl --gpus 2 --rollout-tp 2 on two H100s: one replica over both GPUs, FSDP over two ranks. Its two TP
    workers each free their share at every sleep (34 lines), and the replica syncs once a step (17)."""
    seen, watched = replay("verl-2gpu-rollout-tp2")
    assert list(seen["sleeps_per_replica"].values()) == [34] and list(seen["weight_syncs_per_replica"].values()) == [17]
    assert not seen["folded"]
    assert watched["timeline"][-1]["detail"] == "finishing"
