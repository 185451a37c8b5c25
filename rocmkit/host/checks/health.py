"""Hardware that is degraded rather than dead: RAS/ECC errors and bad pages, PCIe links trained below their
maximum, ACS on the bridges above GPUs and NICs, other processes holding VRAM, a lowered power cap.
One finding per check with per-device evidence, as gpu.py does."""

from __future__ import annotations

from collections import Counter

from ..facts import Facts
from ..facts.health import ACS_BITS, Link, PciHealth
from ..model import Status
from . import Context, documents, finding

RAS_DOC = "https://docs.kernel.org/gpu/amdgpu/ras.html"
PCI_SYSFS = "https://www.kernel.org/doc/Documentation/ABI/testing/sysfs-bus-pci"
MI300X_OPT = "https://instinct.docs.amd.com/projects/amdgpu-docs/en/latest/system-optimization/mi300x.html"
KFD_PROC_DOC = "https://github.com/torvalds/linux/blob/master/drivers/gpu/drm/amd/amdkfd/kfd_process.c"
HWMON_DOC = "https://docs.kernel.org/gpu/amdgpu/thermal.html"
GIB = 1 << 30


def _gpus(f: Facts) -> list[PciHealth]:
    return list(f.health.gpus.values()) if f.health and f.devices else []


@documents("gpu.ras",
           what="amdgpu RAS counters (`ras/*_err_count`: fail on uncorrectable errors, warn on correctable ones) and `ras/gpu_vram_bad_pages` (fail on F failed pages, warn on R retired or P pending); skip where amdgpu exposes no `ras/` folder")
def check_ras(f: Facts, ctx: Context):
    gpus = _gpus(f)
    if not gpus:
        return
    with_ras = [g for g in gpus if g.ras is not None]
    if not with_ras:
        yield finding("gpu.ras", "gpu", Status.SKIP, "RAS/ECC not checked: amdgpu exposes no ras/ folder for any GPU "
                      "(RAS unsupported on this GPU or kernel, disabled with amdgpu.ras_enable=0, or a VF guest)",
                      ref=RAS_DOC, gpus=[g.pci for g in gpus])
        return
    per, ue_gpus, ce_gpus, failed, retired, unreadable = {}, [], [], [], [], []
    for g in with_ras:
        ue = {b: c["ue"] for b, c in g.ras.items() if c.get("ue")}
        ce = {b: c["ce"] for b, c in g.ras.items() if c.get("ce")}
        pages = dict(Counter(flag for _, _, flag in g.bad_pages or []))
        per[g.pci] = {"ue": ue, "ce": ce, "bad_pages": pages, "unreadable": list(g.ras_errors)}
        ue_gpus += [g.pci] if ue else []
        ce_gpus += [g.pci] if ce else []
        failed += [g.pci] if pages.get("F") else []
        retired += [g.pci] if pages.get("R") or pages.get("P") else []
        unreadable += [g.pci] if g.ras_errors else []
    absent = [g.pci for g in gpus if g.ras is None]
    ev = {"gpus": per, "no_ras_folder": absent}
    if ue_gpus or failed:
        parts = [f"{p}: uncorrectable {per[p]['ue']}" for p in ue_gpus] + \
                [f"{p}: {per[p]['bad_pages']['F']} bad page(s) failed to retire" for p in failed]
        yield finding("gpu.ras", "gpu", Status.FAIL, f"GPU memory or fabric errors that were not corrected: "
                      f"{'; '.join(parts[:4])}", fix="drain the node and take the GPU out of service: check "
                      "`amd-smi metric --ecc` and `dmesg | grep -i amdgpu`, and return the GPU (RMA) when "
                      "uncorrectable errors or failed pages recur after a reboot", ref=RAS_DOC, **ev)
    elif ce_gpus or retired or unreadable or absent:
        parts = [f"{p}: correctable {per[p]['ce']}" for p in ce_gpus] + \
                [f"{p}: retired/pending pages {per[p]['bad_pages']}" for p in retired] + \
                [f"{p}: could not read {per[p]['unreadable']}" for p in unreadable] + \
                [f"{p}: no ras/ folder" for p in absent]
        yield finding("gpu.ras", "gpu", Status.WARN, f"GPU health to watch: {'; '.join(parts[:4])}",
                      fix="correctable errors and retired pages are handled by the driver, but a count that grows "
                          "predicts a failing HBM stack: track `amd-smi metric --ecc` across runs and replace the "
                          "GPU when it keeps rising", ref=RAS_DOC, **ev)
    else:
        yield finding("gpu.ras", "gpu", Status.PASS, f"no RAS/ECC errors and no bad pages on {len(with_ras)} GPU(s)",
                      ref=RAS_DOC, **ev)


def _below(link: Link | None) -> tuple[bool, bool]:
    """(speed below its maximum, width below its maximum)."""
    if link is None:
        return False, False
    cs, ms, cw, mw = link.gts("current"), link.gts("max"), link.lanes("current"), link.lanes("max")
    return bool(cs and ms and cs < ms), bool(cw and mw and cw < mw)


