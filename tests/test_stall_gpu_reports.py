"""Stall reports of verl hung on purpose on two lent GPUs (benchmarks/gpu_check.py --only verl-2gpu-block,
verl-2gpu-skip, verl-2gpu-freeze), judged again with today's code: the flight recorder's record over NCCL, and a rank that waits in
a collective counted as waiting however hard NCCL spins its core."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from rocmkit.stall import flightrec, tree, verdict
from rocmkit.stall.waits import process_wait

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


def _replayed(name: str) -> tuple[dict, dict]:
    """A kept GPU run's stall folder (report.json, each rank's flight-recorder dump, py-spy's stacks) judged again:
    the waits read from the stacks, the record analysed from the dumps, the verdict, all by today's code."""
    folder = STALL / name
    doc = json.loads((folder / "report.json").read_text())
    threads = json.loads(gzip.decompress((folder / "stacks.json.gz").read_bytes()))
    for p in doc["processes"]:
        if str(p["pid"]) in threads:
            w, thread = process_wait(threads[str(p["pid"])])
            p["wait"] = {"kind": w.kind, "at": w.at, "caller": w.caller, "thread": thread}
    dumps, notes = flightrec.read(folder)
    assert notes == []
    record = flightrec.analyse(dumps)
    return verdict.judge(doc["processes"], record), record


def test_block_on_two_h200s_names_rank_1_the_collective_and_its_python_frame():
    # ROCMKIT_TEST_STALL=update:1:2:block, 2× H200, py-spy on PATH: rank 1's actor method blocks in Python in a
    # thread of Ray's own, beside Ray's C++ threads that wait in the same pthread_cond_wait
    judged, record = _replayed("verl-2gpu-block.h200")
    first = judged["lines"][0]
    assert first.startswith("the job waits for rank 1 (pid 4172, Ray actor WorkerDict): it never reached "
                            "all_reduce #44 of group default_pg, where rank 0 waits"), first
    assert "hang (rocmkit/stall/testhook.py:63)" in first  # its Python frame, not Ray's idle C++ thread
    assert judged["lines"][1] == ("flight recorder: rank 0 of group default_pg waits in all_reduce #44; rank 1 "
                                  "never reached it (its last: all_reduce #43, completed)")
    assert judged["health"] == "waiting"


def test_skip_on_two_h200s_is_found_by_its_numbering_in_the_real_dumps():
    # ROCMKIT_TEST_STALL=update:1:2:skip: NCCL let rank 1's next collective run against rank 0's all_reduce #44
    judged, record = _replayed("verl-2gpu-skip.h200")
    (group,) = record["groups"]
    assert (group["seq"], group["op"], list(group["mismatch"])) == (44, "all_reduce", [1])
    first = judged["lines"][0]
    assert first.startswith("the job waits for rank 1 (pid 9644, Ray actor WorkerDict): it entered "
                            "_all_gather_base as #44 where rank 0 entered all_reduce #44"), first
    assert "forward_step (verl/workers/engine/fsdp/transformer_impl.py:1566)" in first  # rank 1's frame
    assert not any(line.startswith("at work") for line in judged["lines"])


def test_freeze_on_two_h200s_names_the_frozen_rank_that_left_no_record():
    # ROCMKIT_TEST_STALL=update:1:2:freeze: the cgroup v2 freezer holds rank 1 (state S, as the run on
    # four H100s showed); it cannot answer the dump request, rank 0 waits in all_reduce #44. This report was read
    # before the report learned to read a cgroup's freeze state: it says "sleeping", and the record decides.
    judged, record = _replayed("verl-2gpu-freeze.h200")
    (group,) = record["groups"]
    assert group["missing"] == [1] and group["seq"] == 44
    first = judged["lines"][0]
    assert first.startswith("the job waits for rank 1 (pid 4160, Ray actor WorkerDict): it left no record while "
                            "rank 0 waits in all_reduce #44 of group default_pg"), first
    assert "freeze_self (rocmkit/stall/testhook.py" in first  # where it froze, from its task's thread
    # read today, its cgroup says frozen: the first rule names it by its state, and the record still follows
    doc = json.loads((STALL / "verl-2gpu-freeze.h200" / "report.json").read_text())
    for p in doc["processes"]:
        if p["pid"] == 4160:
            p["state"] = "frozen"
    again = verdict.judge(doc["processes"], record)
    assert again["lines"][0].startswith("the job waits for rank 1 (pid 4160, Ray actor WorkerDict): frozen by the "
                                        "cgroup v2 freezer"), again["lines"][0]
    assert again["health"] == "stuck"


