"""The kernel's messages of this boot and the previous one from the systemd journal, for the kernel-log
scan (checks/kernel_log.py). The ring buffer behind /dev/kmsg starts empty at every boot, so the fault that
hung a node before its reboot is only in the journal of the earlier boot (when journald keeps it on disk:
Storage=persistent, or /var/log/journal exists with Storage=auto).

Live, it is `journalctl -k -b <0|-1> -o json --no-pager` under a deadline (rocmkit.runtime.proc): one JSON
object per line, the journal's JSON format (systemd's "Journal JSON Format",
https://systemd.io/JOURNAL_EXPORT_FORMATS/#journal-json-format; field meanings in systemd.journal-fields(7)):
MESSAGE (a string, an array of bytes when it is not UTF-8, null when larger than the data threshold),
PRIORITY (the syslog level, a decimal string), _BOOT_ID, __REALTIME_TIMESTAMP (µs since the epoch),
_SOURCE_MONOTONIC_TIMESTAMP (µs since boot: the kernel's own timestamp of the record), _TRANSPORT=kernel.
The current boot is read only when /dev/kmsg could not be (its records are the same ones); the previous boot
every run (one short subprocess).

Capture format (`rocmkit doctor --capture DIR`): DIR/rocmkit/journal-b0.json and journal-b-1.json, a first
line `#rocmkit-journal v1 boot=0|-1 records=N capped=0|1`, then journalctl's lines as it printed them. Why a
boot could not be read (no journalctl, no persistent journal, a deadline) is in DIR/rocmkit-read-errors.json
under the file's name, so `--root DIR` says it as the host did.
"""

from __future__ import annotations

import json
import re
from typing import NamedTuple
from pathlib import Path

from .kernlog import Record

HEADER = "#rocmkit-journal v1"
BOOTS = {0: "this boot", -1: "previous boot"}
# The last this-many kernel records of a boot (-n): the ones before a hang are the last ones, and a
# boot's kernel messages are a few thousand on a healthy GPU node.
MAX_RECORDS = 50_000
DEADLINE_S = 5.0  # journalctl reads only the indexed kernel entries: well under a second on a busy node
FIELDS = "MESSAGE,PRIORITY,_BOOT_ID,__REALTIME_TIMESTAMP,_SOURCE_MONOTONIC_TIMESTAMP,SYSLOG_IDENTIFIER,_TRANSPORT"


def file_for(boot: int) -> str:
    return f"rocmkit/journal-b{boot}.json"


class BootLog(NamedTuple):
    """One boot's kernel records from the journal; it answers as kernlog.KernelLog does, so the kernel-log
    check scans either."""

    boot: int  # 0: this boot, -1: the previous one
    source: str  # the journalctl command, or the captured file
    text: str | None  # journalctl's JSON lines; None when not read
    error: str | None = None
    capped: bool = False  # MAX_RECORDS reached: earlier records of that boot were not read
    lost: int = 0  # (kernlog.KernelLog's field; the journal loses none while it is read)

    @property
    def label(self) -> str:
        return BOOTS.get(self.boot, f"boot {self.boot}")

    @property
    def boot_id(self) -> str | None:
        for line in (self.text or "").splitlines():
            entry = _entry(line)
            if entry and isinstance(entry.get("_BOOT_ID"), str):
                return entry["_BOOT_ID"]
        return None

    def records(self) -> list[Record]:
        return parse(self.text or "")


class Journal(NamedTuple):
    """The boots read from the journal (0: this boot, -1: the previous one)."""

    boots: dict[int, BootLog]

    def boot(self, n: int) -> BootLog | None:
        return self.boots.get(n)


def _entry(line: str) -> dict | None:
    if not line.startswith("{"):
        return None
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    return entry if isinstance(entry, dict) else None


def _message(value) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(b, int) and 0 <= b < 256 for b in value):
        return bytes(value).decode("utf-8", errors="replace")  # a message that is not UTF-8
    return None  # null: over the data threshold; anything else is not the journal's format