def _links(f: Facts, devices: dict[str, PciHealth], fid: str, area: str, kind: str):
    if not devices:
        return
    slow, ev, unknown = [], {}, []
    for name, d in devices.items():
        if d.link is None:
            unknown.append(name)
            continue
        up = f.health.bridges.get(d.bridges[0]) if d.bridges else None
        ev[name] = {"pci": d.pci, "current": f"{d.link.current_speed} x{d.link.current_width}",
                    "max": f"{d.link.max_speed} x{d.link.max_width}",
                    "upstream": {"bridge": up.pci, "current": f"{up.link.current_speed} x{up.link.current_width}"}
                    if up and up.link else None}
        speed, width = _below(d.link)
        if speed or width:
            slow.append((name, speed, width))
    if not ev:
        yield finding(fid, area, Status.SKIP, f"PCIe link state of the {kind}s not in sysfs "
                      "(no current_link_speed/width: a VF guest or a container without the host's sysfs)",
                      ref=PCI_SYSFS, devices=unknown)
        return
    if slow:
        shown, only_speed = [], all(not w for _, _, w in slow)
        for name, _, _ in slow:
            e = ev[name]
            shown.append(f"{name}{'' if name == e['pci'] else ' (' + e['pci'] + ')'} at {e['current']} of {e['max']}")
        title = f"{len(slow)} {kind}(s) trained below their PCIe maximum: {'; '.join(shown[:4])}"
        if only_speed and kind == "GPU":
            title += (" (only the speed is lower: amdgpu lowers the link speed of an idle GPU to save power, so "
                      "check again under load before reseating)")
        yield finding(fid, area, Status.WARN, title, ref=PCI_SYSFS, devices=ev, unreadable=unknown,
                      fix="check `sudo lspci -vv -s <slot> | grep -E 'LnkCap|LnkSta'` under load; if it stays low: "
                          "reseat the card and its riser or cable, set the slot to Gen5/Auto (not Gen4 or "
                          "x8/x8 bifurcation) in the BIOS, and update the BIOS and the retimer firmware")
    elif unknown:
        yield finding(fid, area, Status.WARN, f"PCIe link state unreadable for {len(unknown)} {kind}(s): "
                      f"{unknown[:4]}", ref=PCI_SYSFS, devices=ev, unreadable=unknown)
    else:
        yield finding(fid, area, Status.PASS, f"{len(ev)} {kind}(s) at their maximum PCIe link "
                      f"({', '.join(sorted(set(e['current'] for e in ev.values())))})", ref=PCI_SYSFS, devices=ev)


@documents("gpu.pcie_link",
           what="each GPU's PCIe `current_link_speed`/`width` against `max_link_speed`/`width` (warn, naming the slot; a GPU that is only slower may be power-managed at idle, and the title says so; the upstream bridge's link in the evidence)")
def check_gpu_links(f: Facts, ctx: Context):
    yield from _links(f, {g.pci: g for g in _gpus(f)}, "gpu.pcie_link", "gpu", "GPU")


@documents("nic.pcie_link",
           what="the same for each RDMA NIC (`/sys/class/infiniband/*/device`)")
def check_nic_links(f: Facts, ctx: Context):
    yield from _links(f, f.health.nics if f.health else {}, "nic.pcie_link", "network", "RDMA NIC")


@documents("pcie.acs",
           what="ACS control on every PCIe bridge above a GPU or RDMA NIC, read from its config space (extended capability 0x000D); any bit set (ReqRedir, CmpltRedir, EgressCtrl, SrcValid, …) is a warning, as in AMD's ACS preflight (ROCm/cvs); skipped without root (config beyond 64 bytes is root-only)")
def check_acs(f: Facts, ctx: Context):
    if not f.health:
        return
    above = {b for d in [*_gpus(f), *f.health.nics.values()] for b in d.bridges}
    if not above:
        return
    enabled, need_root, unreadable, checked = {}, [], [], 0
    for pci in sorted(above):
        b = f.health.bridges[pci]
        if b.config_bytes is None:
            unreadable.append(f"{pci} ({b.error or 'no config file'})")
        elif b.config_bytes <= 64:
            need_root.append(pci)
        else:
            checked += 1
            if b.acs_control:
                enabled[pci] = [n for bit, n in ACS_BITS.items() if b.acs_control >> bit & 1] or [hex(b.acs_control)]
    ev = {"enabled": enabled, "needs_root": need_root, "unreadable": unreadable, "bridges_checked": checked}
    if enabled:
        shown = [f"{pci} ({'+ '.join(bits)}+)" for pci, bits in enabled.items()]
        yield finding("pcie.acs", "pcie", Status.WARN, f"ACS is on at {len(enabled)} bridge(s) above GPUs/NICs: "
                      f"{'; '.join(shown[:4])} — it routes peer-to-peer traffic through the root complex, which "
                      "breaks GPU P2P and RDMA peer-to-peer (GPUDirect)", ref=f"{MI300X_OPT}; ROCm/cvs ACS check",
                      fix="disable ACS in the BIOS (PCIe ACS / ACS Enable: Disabled); until the next boot: "
                          "`sudo setpci -s <bridge> ECAP_ACS+0x6.w=0000` for each bridge listed", **ev)
    elif need_root or unreadable:
        why = (f"reading PCIe extended config space needs root (CAP_SYS_ADMIN; a container's root lacks it): "
               f"{len(need_root)} bridge(s) unread") if need_root else f"{len(unreadable)} bridge config(s) unreadable"
        yield finding("pcie.acs", "pcie", Status.SKIP, f"ACS not checked: {why}" +
                      (f"; {checked} bridge(s) read had ACS off" if checked else ""),
                      fix="run `sudo rocmkit doctor --only pcie.acs` on the host", ref=MI300X_OPT, **ev)
    else:
        yield finding("pcie.acs", "pcie", Status.PASS, f"ACS off on the {checked} bridge(s) above the GPUs and NICs",
                      ref=MI300X_OPT, **ev)