def test_the_cgroup_v2_freezer_is_read_from_the_process_cgroup(tmp_path):
    # the files as the lent GPU host had them: the job in /process_api/<id>, the hook's cgroup below it
    proc, fs = tmp_path / "proc", tmp_path / "cgroup"
    path = "process_api/ad7f29a811978d33192e76d61db330a3/rocmkit-freeze-4160"
    (proc / "4160").mkdir(parents=True)
    (proc / "4160" / "cgroup").write_text(f"0::/{path}\n")
    (fs / path).mkdir(parents=True)
    (fs / path / "cgroup.events").write_text("populated 1\nfrozen 1\n")
    assert tree.frozen(4160, str(proc), str(fs))
    (fs / path / "cgroup.events").write_text("populated 1\nfrozen 0\n")
    assert not tree.frozen(4160, str(proc), str(fs))
    (proc / "4160" / "cgroup").write_text("4:memory:/x\n0::/\n")  # a v1 hybrid: no cgroup.events at the root
    assert not tree.frozen(4160, str(proc), str(fs))
    assert not tree.frozen(999999, str(proc), str(fs))


def test_a_frozen_sglang_scheduler_on_one_h200_is_named_by_its_state():
    # verl with SGLang at TP 1 on one H200, its sglang::scheduler frozen by the cgroup v2 freezer 15 s after verl's
    # "ready to fit" (benchmarks/gpu_sglang/faults.sh freeze; freeze.act is the freeze's own record): the trainer
    # waits on SGLang's HTTP server, which waits on the scheduler, which can answer no one
    judged, record = _replayed("verl-sglang-freeze.h200")
    frozen = int((STALL / "verl-sglang-freeze.h200" / "freeze.act").read_text().split("pid=")[1].split()[0])
    first = judged["lines"][0]
    assert first.startswith(f"the job waits for pid {frozen} (SGLang scheduler): frozen by the cgroup v2 freezer"), first
    assert judged["health"] == "stuck"
    assert record["groups"] == []  # rank 0 of the actor dumped its record: no collective pending, the stacks decide
    servers = [line for line in judged["lines"] if "Ray actor SGLangHttpServer" in line]
    assert servers and "waits in a lock or condition" in servers[0]


def test_a_frozen_sglang_scheduler_at_tp2_on_two_h200s_is_named_and_its_peer_waits_in_the_collective():
    # the same at TP 2 on two H200s (faults.sh freeze NAME 0,1): sglang::scheduler_TP1 frozen; its TP-0 peer waits
    # in SGLang's broadcast_pyobj for it, and both FSDP ranks of the actor dumped a record with nothing pending
    judged, record = _replayed("verl-sglang-tp2-freeze.h200")
    frozen = int((STALL / "verl-sglang-tp2-freeze.h200" / "freeze.act").read_text().split("pid=")[1].split()[0])
    first = judged["lines"][0]
    assert first.startswith(f"the job waits for pid {frozen} (SGLang scheduler_TP1): frozen by the cgroup v2 "
                            "freezer"), first
    assert judged["health"] == "stuck" and record["groups"] == []
    peer = [line for line in judged["lines"] if "(SGLang scheduler_TP0)" in line]
    assert peer and "waits in a collective" in peer[0] and "broadcast_pyobj" in peer[0], judged["lines"]
