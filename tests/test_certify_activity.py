"""The watchdog's second signal: what a silent run's processes do. Real child processes through the real runner
(runtime.proc) and watchdog, on a machine kept busy by CPU hogs beside them: one that works silently for twice
the stall timeout is not stopped; one that sleeps, and one that spins as a rank waiting in a collective does,
are stopped at the timeout. The thresholds are held against the kept stall reports of real hung runs."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from rocmkit.certify import activity, watchdog
from rocmkit.certify.activity import Counters, Gpu, Sample
from rocmkit.certify.follow import Follow
from rocmkit.progress import Display
from rocmkit.runtime import proc

STALL_DATA = Path(__file__).parent / "data" / "stall"
STALL_S = 3.0

# a silent start-up: builds fresh buffers and writes them to a cache file, as an engine's compile or weight load
# does, for 2.4 stall timeouts, then prints one line
WORKS = f"""
import os, tempfile, time
end = time.monotonic() + {2.4 * STALL_S}
with tempfile.TemporaryFile() as cache:
    while time.monotonic() < end:
        cache.write(bytearray(1 << 20))
        cache.seek(0)
print("ready", flush=True)
"""
SLEEPS = "import time; time.sleep(60)"
SPINS = "while True: pass"  # busy without touching memory or files: a rank waiting in a collective


@pytest.fixture(scope="module")
def hogs():
    """Both cores kept busy beside the run (the busy CI machine where a healthy start-up was called a stall)."""
    started = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    # The runner adopts the children rocmkit starts after a run began (those its tree orphaned), judged by start
    # time, which the kernel gives from a boot time in whole seconds: hogs started in the same second as a run
    # were counted as its processes (CI: "3 process(es)"). Start them well before.
    time.sleep(1.5)
    yield
    for p in started:
        p.kill()
        p.wait()


def _certify_like(code: str) -> tuple[proc.Result, watchdog.Watch]:
    watch = watchdog.Watch(1, stall_s=STALL_S)
    follow = Follow(Display("test", mode="plain", stream=io.StringIO()), watch)
    result = proc.run([sys.executable, "-c", code], timeout=60, on_line=follow.line, stop_when=follow.tick,
                      grace_s=2)
    return result, watch


def test_a_run_that_works_silently_past_the_stall_timeout_on_a_busy_machine_is_not_stopped(hogs):
    result, watch = _certify_like(WORKS)
    assert result.returncode == 0 and result.stopped is None, watch.stopped and watch.stopped.message(STALL_S)
    record = watch.record()
    assert record["longest_silence_s"] >= 2 * STALL_S, record  # silent past the timeout ...
    assert record["activity"]["longest_idle_s"] < STALL_S, record  # ... but never idle that long
    assert record["activity"]["read"]["cpu"].startswith("1 process(es)")
    assert record["activity"]["samples"] >= 2  # a window at least (a starved test process samples late)


def test_a_silent_idle_run_is_stopped_at_the_stall_timeout_and_says_what_it_read(hogs):
    result, watch = _certify_like(SLEEPS)
    assert result.stopped == "stalled" and result.returncode is None
    stop = watch.stopped
    assert stop.quiet_s >= STALL_S and not stop.capped and stop.spinning == []
    message = stop.message(STALL_S)
    # the idle time it read: the timeout, or more where the watchdog, starved beside the hogs, read late
    idle = re.search(rf"no new step, no new output and no work for (\d+) s \(--stall-timeout {STALL_S:g}; read: "
                     r"output, cpu: 1 process\(es\)", message)
    assert idle and int(idle.group(1)) >= STALL_S, message
    assert "gpu: not readable" in message or "gpu: DRM usage stats" in message
    doc = stop.to_json()
    assert doc["read"]["output"] is True and set(doc["read"]) == {"output", "cpu", "gpu"}


def test_a_run_that_spins_silently_is_stopped_and_the_spinning_thread_named(hogs):
    result, watch = _certify_like(SPINS)
    assert result.stopped == "stalled"
    stop = watch.stopped
    pid = stop.spinning[0][0] if stop.spinning else None
    # the spin was seen (it wants a whole core, whatever it gets beside the hogs) and named; never work
    assert pid is not None and "kept a core busy" in stop.message(STALL_S) and f"pids {pid}" in stop.message(STALL_S)
    assert watch.record()["activity"]["longest_idle_s"] >= STALL_S


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self):
        return self.now


def _window(work: bool, seconds: float = 5.0) -> activity.Window:
    return activity.Window(seconds, [(1, 1, 0.9)] if work else [], [], [], [])


def test_work_delays_the_stop_by_at_most_the_cap():
    clock = Clock()
    w = watchdog.Watch(4, stall_s=30, clock=clock)
    read = {"cpu": "1 process(es), 3 thread(s) from /proc", "gpu": "not readable"}
    while w.check() is None:
        clock.now += 5
        w.worked(_window(True), read)
    stop = w.stopped
    assert stop.capped and stop.quiet_s == pytest.approx(activity.BUSY_CAP * 30)
    assert f"busy silence counts for at most {activity.BUSY_CAP} x --stall-timeout 30" in stop.message(30)
    # who worked is named: pid 1 in every window of the quiet time
    assert stop.working == [(1, pytest.approx(activity.BUSY_CAP * 30))] and "worked most: pid 1 150 s" in stop.message(30)
    assert stop.to_json()["working"] == [[1, 150.0]]
    # a line resets both clocks; after it, idleness alone stops the run at the timeout
    clock.now = 1000.0
    w2 = watchdog.Watch(4, stall_s=30, clock=clock)
    for _ in range(20):
        clock.now += 5
        w2.worked(_window(True), read)
        assert w2.check() is None
    w2.line("(TaskRunner pid=1) step:1 - reward:0.5")
    for _ in range(5):
        clock.now += 5
        w2.worked(_window(False), read)
        assert w2.check() is None
    clock.now += 5
    assert w2.check() == "stalled" and not w2.stopped.capped and w2.stopped.quiet_s == pytest.approx(30)
    assert w2.record()["activity"]["longest_idle_s"] == pytest.approx(30)


def test_a_starved_watchdog_stops_only_for_idleness_it_read():
    # On a loaded machine the watchdog's own reads come late (a CI run stopped a working child this way): silence
    # it did not read is no proof that nothing worked, so the stop waits for a window that saw the idleness
    clock = Clock()
    w = watchdog.Watch(4, stall_s=30, clock=clock)
    w.sampling = True
    read = {"cpu": "1 process(es), 3 thread(s) from /proc", "gpu": "not readable"}
    clock.now += 5
    w.worked(_window(True), read)  # work seen at 5 s, then no read for a long while
    clock.now += 60
    assert w.check() is None  # 60 s of silence, none of it read
    w.worked(_window(False, seconds=60), read)  # the late window: no work in it
    assert w.check() == "stalled" and w.stopped.idle_s == pytest.approx(60)
    # with no read at all, the cap still ends it
    w2 = watchdog.Watch(4, stall_s=30, clock=clock)
    w2.sampling = True
    clock.now += activity.BUSY_CAP * 30 - 1
    assert w2.check() is None
    clock.now += 1
    assert w2.check() == "stalled" and w2.stopped.quiet_s == pytest.approx(activity.BUSY_CAP * 30)


def test_the_rule_thread_by_thread():
    # Counters(cpu_s, wanted_s: ran or waited to run, faults, read/write calls)
    before = Sample(0.0, {(1, 1): Counters(10.0, 10.0, 500, 70), (1, 2): Counters(3.0, 3.0, 9, 4),
                          (2, 2): Counters(1.0, 1.0, 5, None), (3, 3): Counters(0.0, 0.0, 0, 0),
                          (5, 5): Counters(2.0, 9.0, 100, 10)}, None)
    after = Sample(2.0, {(1, 1): Counters(11.8, 11.9, 500, 70),  # a core, nothing else: a spin
                         (1, 2): Counters(3.006, 3.24, 10, 9),  # 0.3 % run, 12 % wanted: chatter on a loaded machine
                         (2, 2): Counters(2.5, 2.9, 6, None),  # a new page: work (its io not readable)
                         (3, 3): Counters(1.8, 1.8, 0, 1),  # a read: work
                         (4, 4): Counters(1.4, 1.6, 40, None),  # a new thread, faulting: work
                         (5, 5): Counters(2.16, 10.98, 900, 10)}, None)  # 8 % of a core got, 99 % wanted: work
    w = activity.working(before, after)
    assert w.spinning == [(1, 1, 0.95)]
    assert [x[:2] for x in w.working] == [(2, 2), (3, 3), (4, 4), (5, 5)] and w.busy


def test_threads_are_read_from_proc():
    me = activity.read_threads([__import__("os").getpid()])
    assert me and all(c.wanted_s >= c.cpu_s > 0 or c.cpu_s == 0 for c in me.values())
    assert activity.read_threads([2**22 + 7]) == {}  # no such process


def test_a_gpu_busy_while_its_memory_changes_is_work_and_busy_alone_is_not():
    idle = {(1, 1): Counters(0.0, 0.0, 0, 0)}
    before = Sample(0.0, idle, {7: Gpu(busy_ns=10**9, memory=2**30), 8: Gpu(10**9, 2**30), 9: Gpu(10**9, 2**30)})
    after = Sample(2.0, idle, {7: Gpu(3 * 10**9, 2**30 + 2**20), 8: Gpu(3 * 10**9, 2**30), 9: Gpu(10**9, 2**31)})
    w = activity.working(before, after)
    assert (w.gpu_working, w.gpu_spinning, w.busy) == ([7], [8], True)


def test_drm_usage_stats_are_read_from_the_kernels_documented_format():
    # Documentation/gpu/panfrost.rst's example of the DRM client usage stats (drm-usage-stats.rst), and the same
    # client seen through a second fd
    text = """pos:    0
