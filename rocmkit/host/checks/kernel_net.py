"""The safety net of the `kernel.log` check: an error-level record (syslog level err, crit, alert or emerg: the
`<N>` of /dev/kmsg, PRIORITY= in the journal) from the GPU, PCIe, IOMMU, MCE/EDAC, storage or network drivers that
no pattern of kernel_patterns.py names is a warning, `kernel.log.unrecognized_error`, with its lines as evidence.

Named patterns win: a line inside a named incident is never the net's, and a run of net lines next to one (at most
MAX_GAP lines away) is taken as part of that incident (the "Process information" line after a ring timeout), so
one incident stays one finding. Lines that healthy boots print at error level are excused by ALLOWED below, each
entry with a public source that shows it harmless. Which driver printed a line is read from its first word: the
driver name dev_err()/pr_err() put there (or "[drm", "[Hardware Error]")."""

from __future__ import annotations

import re

from ..model import Status
from .kernel_patterns import KERNEL_DOC, MAX_GAP, Incident, LazyRegex, Pattern

ERR = 3  # syslog LOG_ERR: 0 emerg, 1 alert, 2 crit, 3 err

# The drivers whose errors can take a GPU job or node down, by the first word of their lines.
SCOPE = re.compile(
    r"^(?:\{\d+\})?(?:\[drm\b|\[Hardware Error\]"
    r"|(?:amdgpu|amdkfd|kfd|amdxcp|amdttm|drm|gpu_sched"  # GPU
    r"|pcieport|pci|pci_bus|pciehp|AER|DPC|EDR"  # PCIe
    r"|AMD-Vi|DMAR|DMAR-IR|iommu"  # IOMMU
    r"|mce|EDAC|GHES|APEI"  # machine checks, memory ECC, firmware-first errors
    r"|nvme\d*|sd|scsi|ata\d+(?:\.\d+)?|md|dm-\d+|device-mapper|XFS|EXT4-fs|BTRFS|megaraid_sas|mpt3sas"  # storage
    r"|mlx[45]_\w+|bnxt_\w+|ice|irdma|i40e|ixgbe|ionic\w*|igb|e1000e|tg3|ib_\w+|rdma_\w+|infiniband|efa|ena"
    r"|cxi\w*|LNet|LNetError|Lustre|LustreError"  # network and the filesystems behind it
    r")\b)")

# Error-level lines of those drivers that healthy boots print: (what the line says, why it is harmless: source).
ALLOWED: tuple[tuple[str, str], ...] = (
    (r"\bDPC: RP PIO log size \d+ is invalid",
     "drivers/pci/pcie/dpc.c dpc_probe: the root port's PIO log size register reads 0 on some platforms; DPC "
     "works without it (thesofproject/sof-test#782: every boot of a healthy machine, filtered there)"),
    (r"\bAMD-Vi: Unable to read/write to IOMMU perf counter",
     "drivers/iommu/amd/init.c init_iommu_perf_ctr: the IOMMU's performance counters are not writable, so they "
     "are not used; the IOMMU itself works (FascodeNet/alterlinux#238: `journalctl -p 3` of a working Ryzen host)"),
    (r"\bEDAC sbridge: (?:Failed to register device with error -19|Couldn't find mci handler"
     r"|CPU SrcID #\d+, Ha #\d+, Channel #\d+ has DIMMs, but ECC is disabled)",
     "drivers/edac/sb_edac.c: memory without ECC, so the EDAC driver does not load (canonical/lxd#9533 and "
     "Koshak1013/HuananzhiX99_BIOS_mods#23: healthy hosts without ECC DIMMs)"),
)
_ALLOWED = re.compile("|".join(f"(?:{rx})" for rx, _ in ALLOWED))

NET = Pattern(
    "kernel.log.unrecognized_error", Status.WARN, LazyRegex(SCOPE.pattern), (),
    "error-level kernel records from the GPU, PCIe, IOMMU, MCE/EDAC, storage or network drivers that no pattern "
    "names",
    "read the lines (in the evidence): they are the driver's own words for a failure rocmkit has no name for yet; "
    "if a healthy boot of this platform prints them, report them so they join the documented allow-list",
    KERNEL_DOC)


def unrecognized(records: list, taken: set[int]) -> list[Incident]:
    """The net's incidents: runs of error-level, in-scope, not allowed lines outside the named incidents (`taken`),
    a gap of at most MAX_GAP lines inside a run; a run next to a named incident belongs to it."""
    runs: list[list[int]] = []
    for i, r in enumerate(records):
        if r.level > ERR or i in taken or not SCOPE.match(r.message) or _ALLOWED.search(r.message):
            continue
        if runs and i - runs[-1][-1] <= MAX_GAP + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    near = (lambda i: any(j in taken for j in range(i - MAX_GAP - 1, i + MAX_GAP + 2)))
    return [Incident(tuple(records[i] for i in run)) for run in runs if not any(near(i) for i in run)]
