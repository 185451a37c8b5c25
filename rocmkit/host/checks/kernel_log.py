"""amdgpu and PCIe AER faults in the kernel log since boot (as amd/node-scraper's Dmesg plugin and the
Cluster Validation Suite's dmesg scan do): one finding per pattern that matched, with the count, the first
and last matching lines and the fix; a pass only when the log was read and nothing matched."""

from __future__ import annotations

import bisect
import dataclasses
import re
from dataclasses import dataclass

from ..facts import Facts
from ..facts.kernlog import MAX_BYTES, Record
from ..model import Status
from . import Context, documents, finding

AER_DOC = "https://docs.kernel.org/PCI/pcieaer-howto.html"
AMDGPU_DOC = "https://docs.kernel.org/gpu/amdgpu/debugging.html"
RAS_DOC = "https://rocm.docs.amd.com/en/latest/how-to/system-debugging.html"
NODE_SCRAPER = "amd/node-scraper, plugins/inband/dmesg (its error patterns)"
DRAIN = ("drain the node (scontrol update nodename=NODE state=drain reason=...) and ")


@dataclass(frozen=True)
class Pattern:
    id: str  # kernel.log.<name>
    status: Status  # FAIL: the GPU or link is not fit for a job now; WARN: it happened, it may have recovered
    regex: re.Pattern
    keys: tuple[str, ...]  # lower-case words a matching line must contain: a cheap test before the regex
    title: str
    fix: str
    ref: str


def _p(name: str, status: Status, keys: str, regex: str, title: str, fix: str, ref: str = NODE_SCRAPER) -> Pattern:
    return Pattern(f"kernel.log.{name}", status, re.compile(regex), tuple(keys.split("|")), title, fix, ref)


# Messages as the kernel prints them (drivers/gpu/drm/amd/amdgpu, drivers/pci/pcie/aer.c). AER's words
# changed in Linux 6.x ("Uncorrected"/"Corrected" became "Uncorrectable"/"Correctable"): both are matched.
PATTERNS: tuple[Pattern, ...] = (
    _p("gpu_init", Status.FAIL, "init", r"Fatal error during GPU init|\*ERROR\* (?:hw|sw|early)_init of IP block <\w+> "
       r"failed|amdgpu: .*hw_init of IP block .* failed",
       "amdgpu failed to initialise a GPU (an IP block's init failed)",
       "check the firmware package matches the driver (amdgpu-dkms and linux-firmware from one ROCm release), "
       "then cold-boot the node; if it repeats, " + DRAIN + "report it to the vendor", AMDGPU_DOC),
    _p("gpu_reset_failed", Status.FAIL, "failed", r"GPU reset(?:\(\d+\))? failed|GPU Recovery Failed|ASIC reset failed",
       "a GPU reset failed: the GPU stays hung until the node reboots",
       DRAIN + "reboot it (a failed reset does not recover without one)", AMDGPU_DOC),
    _p("ras_uncorrectable", Status.FAIL, "uncorrectable|ecc fatal|deferred", r"(?i)\buncorrectable hardware errors? detected|\bRAS\b.*\buncorrectable"
       r"|GPU detected ECC Fatal Error|\bdeferred hardware errors? detected",
       "uncorrectable (or deferred) RAS/ECC errors: GPU memory or a block is failing",
       DRAIN + "read the bad pages (amd-smi bad-pages) and RAS counts (amd-smi metric --ecc); replace the GPU "
       "if retired pages keep growing", RAS_DOC),
    _p("aer_uncorrected", Status.FAIL, "uncorrect", r"PCIe Bus Error: severity=Uncorrect(?:ed|able)"
       r"|AER: (?:Multiple )?Uncorrect(?:ed|able) \((?:Non-)?Fatal\) error (?:message )?received",
       "uncorrectable PCIe errors (AER): a GPU or NIC link lost data",
       DRAIN + "reseat or replace the device or riser the AER lines name (its PCI address); check "
       "`lspci -vvv -s ADDR` for LnkSta and the AER status registers", AER_DOC),
    _p("gpu_reset", Status.WARN, "reset", r"GPU reset begin|Issuing Whole GPU reset|GPU reset\(\d+\) succeeded",
       "a GPU was reset since boot (a hang or a fatal error recovered by the driver)",
       "find the job that hung it (the ring-timeout lines name the process); if resets repeat, " + DRAIN
       + "check its RAS counts", AMDGPU_DOC),
    _p("ring_timeout", Status.WARN, "timeout", r"\bring \S+ timeout",
       "a GPU ring (queue) timed out: a kernel or copy hung the GPU",
       "the line names the process; a driver/firmware mismatch or a bad kernel build also does this: check "
       "`rocmkit doctor --level 2`, and if timeouts repeat on this node only, " + DRAIN + "look at its RAS counts",
       AMDGPU_DOC),
    _p("page_fault", Status.WARN, "page fault|protection_fault", r"\[(?:gfxhub|mmhub)\w*\] (?:retry |no-retry )?page fault"
       r"|VM_L2_PROTECTION_FAULT_STATUS",
       "a GPU page fault (an access outside a process's GPU memory)",
       "usually a bug in the faulting program (the line names its pid and process); on a node where it repeats "
       "with different programs, check the RAS counts and bad pages", AMDGPU_DOC),
    _p("xgmi", Status.WARN, "xgmi", r"(?i)\bxgmi\b.*\b(?:error|fail(?:ed|ure)?)\b",
       "xGMI (GPU-to-GPU link) errors: a hive link is degraded or failed to set up",
       "run `rocmkit doctor --level 2` (all-reduce and P2P figures); if a link is slow or the hive is "
       "incomplete, " + DRAIN + "cold-boot it"),
    _p("firmware", Status.WARN, "firmware", r"(?i)amdgpu.*(?:failed to load (?:gpu_info )?firmware|firmware load for "
       r"amdgpu/\S+ failed)",
       "amdgpu could not load a firmware file",
       "install the linux-firmware / amdgpu firmware of the ROCm release that matches the driver, then "
       "update-initramfs -u and reboot (a required firmware also shows as kernel.log.gpu_init)", AMDGPU_DOC),
    _p("kfd", Status.WARN, "kfd|evict|preemption|unrecoverable", r"\b(?:amd)?kfd\b.*\bfail(?:ed|ure)?\b|Failed to evict (?:process )?queues"
       r"|Queue preemption failed|cp might be in an unrecoverable state",
       "the compute (KFD) driver reported failures (queues that could not be preempted or evicted)",
       "often what comes before a GPU reset: look for kernel.log.gpu_reset; update the driver if it repeats "
       "without one", AMDGPU_DOC),
    _p("aer_corrected", Status.WARN, "correct", r"PCIe Bus Error: severity=Correct(?:ed|able)"
       r"|AER: (?:Multiple )?Correct(?:ed|able) error (?:message )?received",
       "corrected PCIe errors (AER): a link retrains or replays (its bandwidth drops)",
       "a few are normal; many on one device mean a marginal link: reseat it, check LnkSta with "
       "`lspci -vvv -s ADDR`", AER_DOC),
)


