"""PCIe AER counter files (aer_dev_correctable/nonfatal/fatal, a root port's aer_rootport_total_err_*) as
Linux prints them (drivers/pci/pcie/aer.c; Documentation/ABI/testing/sysfs-bus-pci-devices-aer_stats), for
treegen's hosts and the AER check's tests. No AMD capture with these files was at hand.

Test support, not part of rocmkit."""

from __future__ import annotations

from pathlib import Path


# The bits drivers/pci/pcie/aer.c names in aer_dev_* (aer_correctable_error_string and
# aer_uncorrectable_error_string of Linux 6.x), in its order.
AER_CORRECTABLE = ("RxErr", "BadTLP", "BadDLLP", "Rollover", "Timeout", "NonFatalErr", "CorrIntErr", "HeaderOF")
AER_UNCORRECTABLE = ("Undefined", "DLP", "SDES", "TLP", "FCP", "CmpltTO", "CmpltAbrt", "UnxCmplt", "RxOF", "MalfTLP",
                     "ECRC", "UnsupReq", "ACSViol", "UncorrIntErr", "BlockedTLP", "AtomicOpBlocked", "TLPBlockedErr",
                     "PoisonTLPBlocked")


def aer_files(counts: dict[str, int], severity_of_uncorrectable: str = "nonfatal") -> dict[str, str]:
    """aer_dev_correctable/nonfatal/fatal texts as the kernel prints them ("NAME COUNT" lines, then TOTAL_ERR_*).
    counts: {"RxErr": 3, "CmpltTO": 1, "fatal:SDES": 1}: an uncorrectable bit is non-fatal unless prefixed."""
    out = {}
    for severity, names, total in (("correctable", AER_CORRECTABLE, "TOTAL_ERR_COR"),
                                   ("nonfatal", AER_UNCORRECTABLE, "TOTAL_ERR_NONFATAL"),
                                   ("fatal", AER_UNCORRECTABLE, "TOTAL_ERR_FATAL")):
        def n(name):
            if severity == "correctable":
                return counts.get(name, 0)
            return counts.get(f"{severity}:{name}", 0) + (counts.get(name, 0) if severity == severity_of_uncorrectable
                                                            and name not in AER_CORRECTABLE else 0)
        values = {name: n(name) for name in names}
        out[severity] = "".join(f"{k} {v}\n" for k, v in values.items()) + f"{total} {sum(values.values())}\n"
    return out


def write_aer(d: Path, counts: dict[str, int], rootport: list[dict[str, int]] | None = None) -> None:
    """A device's aer_dev_* files; a root port's aer_rootport_total_err_* count the messages of its hierarchy
    (the devices in `rootport`)."""
    for severity, text in aer_files(counts).items():
        (d / f"aer_dev_{severity}").write_text(text)
    if rootport is not None:
        totals = {"cor": 0, "nonfatal": 0, "fatal": 0}
        for c in rootport:
            files = aer_files(c)
            for kind, severity in (("cor", "correctable"), ("nonfatal", "nonfatal"), ("fatal", "fatal")):
                totals[kind] += int(files[severity].rsplit(" ", 1)[1])
        for kind, v in totals.items():
            (d / f"aer_rootport_total_err_{kind}").write_text(f"{v}\n")