flags:  02400002
mnt_id: 27
ino:    531
drm-driver:     panfrost
drm-client-id:  14
drm-engine-fragment:    1846584880 ns
drm-cycles-fragment:    1424359409
drm-maxfreq-fragment:   799999987 Hz
drm-curfreq-fragment:   799999987 Hz
drm-engine-vertex-tiler:        71932239 ns
drm-cycles-vertex-tiler:        52617357
drm-maxfreq-vertex-tiler:       799999987 Hz
drm-curfreq-vertex-tiler:       799999987 Hz
drm-total-memory:       290 MiB
drm-shared-memory:      0 MiB
drm-active-memory:      226 MiB
drm-resident-memory:    36496 KiB
drm-purgeable-memory:   128 KiB
"""
    g = activity.parse_fdinfo([text, text])
    assert g.busy_ns == 1846584880 + 71932239
    assert g.memory == 290 * 2**20 + 36496 * 2**10
    assert activity.parse_fdinfo(["pos: 0\nflags: 02\n"]) is None  # not a DRM file


@pytest.mark.parametrize("name", ["verl-weight-sync", "trl-server"])
def test_every_process_of_the_kept_hung_runs_is_under_the_busy_share(name):
    # the stall reports of real hung runs (verl's first weight sync, TRL's server stopped): what a hung tree does
    # in the background stays far under what counts as work, so it never delays their stop
    report = json.loads((STALL_DATA / f"{name}.json").read_text())["stall_report"]
    shares = [p["cpu_pct"] / 100 for p in report["processes"] if "cpu_pct" in p]
    assert len(shares) >= 7 and max(shares) < activity.BUSY_SHARE / 20