def parse(text: str) -> list[Record]:
    """Kernel records of journalctl's JSON lines, in order; lines that are not kernel entries, malformed
    lines and the capture's header are skipped. seq is the record's place in the boot's read (the journal
    keeps the kernel's sequence number only in the binary log), usec the kernel's timestamp."""
    out = []
    for line in text.splitlines():
        entry = _entry(line)
        if entry is None or entry.get("_TRANSPORT", "kernel") != "kernel":
            continue
        message = _message(entry.get("MESSAGE"))
        if message is None:
            continue
        pri = str(entry.get("PRIORITY", "6"))
        usec = str(entry.get("_SOURCE_MONOTONIC_TIMESTAMP", "0"))
        out.append(Record(level=int(pri) & 7 if pri.isdigit() else 6, seq=len(out),
                          usec=int(usec) if usec.isdigit() else 0, message=message.rstrip("\n")))
    return out


def _why(output: str, boot: int) -> str:
    text = " ".join(output.split())
    none = re.search(r"No such boot ID|out of range|not available", text)
    if "No journal files were found" in text or (boot == 0 and (none or not text)):
        return ("the systemd journal holds nothing of this boot (journald not running, or a container without the "
                "host's journal)")
    if none:
        return ("the journal has no previous boot (journald keeps none across reboots, or a container does not "
                "see the host's /var/log/journal): create /var/log/journal or set Storage=persistent in "
                "journald.conf so the next reboot keeps this boot's kernel log")
    return f"journalctl failed: {text[-300:] or 'no output'}"


def read_live_boot(boot: int, journalctl: str | None = None, extra: tuple[str, ...] = ()) -> BootLog:
    """`extra`: more journalctl arguments (the tests' --directory of a journal they wrote)."""
    import shutil  # here: shutil brings zlib, bz2 and lzma, and a --root run never looks for journalctl

    from ...errors import EnvironmentMissing
    from ...runtime.proc import capture

    exe = journalctl or shutil.which("journalctl")
    argv_shown = f"journalctl -k -b {boot}"
    if not exe:
        return BootLog(boot, argv_shown, None, "journalctl is not installed (no systemd journal on this host)")
    argv = [exe, *extra, "-k", "-b", str(boot), "-o", "json", "--no-pager", "-q", "-n", str(MAX_RECORDS),
            f"--output-fields={FIELDS}"]
    try:
        result = capture(argv, timeout=DEADLINE_S, keep_stdout=True, env={"LC_ALL": "C", "PATH": "/usr/bin:/bin",
                                                                           "SYSTEMD_COLORS": "0"})
    except EnvironmentMissing as exc:
        return BootLog(boot, argv_shown, None, str(exc))
    if result.timed_out:
        return BootLog(boot, argv_shown, None, f"journalctl did not finish within {DEADLINE_S:.0f} s")
    lines = [line for line in result.stdout or [] if line.startswith("{")]
    if result.returncode != 0 or not lines:
        stderr = [line for line in result.tail if not line.startswith("{")]
        return BootLog(boot, argv_shown, None, _why("\n".join(stderr), boot))
    return BootLog(boot, argv_shown, "\n".join(lines) + "\n", capped=len(lines) >= MAX_RECORDS)


def read_captured_boot(reader, boot: int) -> BootLog:
    rel = file_for(boot)
    before = len(reader.read_errors)
    text = reader.text(rel, limit=64 << 20)
    if text is None:
        if len(reader.read_errors) > before:
            return BootLog(boot, rel, None, reader.read_errors[-1][1])
        return BootLog(boot, rel, None, f"not in the captured tree (no {rel})")
    head = text.split("\n", 1)[0]
    meta = dict(re.findall(r"(\w+)=(-?\d+)", head)) if head.startswith(HEADER) else {}
    return BootLog(boot, rel, text, capped=meta.get("capped") == "1")


def read(reader, live: bool, this_boot: bool) -> Journal:
    """The previous boot, and this boot too when `this_boot` (/dev/kmsg was not readable). Live, a boot
    that could not be read is recorded as the read error of its capture file."""
    boots: dict[int, BootLog] = {}
    for boot in ([0] if this_boot else []) + [-1]:
        log = read_live_boot(boot) if live else read_captured_boot(reader, boot)
        if live and log.error:
            reader.read_errors.append((file_for(boot), log.error))
        boots[boot] = log
    return Journal(boots)


def write_capture(dest: Path, journal: Journal) -> None:
    for boot, log in journal.boots.items():
        if log.text is None:
            continue  # its reason travels in rocmkit-read-errors.json
        out = Path(dest) / file_for(boot)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(f"{HEADER} boot={boot} records={len(log.records())} capped={int(log.capped)}\n{log.text}")
