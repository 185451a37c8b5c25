"""What certify runs beside the engine's start-up, in one thread, in order: the GPU probes, then the setup's slow
checks. verl's first tens of seconds use no GPU memory (on an H200: Ray, the trainer's imports and data for about
75 s), while rocmkit's own work before the run took 25 s in series (imports of verl and vLLM 14 s, vLLM's
sleep-mode pool 3 s, verl's validation 2 s, vLLM's model inspection 26-48 s in the background) and the probes
16 s more.

The probes come first, while nothing else holds GPU memory (the checks' sleep-mode pool test takes some, and the
inspection can keep the checks going for tens of seconds); if another process held memory on a probed GPU when
they ended (read then), their figures are kept but not judged: they may be the engine's load, not the GPU's.
The checks are the setup's "beside" part (intarget/setup.py): when one fails, `stop_reason` says so and the run is
stopped (the watchdog's `also_stop`), and the certificate is the one the check would have given before the run.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable

from . import busy

STOPPED = "setup check failed"  # the run's stop reason when a check beside it failed
GRACE_S = 10.0  # past the deadline, for the thread's own runner to stop what it started
CANCELLED = "certify is ending"  # the checks' stop reason when certify ends before the run does


class Beside:
    def __init__(self, *, checks: Callable[[float, Callable], tuple] | None, refuses: Callable[[tuple], str | None],
                 probes: Callable[[], dict | None] | None, pcis: set[str], deadline: float):
        # checks(deadline, stop_when): stop_when is the runner's (runtime/proc.py), asked while the part runs
        self.checks, self.refuses, self.probes, self.pcis = checks, refuses, probes, pcis
        self.cancelled = threading.Event()
        self.checked: tuple | None = None  # what `checks` returned: (the process's result, its report, its lines)
        self.refused: str | None = None  # why a check refused the target, once it has
        self.doc: dict | None = None  # the probes' document
        self.checks_s = self.probes_s = 0.0
        self.thread = threading.Thread(target=self._work, args=(deadline,), daemon=True, name="rocmkit-beside")
        self.thread.start()

    def _work(self, deadline: float) -> None:
        if self.probes is not None:
            self._measure()
        if self.checks is not None and not self.cancelled.is_set():
            started = time.monotonic()
            try:
                self.checked = self.checks(deadline, lambda pids: CANCELLED if self.cancelled.is_set() else None)
                self.refused = self.refuses(self.checked)
            except Exception as exc:  # noqa: BLE001 - a check that cannot run stops the run, saying why
                self.refused = f"the setup's checks beside the run could not run: {type(exc).__name__}: {exc}"
            self.checks_s = time.monotonic() - started

    def _measure(self) -> None:
        started = time.monotonic()
        try:
            doc = self.probes()
        except Exception as exc:  # noqa: BLE001 - a probe that breaks is a finding; the run goes on
            doc = {"error": f"the GPU probes failed: {type(exc).__name__}: {exc}"}
        self.probes_s = time.monotonic() - started
        if doc is not None and not doc.get("error"):
            held = [h for h in busy.read_holders()
                    if h.pid != os.getpid() and (not self.pcis or self.pcis & set(h.memory))]
            if held:
                who = ", ".join(f"pid {h.pid} ({h.comm or '?'})" for h in held[:4])
                doc["overlap"] = f"measured while {who} held memory on the probed GPUs: reported, not judged"
        self.doc = doc

    def cancel(self) -> None:
        """certify is ending without the run's end (a signal, an error): the checks' process (and its container)
        is stopped by its runner, and the thread waited for, a few seconds at most."""
        self.cancelled.set()
        self.thread.join(timeout=GRACE_S)

    def stop_reason(self) -> str | None:
        """The watchdog's extra reason to stop the run: a check beside it failed."""
        return STOPPED if self.refused else None

    def result(self, deadline: float, timings: dict) -> dict | None:
        """Waits for the thread and returns the probes' document; the seconds go to timings. The wait ends at the
        deadline, and a little after it: what the thread runs has the same deadline, and its runner then stops its
        process and removes its container."""
        self.thread.join(timeout=max(0.0, deadline - time.monotonic()) + GRACE_S)
        if self.checks is not None:
            timings["checks_beside_s"] = round(self.checks_s, 3)
        if self.probes is not None:
            timings["probes_beside_s"] = round(self.probes_s, 3)
        if self.thread.is_alive() and self.doc is None and self.probes is not None:
            return {"error": "the GPU probes were still running at the --timeout"}
        return self.doc
