"""GPU, PCIe and host faults in the kernel log since boot (as amd/node-scraper's Dmesg plugin and the Cluster
Validation Suite's dmesg scan do): one finding per pattern that matched (the table is kernel_patterns.py), with
the number of incidents, the first and last incidents' first lines, the first incident's lines (a multi-line
dump or call trace is one incident) and the fix; a pass only when the log was read and nothing matched."""

from __future__ import annotations

import bisect
import itertools
import re

from ..facts import Facts
from ..facts.kernlog import MAX_BYTES, Record
from ..model import Status
from . import Context, documents, finding
from .kernel_net import NET, unrecognized
from .kernel_patterns import MAX_GAP, PATTERNS, Incident, Pattern

__all__ = ["PATTERNS", "Pattern", "Incident", "scan", "check_kernel_log"]
EVIDENCE_LINES = 40  # lines of the first incident kept in the finding


def _lines_with(text: str, ends: list[int], key: str) -> set[int]:
    """Indices of the lines holding key: str.find over the whole lower-cased log (C speed), and bisect for the
    line of each hit (ends[i]: where line i+1 starts); the next search starts at the next line."""
    lines: set[int] = set()
    find = text.find
    pos = find(key)
    while pos >= 0:
        line = bisect.bisect_right(ends, pos)
        lines.add(line)
        pos = find(key, ends[line]) if line < len(ends) else -1
    return lines


def _incident(p: Pattern, records: list[Record], i: int, own: set[int],
              any_start: set[int]) -> tuple[Incident, list[int]]:
    """The incident pattern p starts at line i, and the indices of its lines."""
    first = records[i].message
    taken = [i]
    worse = bool(p.worse and p.worse.search(first))
    if p.follow is not None and not (p.end and p.end.search(first)):
        gap = 0
        for j in range(i + 1, min(len(records), i + 1 + p.span)):
            message = records[j].message
            if p.end is not None and p.end.search(message):
                taken.append(j)
                worse = worse or bool(p.worse and p.worse.search(message))
                break
            follows = p.follow.search(message) is not None
            if j in any_start and not (j in own and follows):
                break  # another incident begins
            if follows:
                taken.append(j)
                worse = worse or bool(p.worse and p.worse.search(message))
                gap = 0
            else:
                gap += 1
                if gap > MAX_GAP:
                    break
    return Incident(tuple(records[k] for k in taken), worse), taken


def _groups() -> list[tuple[Pattern, ...]]:
    """The table's patterns grouped by their keys (those that share all their keys share their candidate lines)."""
    groups: dict[tuple[str, ...], list[Pattern]] = {}
    for p in PATTERNS:
        groups.setdefault(p.keys, []).append(p)
    return [tuple(g) for g in groups.values()]


_GROUPS = _groups()
_GATES: dict[tuple[str, ...], re.Pattern] = {}


def _gate(group: tuple[Pattern, ...]) -> re.Pattern:
    """One regex matching a line any pattern of the group matches (a leading "(?i)" becomes a scoped group)."""
    key = tuple(p.id for p in group)
    if key not in _GATES:
        parts = [f"(?i:{p.regex.pattern[4:]})" if p.regex.pattern.startswith("(?i)") else f"(?:{p.regex.pattern})"
                 for p in group]
        _GATES[key] = re.compile("|".join(parts))
    return _GATES[key]


def scan(records: list[Record]) -> dict[str, list[Incident]]:
    """Pattern id -> its incidents, in log order. Each pattern's words are found in the whole lower-cased log
    first (a word several patterns share, once), and only the lines holding one are tried with its regex: every
    regex on every line of a 1 MiB log costs most of a second, this about 27 ms, 1.5x parsing the records
    (benchmarks/kernlog_speed.py). A pattern with `follow` takes the lines after its first into the incident (a
    dump, a call trace); the others are one line each."""
    messages = [r.message for r in records]
    text = "\n".join(messages).lower()
    # where each line's successor starts in text (a Python loop over the records cost ~6 ms of a 1 MiB log)
    ends = list(itertools.accumulate(map((1).__add__, map(len, messages))))
    firsts: dict[str, list[int]] = {}
    by_key: dict[str, set[int]] = {}  # a key several patterns share is searched once
    for group in _GROUPS:
        candidates: set[int] = set()
        for key in group[0].keys:
            if key not in by_key:
                by_key[key] = _lines_with(text, ends, key)
            candidates |= by_key[key]
        if not candidates:
            continue
        # A full ring repeats itself (a flood of one driver's line, the same benign line per device): each
        # distinct message is tried once, and its lines follow its verdict.
        distinct = {messages[i] for i in candidates}
        if len(group) > 1:  # one search for the whole group first: most lines holding "fail" match none
            gate = _gate(group).search
            distinct = {m for m in distinct if gate(m)}
        if not distinct:
            continue
        lines = None
        for p in group:
            search = p.regex.compiled().search  # thousands of lines in a noisy log: no wrapper call per line
            hit = {m for m in distinct if search(m)}
            if hit:
                if lines is None:
                    lines = sorted(candidates)
                firsts[p.id] = [i for i in lines if messages[i] in hit]
    # A pattern marked `alone` (detail lines seen without their header) starts no incident inside another one and
    # cuts none short: the other patterns' incidents are made first, then its lines that none of them took.
    any_start = {i for p in PATTERNS if not p.alone for i in firsts.get(p.id, ())}
    hits: dict[str, list[Incident]] = {}
    taken: set[int] = set()
    for p in sorted(PATTERNS, key=lambda p: p.alone):
        lines = [i for i in firsts.get(p.id, ()) if not (p.alone and i in taken)]
        own = set(lines)
        incidents, last = [], -1
        for i in lines:
            if i <= last:
                continue  # a line of the incident before (its own first-line pattern again, e.g. "Oops:")
            incident, its = _incident(p, records, i, own, any_start | own)
            incidents.append(incident)
            taken.update(its)
            last = its[-1]
        if incidents:
            hits[p.id] = incidents
    net = unrecognized(records, taken)
    if net:
        hits[NET.id] = net
    return hits


