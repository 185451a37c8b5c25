"""Stall reports of verl hung on purpose on two lent GPUs (benchmarks/gpu_check.py --only verl-2gpu-block,
verl-2gpu-skip), judged again with today's code: the flight recorder's record over NCCL, and a rank that waits in
a collective counted as waiting however hard NCCL spins its core."""

from __future__ import annotations

import json
from pathlib import Path

from rocmkit.stall import flightrec, verdict

STALL = Path(__file__).parent / "data" / "stall"


def _kept(name: str) -> dict:
    return json.loads((STALL / name).read_text())["stall_report"]


def test_block_on_two_h100s_names_training_rank_1_from_the_flight_recorder():
    # rank 1 of the FSDP actor blocked in Python (ROCMKIT_TEST_STALL=update:1:2:block); rank 0 spun at 101 % CPU
    # in all_reduce #44, which the report of that day called "at work"
    report = _kept("verl-2gpu-block.h100.json")
    judged = verdict.judge(report["processes"], report["flight_recorder"])
    assert judged["health"] == "waiting"
    first = judged["lines"][0]
    assert first.startswith("the job waits for rank 1 (pid 4204, Ray actor WorkerDict): it never reached "
                            "all_reduce #44 of group default_pg, where rank 0 waits"), first
    assert not any(line.startswith("at work") for line in judged["lines"])
    assert judged["lines"][1].startswith("flight recorder: rank 0 of group default_pg waits in all_reduce #44")


def _entry(seq: int, op: str, state: str) -> dict:
    return {"process_group": ("0", "default_pg"), "collective_seq_id": seq, "profiling_name": f"nccl:{op}",
            "input_sizes": [[49280]], "state": state, "retired": False, "is_p2p": False, "frames": []}


def test_a_skipped_collective_that_nccl_let_complete_is_found_by_its_numbering():
    # What NCCL leaves when rank 1 skips all_reduce #44: rank 1's next collective takes #44 and runs against rank
    # 0's all_reduce (NCCL compares no ops), so rank 0 goes on to #45 while rank 1 waits in #44. On two H200s the
    # record showed only "rank 1 waits in _all_gather_base #44" (the dumps did not come back; this is their shape)
    cfg = {"0": {"desc": "default_pg", "ranks": "[0, 1]"}}
    dumps = {(11, 0): {"pg_config": cfg, "entries": [_entry(43, "all_reduce", "completed"),
                                                      _entry(44, "all_reduce", "completed"),
                                                      _entry(45, "_all_gather_base", "started")]},
             (12, 1): {"pg_config": cfg, "entries": [_entry(43, "all_reduce", "completed"),
                                                      _entry(44, "_all_gather_base", "scheduled")]}}
    found = flightrec.analyse(dumps)
    (group,) = found["groups"]
    assert group["seq"] == 44 and group["op"] == "all_reduce" and list(group["mismatch"]) == [1]
    assert found["lines"] == ["rank 0 of group default_pg entered all_reduce #44 (sizes [[49280]]); rank 1 entered "
                              "_all_gather_base as #44 instead: it skipped or reordered a collective"]
    (culprit,) = flightrec.culprits(found)
    assert culprit["rank"] == 1 and culprit["pid"] == 12


def test_skip_on_two_h200s_keeps_the_record_of_the_rank_left_waiting():
    # the kept report of that run: both ranks spin in a stream synchronize, the record has rank 1 in
    # _all_gather_base #44; the stacks alone name no one, and the verdict says so rather than guess
    report = _kept("verl-2gpu-skip.h200.json")
    judged = verdict.judge(report["processes"], report["flight_recorder"])
    assert "flight recorder: rank 1 of group default_pg waits in _all_gather_base #44 (sizes [[49280]])" \
        in judged["lines"]
    assert not any(line.startswith("at work") for line in judged["lines"])
