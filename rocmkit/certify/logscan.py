"""Reading a run's log for what went wrong: which process printed each line (Ray's prefix, or the process nested in
it), the lines that match a known signature, and the exception each process's last traceback ended with. cause.py
decides from what this finds."""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import signatures
from .loglines import ANSI_RE, SOURCE_RE, short
from .signatures import FATAL

NESTED_RE = re.compile(r"^(?:\x1b\[[0-9;]*m)*\((\w+) pid=(\d+)[^)]*\)(?:\x1b\[[0-9;]*m)* \((\w+) pid=(\d+)\)")
TRACEBACK = "Traceback (most recent call last)"
TRACEBACK_SPAN = 400  # lines after a traceback's start within which its exception line is looked for
_EXCEPTION_RE = dict(FATAL)["python.exception"]
# Ray's actor that failed in __init__ prints its traceback's frames after this, with no "Traceback" line
_CREATION_TASK = "Exception raised in creation task:"
# lines that continue a traceback after an exception line: frames, code, carets, the chained-exception words
_GOES_ON_RE = re.compile(r"^(?:\s|$|Traceback|The above exception|During handling|\^)")


@dataclass(frozen=True)
class Event:
    """One line of a log that says something of the failure."""

    file: str  # "run.log", "server.log", "kernel log"
    line: int  # 1-based, in that file
    text: str
    sig: signatures.Signature | None  # None: an exception line with no known signature
    pid: int | None  # the process that printed it (Ray's prefix) or that it names (Ray's "pid: N")


def _indented(line: str) -> str:
    """A line without Ray's "(Actor pid=N) " prefix, its indent kept (short() strips both)."""
    return SOURCE_RE.sub("", ANSI_RE.sub("", line)).removeprefix(" ")


def source_pid(line: str) -> int | None:
    """A line's pid: Ray's prefix's, or the one nested in it: "(vLLMHttpServer pid=1) (EngineCore pid=2) ..."."""
    m = NESTED_RE.match(line) or SOURCE_RE.match(line)
    return int(m.group(m.lastindex)) if m else None


def scan(lines: list[str], file: str, extra: tuple = ()) -> tuple[list[Event], list[Event]]:
    """The lines matching a signature (wrappers included), and the exception each process ended with: the last
    line of each process's last traceback (by Ray's pid prefix; unprefixed lines are the command's own)."""
    found: list[Event] = []
    last_exception: dict[int | None, Event] = {}
    open_tb: dict[int | None, int] = {}  # process -> line of its open traceback's start
    for i, text in enumerate(lines, 1):
        pid = source_pid(text)
        sig = signatures.match(text, extra)
        if sig:
            named = signatures.field(text, sig).get("pid")
            found.append(Event(file, i, text, sig, int(named) if named and named.isdigit() else pid))
        if TRACEBACK in text or _CREATION_TASK in text:
            open_tb[pid] = i
        elif pid in open_tb and i - open_tb[pid] <= TRACEBACK_SPAN:
            said = short(text)
            if _EXCEPTION_RE.search(said):  # the traceback may go on: a chained one, or Ray's copy of a remote one
                last_exception[pid] = Event(file, i, text, sig, pid)
            elif (pid in last_exception and last_exception[pid].line > open_tb[pid]
                  and not _GOES_ON_RE.match(_indented(text))):
                del open_tb[pid]  # the process says something else: its traceback has ended
    return found, sorted(last_exception.values(), key=lambda e: e.line)
