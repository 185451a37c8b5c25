"""PCIe AER error counters since boot of one PCI device, from sysfs (read for each GPU, RDMA NIC and the
bridges above them by health.py; judged by checks/pcie_aer.py).

Format (Linux Documentation/ABI/testing/sysfs-bus-pci-devices-aer_stats, drivers/pci/pcie/aer.c, since 4.19):
- `<dev>/aer_dev_correctable`: one "NAME COUNT" line per correctable error bit the kernel names (RxErr,
  BadTLP, BadDLLP, Rollover, Timeout, NonFatalErr, CorrIntErr, HeaderOF), then "TOTAL_ERR_COR N";
- `<dev>/aer_dev_nonfatal`, `<dev>/aer_dev_fatal`: the same for the uncorrectable bits (Undefined, DLP, SDES,
  TLP, FCP, CmpltTO, CmpltAbrt, UnxCmplt, RxOF, MalfTLP, ECRC, UnsupReq, ACSViol, UncorrIntErr, BlockedTLP,
  AtomicOpBlocked, TLPBlockedErr, PoisonTLPBlocked; older kernels name fewer), then "TOTAL_ERR_NONFATAL N" /
  "TOTAL_ERR_FATAL N";
- on root ports (and root complex event collectors) also `aer_rootport_total_err_{cor,fatal,nonfatal}`: one
  number, the error messages the port received from its whole hierarchy.
The files exist only where the device has the AER capability and the kernel's AER driver owns it (not under
`pci=noaer`, nor where the firmware keeps AER, "firmware first"). The counts are as the device reports
them: a link's errors may be counted at its partner (the bridge above) rather than at the device, which is
why the bridges are read too (the ABI document says so).
"""

from __future__ import annotations

import re
from typing import NamedTuple

SEVERITIES = ("correctable", "nonfatal", "fatal")
ROOTPORT = ("cor", "nonfatal", "fatal")


class Aer(NamedTuple):
    """The AER counters of one PCI device (see the module's docstring for the files)."""

    counts: dict[str, dict[str, int]]  # severity -> {bit name: count}
    totals: dict[str, int]  # severity -> its TOTAL_ERR_* line
    rootport: dict[str, int] | None  # cor/nonfatal/fatal messages a root port received
    errors: list[str]  # files present but unreadable or not in the format

    def total(self, severity: str) -> int:
        """The TOTAL line where the kernel wrote one, else the sum of the bits."""
        return self.totals.get(severity, sum(self.counts.get(severity, {}).values()))


LINE = re.compile(r"^\s*(\S+)\s+([0-9]+)\s*$", re.M)


def read_aer(reader, base: str) -> Aer | None:
    """The AER counters under sysfs folder `base` (root-relative); None where the device has no AER files.
    Each file is opened directly (a missing one is (None, None) from the Reader): no stat before the read,
    as 40 devices of an 8-GPU host cost 6 ms more that way."""
    counts: dict[str, dict[str, int]] = {}
    totals: dict[str, int] = {}
    errors: list[str] = []
    found = False
    for severity in SEVERITIES:
        data, why = reader.raw(f"{base}/aer_dev_{severity}", 4096)
        if data is None and why is None:
            continue
        found = True
        pairs = LINE.findall(data.decode("ascii", errors="replace")) if data is not None else []
        if not pairs:
            errors.append(f"aer_dev_{severity}")
            continue
        bits: dict[str, int] = {}
        for name, count in pairs:
            if name.startswith("TOTAL_ERR_"):
                totals[severity] = int(count)
            else:  # "Undefined" can appear more than once on some kernels: add them
                bits[name] = bits.get(name, 0) + int(count)
        if bits:
            counts[severity] = bits
    if not found:
        return None  # (only root ports have the rootport totals, and every AER-capable port has aer_dev_*)
    rootport: dict[str, int] = {}
    for kind in ROOTPORT:
        data, why = reader.raw(f"{base}/aer_rootport_total_err_{kind}", 256)
        if data is None and why is None:
            continue
        value = (data or b"").decode("ascii", errors="replace").strip()
        if value.isdigit():
            rootport[kind] = int(value)
        else:
            errors.append(f"aer_rootport_total_err_{kind}")
    return Aer(counts, totals, rootport or None, errors)


def uptime_s(reader) -> float | None:
    """Seconds since boot (/proc/uptime's first field): the time over which the counters grew."""
    m = re.match(r"\s*([0-9]+(?:\.[0-9]+)?)\s", (reader.text("proc/uptime", limit=256) or "") + " ")
    return float(m.group(1)) if m else None