@documents("kernel.log", *(p.id for p in PATTERNS), NET.id,
           what="the kernel log since boot (/dev/kmsg; a capture's `rocmkit/kmsg.txt`) and the previous boot's "
                "(the systemd journal, `journalctl -k -b -1`; this boot's too when /dev/kmsg is unreadable) for "
                "GPU (amdgpu, RAS), PCIe and host faults: "
                + ", ".join(f"`{p.name}` ({p.severity})" for p in PATTERNS)
                + f"; `{NET.name}` ({NET.severity}): an error-level record of the GPU, PCIe, IOMMU, MCE/EDAC, storage or "
                  "network drivers that no pattern names and no allow-list entry excuses"
                + "; a dump or call trace is one incident; unreadable (dmesg_restrict without root) is a skip, "
                  "never a pass")
def check_kernel_log(f: Facts, ctx: Context):
    journal = getattr(f, "journal", None)
    prev = journal.boot(-1) if journal else None
    note = f"not read: {prev.error}" if prev is not None and prev.text is None else None
    for log, boot in boot_logs(f):
        for found in _scan_log(log):
            yield labelled(found, log, boot, note)


def _scan_log(log):
    if log.text is None:
        yield finding("kernel.log", "kernel", Status.SKIP, f"kernel log not read: {log.error}",
                      fix="run the doctor as root (or with CAP_SYSLOG; in a container: --device=/dev/kmsg "
                          "--cap-add=SYSLOG), or on the host", source=log.source)
        return
    records = log.records()
    if not records:
        yield finding("kernel.log", "kernel", Status.SKIP, f"the kernel log ({log.source}) holds no records",
                      source=log.source)
        return
    caveats = []
    if records[0].seq > 0:
        caveats.append(f"the ring wrapped: records before seq {records[0].seq} ({records[0].usec / 1e6:.0f} s after "
                       "boot) were overwritten")
    if log.capped:
        caveats.append(f"only the first {MAX_BYTES >> 20} MiB were read")
    if log.lost:
        caveats.append(f"{log.lost} record(s) were overwritten while reading")
    scope = dict(source=log.source, records=len(records), first_seq=records[0].seq, capped=log.capped,
                 **({"caveats": caveats} if caveats else {}))
    hits = scan(records)
    for p in (*PATTERNS, NET):
        incidents = hits.get(p.id)
        if incidents:
            status = Status.FAIL if any(i.worse for i in incidents) else p.status
            first = incidents[0].lines
            extra = {"lines": [r.line() for r in first[:EVIDENCE_LINES]]} if len(first) > 1 else {}
            yield finding(p.id, "kernel", status, f"{p.title}: seen {len(incidents)} time(s) since boot",
                          fix=p.fix, ref=p.ref, count=len(incidents), first=first[0].line(),
                          last=incidents[-1].lines[0].line(), **extra, **scope)
    if not hits:
        note = f" ({'; '.join(caveats)})" if caveats else ""
        yield finding("kernel.log", "kernel", Status.PASS,
                      f"no GPU, PCIe or host faults in {len(records)} kernel log records since boot{note}", **scope)


# --- which logs are scanned, and which boot each finding came from (the systemd journal: facts/journal.py)

def boot_logs(f: Facts) -> list[tuple[object, str | None]]:
    """(log, boot) pairs: /dev/kmsg as this boot (or the journal's this boot when /dev/kmsg was unreadable
    and the journal was not), then the journal's previous boot when it was read. boot None: this boot read
    from /dev/kmsg, whose findings read as they always did."""
    kmsg, journal = getattr(f, "kernel_log", None), getattr(f, "journal", None)
    this = journal.boot(0) if journal else None
    logs: list[tuple[object, str | None]] = []
    if kmsg is not None and (kmsg.text is not None or this is None or this.text is None):
        logs.append((kmsg, None))
    elif this is not None:
        logs.append((this, this.label))
    prev = journal.boot(-1) if journal else None
    if prev is not None and prev.text is not None:
        logs.append((prev, prev.label))
    return logs


def labelled(found, log, boot: str | None, note: str | None):
    """A finding of a journal boot names it (title and evidence: the boot and its journal boot id); the
    findings of this boot's log carry why the previous boot was not read (a note: never a failure)."""
    if boot is None:
        return found._replace(evidence={**found.evidence, "previous_boot": note}) if note else found
    evidence = {**found.evidence, "boot": boot, "boot_id": getattr(log, "boot_id", None)}
    if "caveats" in evidence:  # a journal boot is capped at its last records, not at the ring's first bytes
        evidence["caveats"] = [f"only the last {evidence.get('records')} records of that boot were read"
                               if c.startswith("only the first") else c for c in evidence["caveats"]]
    if note and boot != "previous boot":
        evidence["previous_boot"] = note
    return found._replace(evidence=evidence, title=f"{boot} (journal): {found.title}")


CHECKS = [check_kernel_log]
