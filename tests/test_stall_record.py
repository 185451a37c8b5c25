"""The collective layer's own record in the stall report, on real torch.distributed (gloo) jobs of two ranks with
PyTorch's flight recorder on (TORCH_FR_BUFFER_SIZE; gloo keeps one since torch 2.8) and rocmkit's dumper in each
rank (rocmkit/stall/frdump.py): rank 0 waits in all_reduce #2 while rank 1 hangs in one of three ways no kernel
state marks (tests/stall_ranks.py): `block` (waits forever in Python), `skip` (skips all_reduce #2 and enters
all_gather as its #2), `native` (blocks in a native call holding the GIL, so it cannot even answer the dump).
Each report must name rank 1, the collective it did not reach, and where it is.

A pair costs about 30 s of a busy 2-core machine (torch's import, and the recorder's first dump imports much of
torch), so CI runs `skip` live and the other two only with ROCMKIT_RUN_HANG_TESTS=1; every live run keeps its
report and its ranks' dumps in tests/data/stall/gloo-MODE/, which the cheap replay tests below judge every time.
Also the freezer case (every process sleeping) on its derived report."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
from rocmkit.stall import flightrec, report, verdict  # noqa: E402

HERE = Path(__file__).resolve().parent
DATA = HERE / "data" / "stall"
MODES = ("block", "skip", "native")
LIVE = MODES if os.environ.get("ROCMKIT_RUN_HANG_TESTS") == "1" else ("skip",)


def _port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def jobs(tmp_path_factory):
    """One pair per hang kind, started together (each rank's torch import costs seconds of this machine)."""
    root = tmp_path_factory.mktemp("fr")
    started = {}
    for mode in LIVE:
        port, folder = _port(), root / mode
        env = {**os.environ, "ROCMKIT_FR_DIR": str(folder), "TORCH_FR_BUFFER_SIZE": "200",
               "PYTHONPATH": str(HERE.parent)}
        started[mode] = (folder, [subprocess.Popen([sys.executable, str(HERE / "stall_ranks.py"), str(r), str(port),
                                                    mode], stdout=subprocess.PIPE, text=True,
                                                   env={**env, "RANK": str(r)}) for r in (0, 1)])
    try:
        deadline = time.monotonic() + 180
        for mode, (folder, pair) in started.items():
            for p in pair:
                line = ""
                while not line.startswith("joined"):
                    assert time.monotonic() < deadline and p.poll() is None, f"{mode}: the ranks did not join"
                    line = p.stdout.readline()
            # the dumpers are warm (their first dump imports much of torch.distributed) once a request is answered:
            # by both ranks, or by rank 0 alone where rank 1 holds the GIL
            want = 1 if mode == "native" else 2
            while True:
                asked = flightrec.request(folder, time.monotonic() + 10, expected=want)
                if len(flightrec.read(folder, asked)[0]) >= want:
                    break
                assert time.monotonic() < deadline, f"{mode}: no dump within 180 s"
        yield started
    finally:
        for _, pair in started.values():
            for p in pair:
                p.kill()
                p.wait()


def _take(jobs, mode):
    folder, (r0, r1) = jobs[mode]
    return report.take([r0.pid, r1.pid], out_dir=None), r0.pid, r1.pid


@pytest.mark.slow
@pytest.mark.parametrize("mode", LIVE)
def test_the_record_names_the_rank_that_did_not_reach_the_collective(jobs, mode):
    doc, p0, p1 = _take(jobs, mode)
    judge(doc, p1, mode)
    if os.environ.get("ROCMKIT_RUN_HANG_TESTS") != "1":
        return  # CI's run checks; the recording run keeps what it got
    kept = DATA / f"gloo-{mode}"  # for the replay below (keep it in git after a run)
    shutil.rmtree(kept, ignore_errors=True)
    kept.mkdir(parents=True)
    (kept / "report.json").write_text(json.dumps(doc, indent=1) + "\n")
    for d in jobs[mode][0].glob("fr-pid*.pkl"):
        shutil.copy(d, kept / d.name)


@pytest.mark.parametrize("mode", MODES)
def test_the_kept_record_replayed(mode):
    """The kept report's processes and its ranks' dumps, judged again by today's code."""
    kept = DATA / f"gloo-{mode}"
    if not (kept / "report.json").exists():
        pytest.skip(f"{kept} not recorded yet: ROCMKIT_RUN_HANG_TESTS=1 pytest tests/test_stall_record.py")
    doc = json.loads((kept / "report.json").read_text())
    dumps, notes = flightrec.read(kept)
    assert notes == []
    record = flightrec.analyse(dumps)
    doc["flight_recorder"] = {**record, "dumps": len(dumps)}
    doc["verdict"] = verdict.judge(doc["processes"], record)
    stall_ranks = [p["pid"] for p in doc["processes"] if p.get("rank") == "1"]
    judge(doc, stall_ranks[0], mode)


def judge(doc: dict, p1: int, mode: str) -> None:
    v, fr = doc["verdict"], doc["flight_recorder"]
    [g] = fr["groups"]
    assert (g["op"], g["seq"], [int(r) for r in g["waiting"]]) == ("all_reduce", 2, [0]), g
    assert [(w["pid"], w["rank"], w.get("source")) for w in v["waits_for"]] == [(p1, "1", "flight recorder")], v
    first = v["lines"][0]
    assert first.startswith(f"the job waits for rank 1 (pid {p1}, "), first
    if mode == "block":
        assert [int(r) for r in g["behind"]] == [1] and "never reached all_reduce #2 of group default_pg" in first
        assert "Event.wait" in first or "stall_ranks.py" in first  # its Python frame
    elif mode == "skip":
        assert [int(r) for r in g["mismatch"]] == [1] and "entered all_gather as #2" in first
        assert "stall_ranks.py" in first  # the frame that called the other collective
    else:
        assert g["missing"] == [1] and fr["dumps"] == 1 and "left no record" in first
        assert "pause" in first  # its native frame, from the stacks
    assert any(line.startswith("flight recorder: rank 0 of group default_pg waits in all_reduce #2")
               for line in v["lines"])


def test_the_analysis_of_two_real_dumps():
    """flightrec on the files two real ranks' dumpers wrote (torch's own pickle)."""
    folder = DATA / "gloo-block"
    if not folder.exists():
        pytest.skip(f"{folder} not recorded yet")
    dumps, notes = flightrec.read(folder)
    assert notes == [] and sorted(r for _, r in dumps) == [0, 1]
    a = flightrec.analyse(dumps)
    assert a["lines"] == ["rank 0 of group default_pg waits in all_reduce #2 (sizes [[4]]); rank 1 never reached it "
                          "(its last: all_reduce #1, completed)"]
    assert {d["version"] for d in dumps.values()} and all(d["entries"] for d in dumps.values())


def test_no_record_says_so_and_the_stacks_decide():
    """A job whose ranks keep no record: the verdict says so and falls back to the stacks (the straggler rule)."""
    procs = [{"pid": 10, "role": "python", "rank": "0", "state": "sleeping", "python": True, "cpu_pct": 1.0,
              "wait": {"kind": "collective", "at": "all_reduce (torch/distributed/distributed_c10d.py:3252)",
                       "caller": "<module> (train.py:9)"}},
             {"pid": 11, "role": "python", "rank": "1", "state": "sleeping", "python": True, "cpu_pct": 0.0,
              "wait": {"kind": "sleep", "at": "sleep (time)", "caller": "<module> (train.py:6)"}}]
    record = {"groups": [], "lines": [], "note": "no rank answered the dump request"}
    v = verdict.judge(procs, record)
    assert v["lines"][0].startswith("the job waits for rank 1 (pid 11, python): its peers wait in a collective")
    assert "flight recorder: no rank answered the dump request; the verdict reads the stacks alone" in v["lines"]


def test_the_frozen_rank_is_named_where_every_process_sleeps():
    """The cgroup-freezer case (tests/data/stall/README.md: derived from the kept SIGSTOP report): nothing is
    stopped; rank 0 spins at 90 % CPU in a stream sync, rank 1 sits at 0 % in pthread_cond_wait."""
    kept = json.loads((DATA / "verl-2gpu-freezer.derived.json").read_text())
    procs = kept["stall_report"]["processes"]
    assert not [p for p in procs if p["state"] != "sleeping"]
    v = verdict.judge(procs)
    rank1 = next(p for p in procs if p["rank"] == "1" and p["role"] == "Ray actor WorkerDict")
    assert [(w["pid"], w["rank"]) for w in v["waits_for"]] == [(rank1["pid"], "1")]
    assert v["lines"][0].startswith(f"the job waits for rank 1 (pid {rank1['pid']}, Ray actor WorkerDict): its peers "
                                    "spin in a collective (90 % CPU")
    assert "pthread_cond_wait" in v["lines"][0]
    # one line per group, the plumbing folded into the last one
    assert v["lines"][1].startswith("rank 0 (pid ") and "stream" in v["lines"][1]
    assert v["lines"][-1].startswith("and 19 more process(es) of the run's plumbing")
    assert "verl driver" in v["lines"][-1]
    assert len(v["lines"]) <= 6


# ---- the certify test hook's hang kinds (rocmkit/stall/testhook.py)

def test_the_hook_reads_its_kinds():
    from rocmkit.stall import testhook

    assert testhook.parse("rollout:1:3") == ("rollout", 1, 3, "stop")  # the kept runs' form still reads
    assert testhook.parse("update:1:2:block") == ("update", 1, 2, "block")
    assert testhook.parse("update:1:2:freeze") == ("update", 1, 2, "freeze")
    for bad in ("update:1:2:thaw", "update:1", "nowhere:0:1", "update:x:1:skip", "update:0:0:skip"):
        with pytest.raises(ValueError, match="WHERE:RANK:CALL"):
            testhook.parse(bad)


def test_skip_skips_one_collective_and_restores_the_rest():
    """The real torch.distributed module: the first collective inside the hooked call returns at once (no group
    is needed: it never reaches one), the functions are restored afterwards."""
    import torch.distributed as dist

    from rocmkit.stall import testhook

    original = dist.all_reduce
    seen = []

    def step():
        seen.append(dist.all_reduce(torch.ones(2)))
        seen.append(dist.all_gather_into_tensor is testhook_originals["all_gather_into_tensor"])
        return "stepped"

    testhook_originals = {n: getattr(dist, n) for n in testhook.COLLECTIVES if hasattr(dist, n)}
    assert testhook.skipping_one(step) == ("stepped", True)
    assert seen == [None, True] and dist.all_reduce is original
    assert testhook.skipping_one(lambda: 1) == (1, False)


def test_another_world_rank_0_is_not_taken_for_the_trainers():
    """A job holds several torch.distributed worlds (verl's trainer ranks, each vLLM engine's own): a rank 0 of a
    one-rank world beside them, idle with its collectives done, changes nothing (the kept dumps of `block`, with
    that world's dump made from rank 0's own, its config and entries rewritten)."""
    import copy

    folder = DATA / "gloo-block"
    if not folder.exists():
        pytest.skip(f"{folder} not recorded yet")
    dumps, _ = flightrec.read(folder)
    (pid0, _), d0 = next((k, d) for k, d in dumps.items() if k[1] == 0)
    other = copy.deepcopy(d0)
    other["pg_config"] = {"": {"name": "", "desc": "", "ranks": "[0]"}}
    for e in other["entries"]:
        e["retired"] = True
    a = flightrec.analyse({**dumps, (pid0 + 1000, 0): other})
    assert a["lines"] == flightrec.analyse(dumps)["lines"]
    assert [g["waiting"] for g in a["groups"]] == [{0: pid0}]


def test_the_dumper_runs_in_forked_children_and_not_without_its_folder(tmp_path):
    """A fresh interpreter (no torch: the thread never imports it): with ROCMKIT_FR_DIR its thread runs, in a forked
    child too (vLLM may fork its workers); without it, importing the module starts nothing."""
    code = ("import os, threading\nimport rocmkit.stall.frdump\n"
            "names = lambda: [t.name for t in threading.enumerate()]\n"
            "pid = os.fork()\n"
            "if pid == 0:\n    print('child', names(), flush=True); os._exit(0)\n"
            "os.waitpid(pid, 0); print('parent', names())\n")
    env = {**os.environ, "PYTHONPATH": str(HERE.parent)}
    on = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                        env={**env, "ROCMKIT_FR_DIR": str(tmp_path)})
    off = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                         env={k: v for k, v in env.items() if k != "ROCMKIT_FR_DIR"})
    assert on.stdout.splitlines() == ["child ['MainThread', 'rocmkit-fr-dump']",
                                      "parent ['MainThread', 'rocmkit-fr-dump']"], on.stderr
    assert off.stdout.splitlines() == ["child ['MainThread']", "parent ['MainThread']"], off.stderr


