"""What a long command shows while it works: a live display (rich) on a terminal, plain lines elsewhere.

One display per command. `stage(name)` starts a named stage (its elapsed time ticks on a terminal),
`update(text)` changes what the current stage says, `note(text)` prints a line that stays. Plain mode
(not a terminal, CI set, or --progress plain) prints each stage, update and note as one line, so logs
read in order. Rich serialises its own refreshes and prints, so no line is torn.
"""

from __future__ import annotations

import os
import sys
import time
from typing import TextIO

MODES = ("auto", "tty", "plain")


def resolve_mode(mode: str = "auto", stream: TextIO | None = None) -> str:
    """"tty" or "plain": auto picks tty for a terminal outside CI."""
    if mode != "auto":
        return mode
    stream = stream or sys.stderr
    return "tty" if stream.isatty() and not os.environ.get("CI") else "plain"


class Display:
    def __init__(self, prefix: str, mode: str = "auto", stream: TextIO | None = None):
        self.prefix = prefix
        self.stream = stream or sys.stderr
        self.mode = resolve_mode(mode, self.stream)
        self._progress = None
        self._task = None
        self._stage = ""
        self._stage_started = time.monotonic()

    def __enter__(self) -> "Display":
        if self.mode == "tty":
            from rich.console import Console
            from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

            self._progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                                      console=Console(file=self.stream), transient=True)
            self._progress.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def _say(self, text: str) -> None:
        if self._progress is not None:
            self._progress.console.print(text, markup=False, highlight=False)
        else:
            self.stream.write(text + "\n")
            self.stream.flush()

    def stage(self, name: str, detail: str = "", *, took: float | None = None) -> None:
        """A new stage: on a terminal the previous one leaves a line with its time. took: the previous stage's
        time as the command measured and reports it elsewhere (certify's run time), said in both modes so the
        progress and the report say one figure."""
        if took is not None and self._progress is None:
            self._say(f"{self.prefix}: {self._stage} ({took:.1f} s)")
        if self._progress is not None:
            if self._task is not None:
                self._progress.remove_task(self._task)
                spent = took if took is not None else time.monotonic() - self._stage_started
                self._say(f"{self.prefix}: {self._stage} ({spent:.1f} s)")
            self._task = self._progress.add_task(f"{self.prefix}: {name}" + (f" — {detail}" if detail else ""))
        else:
            self._say(f"{self.prefix}: {name}" + (f" — {detail}" if detail else ""))
        self._stage, self._stage_started = name, time.monotonic()

    def update(self, text: str) -> None:
        if self._progress is not None and self._task is not None:
            self._progress.update(self._task, description=f"{self.prefix}: {self._stage} — {text}")
        else:
            self._say(f"{self.prefix}: {self._stage} — {text} ({time.monotonic() - self._stage_started:.0f} s)")

    def note(self, text: str) -> None:
        self._say(f"{self.prefix}: {text}")

    def done(self) -> None:
        """End the last stage (on a terminal it leaves its line with the time)."""
        if self._progress is not None and self._task is not None:
            self._progress.remove_task(self._task)
            self._say(f"{self.prefix}: {self._stage} ({time.monotonic() - self._stage_started:.1f} s)")
            self._task = None


class Board:
    """Rows that change state (a build's stages): one live table on a terminal, redrawn by rich under one
    lock with every update, so no line is torn; `note` prints a line that stays above it. Not for plain mode:
    there the caller prints its own lines."""

    def __init__(self, title: str, rows: list[str], stream: TextIO | None = None):
        import threading

        self.title = title
        self.stream = stream or sys.stderr
        self.rows: dict[str, dict] = {r: {"state": "waiting", "detail": "", "started": None, "seconds": None}
                                      for r in rows}
        self.lock = threading.Lock()
        self.started = time.monotonic()
        self._live = None

    def __enter__(self) -> "Board":
        from rich.console import Console
        from rich.live import Live

        self._live = Live(self, console=Console(file=self.stream), refresh_per_second=4, transient=False)
        self._live.start()
        return self

    def __exit__(self, *exc) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def set(self, row: str, state: str, detail: str = "", *, seconds: float | None = None) -> None:
        with self.lock:
            r = self.rows.setdefault(row, {"state": "waiting", "detail": "", "started": None, "seconds": None})
            if state == "running" and r["started"] is None:
                r["started"] = time.monotonic()
            r["state"], r["detail"] = state, detail
            if seconds is not None:
                r["seconds"] = seconds
            elif state != "running" and r["started"] is not None:
                r["seconds"] = time.monotonic() - r["started"]

    def note(self, text: str) -> None:
        if self._live is not None:
            self._live.console.print(text, markup=False, highlight=False)

    STYLE = {"running": "bold cyan", "done": "green", "cached": "dim", "FAILED": "bold red", "canceled": "yellow",
             "waiting": "dim"}

    def __rich_console__(self, console, options):
        from rich.table import Table
        from rich.text import Text

        yield Text(f"{self.title} — {time.monotonic() - self.started:.0f} s", no_wrap=True, overflow="ellipsis")
        table = Table(box=None, pad_edge=False, expand=False)
        # The first three columns never shrink; what runs now is cut to the width that is left.
        stage_w = max(len(r) for r in self.rows)
        now_w = max(10, options.max_width - stage_w - 8 - 6 - 6)
        table.add_column("stage", no_wrap=True, min_width=stage_w)
        table.add_column("state", no_wrap=True, min_width=8)
        table.add_column("time", justify="right", no_wrap=True, min_width=6)
        table.add_column("now", no_wrap=True, overflow="ellipsis", max_width=now_w)
        now = time.monotonic()
        with self.lock:
            for name, r in self.rows.items():
                secs = r["seconds"] if r["seconds"] is not None else (now - r["started"] if r["started"] else None)
                table.add_row(name, f"[{self.STYLE.get(r['state'], '')}]{r['state']}[/]",
                              f"{secs:.0f} s" if secs is not None else "", r["detail"] if r["state"] == "running" else "")
        yield table
