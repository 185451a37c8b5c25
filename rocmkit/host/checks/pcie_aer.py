"""PCIe AER error counters since boot of every GPU, RDMA NIC and bridge above them (facts/aer.py): the live
state of the links, where the kernel log (kernel.log.aer_*) only has the messages it has not rotated out.

Thresholds, and why:
- fatal > 0: fail. A fatal uncorrectable error makes the link itself unreliable (PCIe base spec 6.2.2.2.1);
  the kernel's AER recovery resets the link, and an amdgpu or mlx5 behind it loses its state
  (Documentation/PCI/pcieaer-howto.rst).
- non-fatal > 0: fail, except when the only bits are UnsupReq or ACSViol (warn). A non-fatal error leaves
  the link working but loses that transaction (PCIe 6.2.2.2.2): a completion timeout or poisoned TLP on a GPU
  or NIC link is a lost DMA, which the kernel-log check fails too (kernel.log.aer_uncorrected). An
  Unsupported Request is also what a device answers to a config probe it does not implement, and an ACS
  violation is a peer-to-peer request the bridge's ACS blocked (pcie.acs's concern), so those only warn.
- correctable: warn when the link-layer bits (RxErr, BadTLP, BadDLLP, Rollover, Timeout: the receiver errors
  and replays of PCIe 6.2.2.1) exceed DCGM's limit of 8 replays per minute (DCGM_LIMIT_MAX_PCIREPLAY_RATE,
  "the maximum recommended") averaged since boot, or exceed 480 in all (that limit for one hour), since an
  average since boot dilutes a burst during a job. Below that, replays are what a long Gen5 link does now and
  then: no warning, the counts stay in the evidence.
"""

from __future__ import annotations

from ..facts import Facts
from ..facts.aer import Aer
from ..model import Status
from . import Context, documents, finding

ABI_DOC = "https://www.kernel.org/doc/Documentation/ABI/testing/sysfs-bus-pci-devices-aer_stats"
AER_DOC = "https://docs.kernel.org/PCI/pcieaer-howto.html"
DCGM_RATE = "DCGM_LIMIT_MAX_PCIREPLAY_RATE (NVIDIA DCGM, dcgm_gpu_hardware_limits.h)"
LINK_BITS = ("RxErr", "BadTLP", "BadDLLP", "Rollover", "Timeout")
REPLAYS_PER_MIN = 8
REPLAYS_TOTAL = REPLAYS_PER_MIN * 60
BENIGN_NONFATAL = {"UnsupReq", "ACSViol"}
NAMES = {"TLP": "Poisoned TLP", "DLP": "Data Link Protocol", "SDES": "Surprise Down", "FCP": "Flow Control Protocol",
         "CmpltTO": "Completion Timeout", "CmpltAbrt": "Completer Abort", "UnxCmplt": "Unexpected Completion",
         "RxOF": "Receiver Overflow", "MalfTLP": "Malformed TLP", "UnsupReq": "Unsupported Request",
         "ACSViol": "ACS Violation", "UncorrIntErr": "Uncorrectable Internal", "RxErr": "Receiver Error",
         "Rollover": "Replay Rollover", "Timeout": "Replay Timeout"}


def _devices(f: Facts) -> dict[str, tuple[str, Aer | None]]:
    """PCI address -> (its role, its counters): the GPUs, the NICs, then the bridges above them."""
    h = f.health
    out: dict[str, tuple[str, Aer | None]] = {}
    gpus = list(h.gpus.values()) if f.devices else []
    for g in gpus:
        out[g.pci] = ("GPU", g.aer)
    for name, n in h.nics.items():
        out.setdefault(n.pci, (f"NIC {name}", n.aer))
    for d in [*gpus, *h.nics.values()]:
        for b in d.bridges:
            out.setdefault(b, (f"bridge above {d.pci}", h.bridges[b].aer if b in h.bridges else None))
    return out


def _nonzero(counts: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in counts.items() if v}


def _shown(counts: dict[str, int]) -> str:
    return ", ".join(f"{NAMES.get(k, k)} {v}" for k, v in counts.items())


@documents("pcie.aer",
           what="PCIe AER counters since boot (`aer_dev_fatal`, `aer_dev_nonfatal`, `aer_dev_correctable`; a root port's `aer_rootport_total_err_*` as evidence) of each GPU, RDMA NIC and the bridges above them: fatal fails; non-fatal fails (only Unsupported Request or ACS Violation: warns); correctable receiver errors and replays warn above DCGM's 8 per minute since boot or 480 in all; skip where no device has AER counters")