def test_one_line_per_group_the_culprit_first_the_plumbing_last():
    """Four ranks of one actor, three in the same collective frame and one elsewhere, beside a driver and Ray's own:
    the straggler's line first, the three ranks on one line, the rest folded into one."""
    at = {"kind": "collective", "at": "all_gather_into_tensor (torch/distributed/distributed_c10d.py:4010)",
          "caller": "step (train.py:40)"}
    procs = [{"pid": 100 + r, "role": "Ray actor WorkerDict", "rank": str(r), "state": "sleeping", "python": True,
              "cpu_pct": 0.5, "wait": dict(at)} for r in (0, 2, 3)]
    procs.append({"pid": 101, "role": "Ray actor WorkerDict", "rank": "1", "state": "sleeping", "python": True,
                  "cpu_pct": 0.0, "wait": {"kind": "socket read", "at": "recv (libc.so.6)",
                                           "caller": "fetch_reward (reward.py:12)"}})
    procs += [{"pid": 10, "role": "verl driver", "rank": None, "state": "sleeping", "python": True, "cpu_pct": 0.1,
               "wait": {"kind": "ray get", "at": "get (ray/_private/worker.py:3009)", "caller": ""}},
              {"pid": 11, "role": "Ray raylet", "rank": None, "state": "sleeping", "python": False, "cpu_pct": 1.0},
              {"pid": 12, "role": "Ray idle worker", "rank": None, "state": "sleeping", "python": True,
               "cpu_pct": 0.0, "wait": {"kind": "poll", "at": "epoll_wait (libc.so.6)", "caller": ""}},
              {"pid": 13, "role": "Ray idle worker", "rank": None, "state": "sleeping", "python": True,
               "cpu_pct": 0.0, "wait": {"kind": "poll", "at": "epoll_wait (libc.so.6)", "caller": ""}}]
    v = verdict.judge(procs)
    assert v["lines"] == [
        "the job waits for rank 1 (pid 101, Ray actor WorkerDict): its peers wait in a collective and it is not in "
        "one: it is idle (0 % CPU) in a socket read (an HTTP/ZMQ/TCP peer's answer) at fetch_reward (reward.py:12) "
        "(innermost: recv (libc.so.6))",
        "ranks 0, 2, 3 (pid 100, 102, 103) of Ray actor WorkerDict wait in a collective (torch.distributed / NCCL / "
        "RCCL / gloo) at step (train.py:40)",
        "and 4 more process(es) of the run's plumbing wait or idle by design: verl driver, Ray raylet, "
        "2 Ray idle worker"]
    assert v["summary"] == ". ".join(v["lines"]) and v["health"] == "waiting"
