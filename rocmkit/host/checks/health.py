"""Hardware that is degraded rather than dead: RAS/ECC errors and bad pages, PCIe links trained below their
maximum, ACS on the bridges above GPUs and NICs, GPUs that other processes hold (gpu.busy), a lowered power cap.
One finding per check with per-device evidence, as gpu.py does."""

from __future__ import annotations

from collections import Counter

from ..facts import Facts
from ..facts.gpu_holders import describe, size
from ..facts.health import ACS_BITS, Link, PciHealth
from ..model import Status
from . import Context, documents, finding

RAS_DOC = "https://docs.kernel.org/gpu/amdgpu/ras.html"
PCI_SYSFS = "https://www.kernel.org/doc/Documentation/ABI/testing/sysfs-bus-pci"
MI300X_OPT = "https://instinct.docs.amd.com/projects/amdgpu-docs/en/latest/system-optimization/mi300x.html"
KFD_PROC_DOC = "https://github.com/torvalds/linux/blob/master/drivers/gpu/drm/amd/amdkfd/kfd_process.c"
HWMON_DOC = "https://docs.kernel.org/gpu/amdgpu/thermal.html"
VLLM_MEMORY_DOC = "https://github.com/vllm-project/vllm/blob/main/vllm/v1/worker/gpu_worker.py (init_device)"
GIB = 1 << 30
# gpu.busy: others holding this share of a GPU fail it (vLLM takes gpu_memory_utilization of the whole GPU and refuses
# to start when that much is not free; verl's rollouts run at 0.5-0.9); memory no visible process accounts for
# warns from UNSEEN_SHARE (the driver's own use of an idle GPU is a few hundred MiB, under 1 %)
BUSY_SHARE, UNSEEN_SHARE = 0.5, 0.1


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


@documents("gpu.busy",
           what="other processes holding GPU memory (KFD's `/sys/class/kfd/kfd/proc/<pid>/vram_<gpu_id>`; without it, DRM fdinfo `drm-memory-vram` of every process) against each GPU's `mem_info_vram_total`/`_used`: warn when any holds some, fail when less than half of a GPU's memory is free, naming each process, its command and start time")
def check_busy(f: Facts, ctx: Context):
    gpus = _gpus(f)
    if not gpus:
        return
    h = f.health
    mem = {m.pci: m for m in h.gpu_memory}
    pcis = [g.pci for g in gpus] + sorted({p for x in h.holders for p in x.memory} - {g.pci for g in gpus})
    table = {d.pci_address: d for d in f.devices if d.pci_address}
    per, fail, lines = {}, [], []
    for pci in pcis:
        m = mem.get(pci)
        total, used, where = (m.total_bytes, m.used_bytes, m.source) if m else (None, None, None)
        product = table[pci].product if pci in table else None
        if total is None and product and product.memory_gib:  # no mem_info_vram_total: the arch table's size
            total, where = int(product.memory_gib * GIB), "arch table"
        # a GPU split in partitions (CPX, DPX, ...) is shared by design, often by other tenants' jobs, and its
        # memory figures are the whole GPU's: only warned about, never failed on the whole GPU's use
        parts = table[pci].mode_partitions if pci in table else 1
        others = sorted((x for x in h.holders if x.memory.get(pci)), key=lambda x: -x.memory[pci])
        held = sum(x.memory[pci] for x in others)
        # what no process visible here accounts for (other containers' processes without KFD, other users'
        # without root); the driver's own few hundred MiB stay under UNSEEN_SHARE
        unseen = max(0, used - held) if used is not None else 0
        taken = max(held, used or 0)
        per[pci] = {"total_bytes": total, "used_bytes": used, "held_by_others_bytes": held, "unseen_bytes": unseen,
                    "memory_source": where, "partitions": parts}
        if total and taken >= BUSY_SHARE * total and parts == 1:
            fail.append(pci)
        unexplained = bool(total) and unseen >= UNSEEN_SHARE * total
        if others or unexplained or pci in fail:
            line = f"GPU {pci}: {size(taken)}" + (f" of {size(total)}" if total else "") + " in use" + \
                (f" (its {parts} partitions share it)" if parts > 1 else "")
            if others:
                who = [describe(x, pci) for x in others[:3]] + [f"{len(others) - 3} more"] * (len(others) > 3)
                lines.append(f"{line} — {', '.join(who)}" + (f", {size(unseen)} by no process visible here"
                                                           if unexplained else ""))
            else:
                lines.append(f"{line} by no process visible here")
    ev = {"holders": [x.to_json() for x in h.holders], "gpus": per, "source": h.holders_source,
          "self_pid": h.self_pid}
    shown = "; ".join(lines[:4]) + (f"; {len(lines) - 4} more GPU(s)" if len(lines) > 4 else "")
    host = " (host pids: run these on the host)" if f.container and h.holders else ""
    fix = ("stop what is left over: `amd-smi process` lists each GPU's processes, "
           "`ps -o pid,user,lstart,args -p <pid>` says whose and since when, then `kill <pid>` (an orphaned vLLM `VLLM::EngineCore` outlives its parent); "
           "or run on other GPUs with HIP_VISIBLE_DEVICES") + host
    if not h.holders_source and not any(v["used_bytes"] is not None for v in per.values()):
        yield finding("gpu.busy", "gpu", Status.SKIP, "GPU memory and its holders not read: no KFD proc folder "
                      "(/sys/class/kfd/kfd/proc), no DRM fdinfo of any process, no mem_info_vram_used",
                      fix="run it on the host, as root (another user's /proc/<pid>/fdinfo needs it)",
                      ref=KFD_PROC_DOC, **ev)
    elif fail:
        yield finding("gpu.busy", "gpu", Status.FAIL, f"less than half the memory is free on {len(fail)} GPU(s): "
                      f"{shown}{host} — a vLLM or verl job asking for gpu_memory_utilization 0.5 "
                      "or more cannot start there", fix=fix, ref=VLLM_MEMORY_DOC, **ev)
    elif lines:
        yield finding("gpu.busy", "gpu", Status.WARN, f"{len(h.holders)} other process(es) hold GPU memory: "
                      f"{shown}{host}" if h.holders else f"GPU memory in use: {shown}",
                      fix=fix, ref=KFD_PROC_DOC, **ev)
    elif not h.holders_source:
        yield finding("gpu.busy", "gpu", Status.SKIP, "which processes hold GPU memory was not read (no KFD proc "
                      "folder, no DRM fdinfo readable); " + _most_used(per), ref=KFD_PROC_DOC, **ev)
    else:
        yield finding("gpu.busy", "gpu", Status.PASS, "no other process holds GPU memory; " + _most_used(per),
                      ref=KFD_PROC_DOC, **ev)


def _most_used(per: dict[str, dict]) -> str:
    known = [(v["used_bytes"], v["total_bytes"]) for v in per.values() if v["used_bytes"] is not None]
    if not known:
        return f"{len(per)} GPU(s), their use not readable"
    used, total = max(known, key=lambda u: u[0])
    return f"at most {size(used)}" + (f" of {size(total)}" if total else "") + f" in use on {len(per)} GPU(s)"


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


CHECKS = [check_ras, check_gpu_links, check_nic_links, check_acs, check_busy, check_power_cap]