def check_aer(f: Facts, ctx: Context):
    if not f.health:
        return
    devices = _devices(f)
    if not devices:
        return
    uptime = f.health.uptime_s
    fails, warns, per, without, unreadable = [], [], {}, [], []
    for pci, (role, aer) in devices.items():
        if aer is None:
            without.append(pci)
            continue
        if aer.errors:
            unreadable.append(f"{pci} ({', '.join(aer.errors)})")
        fatal = _nonzero(aer.counts.get("fatal", {})) or ({"TOTAL": aer.total("fatal")} if aer.total("fatal") else {})
        nonfatal = _nonzero(aer.counts.get("nonfatal", {})) or (
            {"TOTAL": aer.total("nonfatal")} if aer.total("nonfatal") else {})
        cor = _nonzero(aer.counts.get("correctable", {}))
        link = sum(cor.get(b, 0) for b in LINK_BITS)
        rate = link / (uptime / 60) if uptime else None
        entry = {"role": role, **({"fatal": fatal} if fatal else {}), **({"nonfatal": nonfatal} if nonfatal else {}),
                 **({"correctable": cor} if cor else {}), **({"rootport": aer.rootport} if any((aer.rootport or {}).values()) else {})}
        if len(entry) > 1:
            per[pci] = entry
        who = f"{pci} ({role})"
        if fatal:
            fails.append(f"{who}: fatal {_shown(fatal)}")
        if nonfatal and set(nonfatal) - BENIGN_NONFATAL:
            fails.append(f"{who}: non-fatal {_shown(nonfatal)}")
        elif nonfatal:
            warns.append(f"{who}: non-fatal {_shown(nonfatal)}")
        if link > REPLAYS_TOTAL or (rate is not None and rate > REPLAYS_PER_MIN):
            per_min = f", {rate:.1f}/min since boot" if rate is not None else ""
            warns.append(f"{who}: {link} correctable link errors ({_shown({b: cor[b] for b in LINK_BITS if b in cor})}"
                         f"{per_min})")
    read = len(devices) - len(without)
    ev = {"devices": per, "read": read, "without_aer": without, "unreadable": unreadable, "uptime_s": uptime,
          "thresholds": {"correctable_link_per_min": REPLAYS_PER_MIN, "correctable_link_total": REPLAYS_TOTAL}}
    ref = f"{ABI_DOC}; {AER_DOC}"
    if not read:
        yield finding("pcie.aer", "pcie", Status.SKIP, f"PCIe AER counters not checked: none of the {len(devices)} "
                      "GPUs, NICs and bridges has aer_dev_* files (AER handled by the firmware, pci=noaer, a kernel "
                      "before 4.19, a VF guest, or a container without the host's sysfs)", ref=ABI_DOC, **ev)
    elif fails:
        yield finding("pcie.aer", "pcie", Status.FAIL, f"uncorrectable PCIe errors since boot: {'; '.join(fails[:4])}"
                      + (f" (and {len(fails) - 4} more)" if len(fails) > 4 else "")
                      + (f"; also {len(warns)} warning(s) in the evidence" if warns else ""), ref=ref, **ev,
                      fix="drain the node; reseat or replace the device, riser or cable of the link named (the "
                          "counts at a bridge point at the link below it); `sudo lspci -vvv -s ADDR` shows its "
                          "AER status; the counters reset at the next boot")
    elif warns:
        yield finding("pcie.aer", "pcie", Status.WARN, f"PCIe errors to watch: {'; '.join(warns[:4])}", ref=ref,
                      **ev, fix="a marginal link: check its speed and width (gpu.pcie_link), reseat the card and its "
                                "riser, update the BIOS and retimer firmware; rerun the doctor later to see whether "
                                "the counts still grow")
    else:
        note = f"; {len(without)} without AER counters" if without else ""
        yield finding("pcie.aer", "pcie", Status.WARN if unreadable else Status.PASS,
                      f"no uncorrectable PCIe errors and correctable ones within limits on {read} device(s) since "
                      f"boot{note}" + (f"; unreadable: {unreadable[:4]}" if unreadable else ""), ref=ref, **ev)


CHECKS = [check_aer]