@documents("gpu.processes",
           what="other processes holding VRAM on the GPUs (`/sys/class/kfd/kfd/proc/<pid>/vram_<gpu_id>`, their `/proc/<pid>/comm` where visible)")
def check_processes(f: Facts, ctx: Context):
    if not _gpus(f):
        return
    procs = f.health.kfd_procs
    if procs is None:
        yield finding("gpu.processes", "gpu", Status.SKIP, "other GPU processes not checked: "
                      "/sys/class/kfd/kfd/proc is not readable here", ref=KFD_PROC_DOC)
        return
    others = [p for p in procs if p.vram and p.pid != f.health.self_pid]
    idle = [p.pid for p in procs if not p.vram and p.pid != f.health.self_pid]
    ev = {"processes": [{"pid": p.pid, "comm": p.comm, "vram_bytes": p.vram} for p in others],
          "without_vram": idle, "self_pid": f.health.self_pid}
    if others:
        shown = [f"pid {p.pid}{f' ({p.comm})' if p.comm else ''} {sum(p.vram.values()) / GIB:.1f} GiB on "
                 f"{', '.join(sorted(p.vram))}" for p in others]
        yield finding("gpu.processes", "gpu", Status.WARN, f"{len(others)} other process(es) hold VRAM: "
                      f"{'; '.join(shown[:4])}" + (" (host pids)" if f.container else ""),
                      fix="stop them (`amd-smi process` lists them; `kill <pid>`), or give this job other GPUs "
                          "(HIP_VISIBLE_DEVICES); a job started beside them runs out of memory or shares compute",
                      ref=KFD_PROC_DOC, **ev)
    else:
        yield finding("gpu.processes", "gpu", Status.PASS, "no other process holds VRAM on the GPUs"
                      + (f" ({len(idle)} KFD process(es) hold none)" if idle else ""), ref=KFD_PROC_DOC, **ev)


@documents("gpu.power_cap",
           what="each GPU's `hwmon/power1_cap` against `power1_cap_default` (else `power1_cap_max`): warn more than 5 % below")
def check_power_cap(f: Facts, ctx: Context):
    gpus = _gpus(f)
    if not gpus:
        return
    caps, low = {}, []
    for g in gpus:
        p = g.power or {}
        ref = p.get("power1_cap_default") or p.get("power1_cap_max")
        if p.get("power1_cap") is None or not ref:
            continue
        caps[g.pci] = {"cap_w": p["power1_cap"] / 1e6, "reference_w": ref / 1e6}
        if p["power1_cap"] < 0.95 * ref:
            low.append(g.pci)
    unknown = [g.pci for g in gpus if g.pci not in caps]
    if not caps:
        yield finding("gpu.power_cap", "gpu", Status.SKIP, "power caps not checked: no hwmon power1_cap with a "
                      "default or maximum (VF guests have none)", ref=HWMON_DOC, gpus=unknown)
    elif low:
        shown = [f"{p} at {caps[p]['cap_w']:.0f} W of {caps[p]['reference_w']:.0f} W" for p in low]
        yield finding("gpu.power_cap", "gpu", Status.WARN, f"{len(low)} GPU(s) have a lowered power cap: "
                      f"{'; '.join(shown[:4])} — training runs slower", ref=HWMON_DOC, caps=caps, unreadable=unknown,
                      fix="unless the site capped them on purpose: `sudo amd-smi set --gpu <N> --power-cap <W>` "
                          "(or write the default µW to hwmon's power1_cap)")
    else:
        yield finding("gpu.power_cap", "gpu", Status.WARN if unknown else Status.PASS,
                      f"power caps at their default on {len(caps)} GPU(s)" +
                      (f"; unreadable on {unknown[:4]}" if unknown else ""), ref=HWMON_DOC, caps=caps,
                      unreadable=unknown)


CHECKS = [check_ras, check_gpu_links, check_nic_links, check_acs, check_processes, check_power_cap]
