"""The kernel log since boot, read for the doctor's fault scan (checks/kernel_log.py).

Live, it is /dev/kmsg, read non-blocking until EAGAIN: one record per read(2), each
"pri,seq,usec,flags[,more];message" followed by dictionary lines that start with a space
(Documentation/ABI/testing/dev-kmsg). /dev/kmsg is not a regular file, so the Reader (which refuses
devices) does not read it; under --root the capture's copy is read through the Reader instead.

Capture format (`rocmkit doctor --capture DIR` writes DIR/rocmkit/kmsg.txt): a first line
`#rocmkit-kmsg v1 records=N capped=0|1 lost=N`, then the records exactly as /dev/kmsg gave them
(dictionary lines included). When /dev/kmsg could not be read, the file is empty and its reason is in
DIR/rocmkit-read-errors.json under "rocmkit/kmsg.txt", so `--root DIR` says why, as the host did.
"""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path
from typing import Iterator, NamedTuple

KMSG_DEVICE = "/dev/kmsg"
KMSG_FILE = "rocmkit/kmsg.txt"
HEADER = "#rocmkit-kmsg v1"
# The ring (log_buf_len) is 128 KiB to 1 MiB on distribution kernels, a little more once formatted as
# /dev/kmsg records; a host booted with a huge log_buf_len is read up to this much, and the finding says so.
MAX_BYTES = 4 << 20
RECORD_BUFFER = 16384  # read(2) of /dev/kmsg fails with EINVAL when one record does not fit


class Record(NamedTuple):
    """One kernel log record."""

    level: int  # syslog level, 0 (emerg) .. 7 (debug)
    seq: int
    usec: int  # since boot
    message: str

    def line(self) -> str:
        """As dmesg shows it: "[  12.345678] message"."""
        return f"[{self.usec // 1_000_000:5d}.{self.usec % 1_000_000:06d}] {self.message}"


class KernelLog(NamedTuple):
    """The kernel log since boot as read (or why it could not be)."""

    source: str  # /dev/kmsg, or the captured file
    text: str | None  # the records as read; None when the log could not be read
    error: str | None = None  # why not
    capped: bool = False  # stopped at MAX_BYTES: later records were not read
    lost: int = 0  # records overwritten while they were read (EPIPE)

    def records(self) -> list[Record]:
        return list(parse(self.text or ""))


REC_RE = re.compile(r"^(\d+),(\d+),(\d+),[^;\n]*;(.*)$", re.M)


def parse(text: str) -> Iterator[Record]:
    """Records of /dev/kmsg text; dictionary lines (leading space), the header and malformed lines are skipped
    (one regex over the whole text: a line-by-line loop costs ten times as much on a 1 MiB log)."""
    for pri, seq, usec, message in REC_RE.findall(text):
        yield Record(level=int(pri) & 7, seq=int(seq), usec=int(usec), message=message.rstrip("\r"))


def read_live(device: str = KMSG_DEVICE, limit: int = MAX_BYTES) -> KernelLog:
    try:
        fd = os.open(device, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        return KernelLog(device, None, f"{device} does not exist (a container without the host's kernel log)")
    except PermissionError as exc:
        why = "permission denied" if exc.errno == errno.EACCES else "operation not permitted"
        return KernelLog(device, None, f"{why}: reading {device} needs root or CAP_SYSLOG while "
                                       "kernel.dmesg_restrict=1")
    except OSError as exc:
        return KernelLog(device, None, f"{device}: {exc.strerror or type(exc).__name__}")
    chunks: list[bytes] = []
    size = lost = 0
    capped = False
    try:
        while True:
            if size >= limit:
                capped = True
                break
            try:
                chunk = os.read(fd, RECORD_BUFFER)
            except BlockingIOError:
                break  # EAGAIN: every record so far has been read
            except BrokenPipeError:
                lost += 1  # EPIPE: the ring overwrote the next record while we read; the next read goes on
                continue
            except OSError as exc:
                return KernelLog(device, None, f"{device}: {exc.strerror or type(exc).__name__}")
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    return KernelLog(device, b"".join(chunks).decode("utf-8", errors="replace"), capped=capped, lost=lost)


def read_captured(reader) -> KernelLog:
    """The capture's copy, through the Reader (so its recorded read error, if any, is reported)."""
    before = len(reader.read_errors)
    text = reader.text(KMSG_FILE, limit=MAX_BYTES + 4096)
    if text is None:
        if len(reader.read_errors) > before:
            return KernelLog(KMSG_FILE, None, f"not readable where it was captured: {reader.read_errors[-1][1]}")
        return KernelLog(KMSG_FILE, None, f"not in the captured tree (no {KMSG_FILE})")
    head = text.split("\n", 1)[0]
    meta = dict(re.findall(r"(\w+)=(\d+)", head)) if head.startswith(HEADER) else {}
    return KernelLog(KMSG_FILE, text, capped=meta.get("capped") == "1", lost=int(meta.get("lost", 0)))


def read(reader, live: bool) -> KernelLog:
    log = read_live() if live else read_captured(reader)
    if live and log.error:
        reader.read_errors.append((KMSG_FILE, log.error))  # the capture records it for --root
    return log


def write_capture(dest: Path, log: KernelLog) -> None:
    """DIR/rocmkit/kmsg.txt of a capture (see the module's docstring)."""
    if log.text is None:
        return  # the read error travels in rocmkit-read-errors.json
    out = Path(dest) / KMSG_FILE
    out.parent.mkdir(parents=True, exist_ok=True)
    count = sum(1 for _ in parse(log.text))
    out.write_text(f"{HEADER} records={count} capped={int(log.capped)} lost={log.lost}\n{log.text}")
