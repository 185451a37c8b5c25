"""The live side of the watchdog (watchdog.py holds its state and its rules, pure): during a run it feeds the
Watch the engine's lines and, every few seconds, what activity.py reads of the run's processes, shows the phase or
the step on the display, and takes the stall report before a stalled run is stopped."""

from __future__ import annotations

import time

from . import activity
from .processes import Processes
from .watchdog import Watch


class Follow:
    """The run's watchdog and what the display says of it: the phase and its time, or the step and the reward.
    On a terminal the text is refreshed once a second; in plain mode a line is printed when the phase or step
    changes, and every PLAIN_EVERY_S while it does not, so a CI log shows what a long wait is waiting for.
    Before a stalled run is stopped, it takes the stall report (rocmkit/stall/) into `stall_report`, its full
    stacks into `stall_dir`."""

    PLAIN_EVERY_S = 30.0

    def __init__(self, display, watch: Watch, stall_dir=None, sample=activity.sample):
        self.display, self.watch, self.stall_dir = display, watch, stall_dir
        self._shown, self._shown_at = None, 0.0
        self.stall_report: dict | None = None
        self._sample, self._last_sample = sample, None  # the run's processes' counters (activity.py)
        self.every_s = activity.sample_every(watch.stall_s)
        self.processes = Processes()  # who each process was, for the cause of a crash (cause.py)
        self.also_stop = None  # another reason to stop the run, asked on every tick (a setup check beside it)

    def before_stop(self, pids: list[int]) -> None:
        """proc.run's on_stop: the stall report on the run's processes as they stand. Never raises: a report that
        fails says why in its place, and the run is stopped all the same."""
        if not self.watch.stopped or self.watch.stopped.reason != "stalled":
            return  # an engine error has its traceback; only a silent run needs its stacks
        from ..stall import report

        self.display.update(f"stalled: taking the stall report of {len(pids)} process(es) before stopping them")
        try:
            self.stall_report = report.take(pids, out_dir=self.stall_dir, since=self.watch.started,
                                            label=self.watch.stopped.message(self.watch.stall_s))
        except Exception as exc:  # noqa: BLE001 - the reporter must never keep the run from being stopped
            self.stall_report = {"error": f"the stall report failed: {type(exc).__name__}: {exc}"}

    def line(self, text: str) -> None:
        self.watch.line(text)
        self._show()

    def tick(self, pids=None) -> str | None:
        """proc.run's stop_when: the watchdog's reason to stop, or None. `pids` (a callable: the run's process
        ids) is read every `every_s` for the work of a silent run (activity.py)."""
        if pids is not None:
            self.processes.note(pids)
            self._read_work(pids)
        reason = self.watch.check() or (self.also_stop() if self.also_stop else None)
        self._show()
        return reason

    def _read_work(self, pids) -> None:
        last, now = self._last_sample, self.watch.clock()
        if self.watch.stall_s == float("inf"):
            return  # no stall timeout: nothing to decide with it
        if last is not None and now - last.at < self.every_s:
            return
        try:
            ids = pids()
            sample = self._sample(ids, now)
        except Exception as exc:  # noqa: BLE001 - a failed read must not stop or crash the run; the output rule holds
            self.watch.read = {"cpu": f"not read: {type(exc).__name__}: {exc}"[:200]}
            self.watch.sampling = False
            return
        self.watch.sampling = True
        self._last_sample = sample
        if last is None or not sample.threads:
            return  # the first read, or the run's processes are gone (it is ending)
        window = activity.working(last, sample)
        calls = sum(c.calls is not None for c in sample.threads.values())
        read = {"cpu": f"{len({k[0] for k in sample.threads})} process(es), {len(sample.threads)} thread(s) "
                       f"from /proc" + ("" if calls == len(sample.threads) else
                                        f" ({len(sample.threads) - calls} without read/write counts)"),
                "gpu": (f"DRM usage stats of {len(sample.gpu)} process(es)" if sample.gpu is not None
                        else "not readable (no DRM usage stats in /proc/<pid>/fdinfo)")}
        self.watch.worked(window, read)

    def _show(self) -> None:
        w, now = self.watch, time.monotonic()
        key = (w.kind, w.detail, w.step)
        every = 1.0 if self.display.mode == "tty" else self.PLAIN_EVERY_S
        if key != self._shown or now - self._shown_at >= every:
            self.display.update(w.status())
            self._shown, self._shown_at = key, now