def scan(records: list[Record]) -> dict[str, list[Record]]:
    """Pattern id -> the records that matched it, in log order. Each pattern's words are found in the whole
    lower-cased log first (str.find runs at C speed), and only the lines holding one are tried with its regex:
    every regex on every line of a 1 MiB log would cost half a second, this a few milliseconds."""
    text = "\n".join(r.message for r in records).lower()
    starts = [0]
    for r in records[:-1]:
        starts.append(starts[-1] + len(r.message) + 1)
    hits: dict[str, list[Record]] = {}
    for p in PATTERNS:
        lines: set[int] = set()
        for key in p.keys:
            pos = text.find(key)
            while pos >= 0:
                line = bisect.bisect_right(starts, pos) - 1
                lines.add(line)
                end = text.find("\n", pos)
                pos = -1 if end < 0 else text.find(key, end)
        matched = [records[i] for i in sorted(lines) if p.regex.search(records[i].message)]
        if matched:
            hits[p.id] = matched
    return hits


@documents("kernel.log", *(p.id for p in PATTERNS),
           what="the kernel log since boot (/dev/kmsg; a capture's `rocmkit/kmsg.txt`) and the previous boot's "
                "(the systemd journal, `journalctl -k -b -1`; this boot's too when /dev/kmsg is unreadable) for "
                "amdgpu and PCIe AER faults: " + ", ".join(f"`{p.id.rsplit('.', 1)[1]}` ({p.status.value})" for p in PATTERNS)
                + "; unreadable (dmesg_restrict without root) is a skip, never a pass")
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
    for p in PATTERNS:
        matched = hits.get(p.id)
        if matched:
            yield finding(p.id, "kernel", p.status, f"{p.title}: {len(matched)} line(s) in the kernel log",
                          fix=p.fix, ref=p.ref, count=len(matched), first=matched[0].line(),
                          last=matched[-1].line(), **scope)
    if not hits:
        note = f" ({'; '.join(caveats)})" if caveats else ""
        yield finding("kernel.log", "kernel", Status.PASS,
                      f"no amdgpu or PCIe AER faults in {len(records)} kernel log records since boot{note}", **scope)


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
        return dataclasses.replace(found, evidence={**found.evidence, "previous_boot": note}) if note else found
    evidence = {**found.evidence, "boot": boot, "boot_id": getattr(log, "boot_id", None)}
    if "caveats" in evidence:  # a journal boot is capped at its last records, not at the ring's first bytes
        evidence["caveats"] = [f"only the last {evidence.get('records')} records of that boot were read"
                               if c.startswith("only the first") else c for c in evidence["caveats"]]
    if note and boot != "previous boot":
        evidence["previous_boot"] = note
    return dataclasses.replace(found, evidence=evidence, title=f"{boot} (journal): {found.title}")


CHECKS = [check_kernel_log]
