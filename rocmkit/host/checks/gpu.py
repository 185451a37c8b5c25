"""GPU devices, access, driver, topology, partitions, arch, VF, firmware and ROCm support."""

from __future__ import annotations

from collections import Counter

from ... import archs
from ..facts import Facts
from ..model import Status
from . import Context, documents, finding

DOCKER_DOC = "https://rocm.docs.amd.com/projects/install-on-linux/en/latest/how-to/docker.html"
PREREQ_DOC = "https://rocm.docs.amd.com/projects/install-on-linux/en/latest/install/prerequisites.html"
# The kernel code that writes the topology files (node properties, EPERM for GPUs outside the device cgroup).
KFD_DOC = "https://github.com/torvalds/linux/blob/master/drivers/gpu/drm/amd/amdkfd/kfd_topology.c"


def not_granted_nodes(facts: Facts) -> int:
    """GPU nodes present on the host that this container may not read (EPERM from the device cgroup;
    only GPU nodes are guarded, so these are GPU partitions)."""
    return sum(1 for n in facts.nodes if n.not_granted)


@documents("gpu.driver",
           what="amdgpu loaded (`/sys/module/amdgpu/initstate`), blacklist on the command line")
def check_driver(f: Facts, ctx: Context):
    state = f.amdgpu_initstate
    if state == "live":
        yield finding("gpu.driver", "gpu", Status.PASS, "amdgpu kernel driver is loaded", initstate=state)
        return
    blacklisted = "modprobe.blacklist=amdgpu" in (f.cmdline or "")
    if driver_up(f):
        # Containers often lack /sys/module; a populated KFD topology shows the driver is up on the host.
        yield finding("gpu.driver", "gpu", Status.PASS, "amdgpu driver is up (KFD topology present; "
                      "/sys/module/amdgpu not visible here)", kfd_nodes=len(f.nodes))
        return
    yield finding("gpu.driver", "gpu", Status.FAIL, "amdgpu kernel driver is not loaded ("
                  + (f"/sys/module/amdgpu/initstate says {state!r})" if state else "no /sys/module/amdgpu/initstate)"),
                  fix=("amdgpu is blacklisted on the kernel command line: load it after boot with "
                       "`sudo modprobe amdgpu`") if blacklisted else
                  "install the amdgpu-dkms driver on the host and `sudo modprobe amdgpu`",
                  ref=PREREQ_DOC, initstate=state, cmdline_blacklists_amdgpu=blacklisted)


@documents("gpu.kfd",
           what="`/dev/kfd` present and openable (ROCm docker docs)")
def check_kfd(f: Facts, ctx: Context):
    kfd = f.dev_kfd
    if kfd is None or not kfd.exists:
        yield kfd_missing(f)
    elif not kfd.accessible:
        yield finding("gpu.kfd", "gpu", Status.FAIL, f"/dev/kfd exists but cannot be opened ({kfd.error})",
                      fix="add the user to the group owning it: `sudo usermod -aG render,video $USER`, then log in "
                          "again (in Docker: `--group-add` that gid)",
                      ref=PREREQ_DOC, gid=kfd.gid, process_groups=(f.process or {}).get("groups"))
    else:
        yield finding("gpu.kfd", "gpu", Status.PASS, "/dev/kfd is present and accessible" +
                      ("" if f.live else " (access not judged on a captured tree)"), gid=kfd.gid)


def driver_up(f: Facts) -> bool:
    """gpu.driver's verdict, which gpu.kfd's advice must agree with: amdgpu's initstate is live, or (a container or
    a tree without /sys/module) a populated KFD topology shows the driver is up."""
    return f.amdgpu_initstate == "live" or (f.amdgpu_initstate is None and f.topology_found and bool(f.nodes))


def kfd_missing(f: Facts):
    """No /dev/kfd: what grants it depends on where it is missing. Only a driver that is not up is fixed by loading
    it; in a container the engine grants the node, on a host udev makes it when amdgpu loads, and a tree copied by
    hand (not by `--capture`, which records the device nodes) usually has none."""
    up = driver_up(f)
    title = ("/dev/kfd is missing in this container" if f.container and f.live else
             "/dev/kfd is missing in the captured container" if f.container else
             "/dev/kfd is missing" if f.live else "/dev/kfd is not in the captured tree")
    title += (" although the amdgpu driver is up" if up else "") + ": no ROCm compute is possible"
    if f.container:
        fix = nodes_fix(f, "/dev/kfd", "--device=/dev/kfd") + \
            ("" if up else "; the host needs the amdgpu driver loaded too (`sudo modprobe amdgpu` there)")
    elif not up:
        fix = "load the amdgpu driver (`sudo modprobe amdgpu`)"
    else:
        fix = nodes_fix(f, "/dev/kfd", "--device=/dev/kfd")
    return finding("gpu.kfd", "gpu", Status.FAIL, title, fix=fix, ref=DOCKER_DOC if f.container else PREREQ_DOC,
                   container=f.container, driver_up=up)


def nodes_fix(f: Facts, what: str, flag: str) -> str:
    """What grants missing device nodes (the driver being up): a container's engine, a host's udev, and for a tree
    copied by hand, a capture that records them."""
    if f.container:
        return f"start the container with `{flag}` (rocmkit run does)"
    if f.live:
        return (f"udev creates {what} when amdgpu loads: check that systemd-udevd runs and `sudo udevadm trigger`; "
                f"where /dev is a private mount (a chroot, a sandbox), bind the host's {what} into it")
    return (f"a tree copied by hand usually lacks the device nodes: `rocmkit doctor --capture DIR` on the host records "
            f"/dev/kfd and the render nodes where they exist; if the host itself lacks {what}, udev did not create "
            "them: check that systemd-udevd runs and `sudo udevadm trigger` there")


@documents("gpu.topology", "gpu.topology.read", "gpu.count", "gpu.partitions", "gpu.partitions.missing",
           what="KFD topology; physical GPUs (grouped by `unique_id`/PCI address, never by `/dev/dri`), partitions and mode (SPX/DPX/TPX/QPX/CPX: amdgpu's `current_compute_partition`, else each node's `num_xcc` out of the product's XCCs, so a container granted one CPX partition still sees CPX; `current_memory_partition` in the evidence); GPUs or partitions present on the host but not granted to a container are counted as such, not as broken; on a host, a GPU showing fewer partitions than its mode makes is a warning")
def check_topology(f: Facts, ctx: Context):
    if not f.topology_found:
        yield finding("gpu.topology", "gpu", Status.FAIL, "no KFD topology (/sys/class/kfd/kfd/topology/nodes)",
                      fix="load the amdgpu driver; in a container, sysfs must be the host's (default in Docker)",
                      ref=KFD_DOC)
        return
    corrupt = [n.index for n in f.nodes if n.error and not n.not_granted]
    if corrupt:
        yield finding("gpu.topology.read", "gpu", Status.WARN,
                      f"{len(corrupt)} KFD node(s) could not be read: {corrupt[:8]}", nodes=corrupt,
                      errors=[e for e in f.read_errors if "kfd" in e[0]][:8])
    devs = f.devices
    not_granted = not_granted_nodes(f)
    if not devs:
        yield finding("gpu.count", "gpu", Status.FAIL,
                      "no AMD GPU in the KFD topology" + (f" ({not_granted} node(s) not granted to this container)"
                                                          if not_granted else ""),
                      fix="grant GPUs to the container (`--device=/dev/dri/renderD<N>` per GPU, or all of /dev/dri)"
                      if not_granted else "check that the GPUs are seated and the driver bound (`dmesg | grep amdgpu`)",
                      ref=KFD_DOC, kfd_nodes=len(f.nodes))
        return
    partitions = sum(d.partitions for d in devs)
    modes = Counter(d.partition_mode for d in devs)
    # GPUs showing fewer KFD nodes than their mode makes: in a container, partitions not granted (KFD
    # nodes it may not read); elsewhere, partitions that failed to come up.
    partial = [d for d in devs if d.partitions < d.mode_partitions]
    title = f"{len(devs)} physical GPU(s), {partitions} KFD partition node(s) ({', '.join(f'{m}×{c}' for m, c in modes.items())})"
    if not_granted:
        title += f"; {not_granted} more GPU node(s) on the host are not granted to this container (not broken)"
    yield finding("gpu.count", "gpu", Status.PASS, title, physical=len(devs), partitions=partitions,
                  modes=dict(modes), not_granted_nodes=not_granted,
                  devices=[{"pci": d.pci_address, "device_id": d.device_id, "gfx": d.gfx,
                            "partitions": d.partitions, "mode": d.partition_mode,
                            "mode_partitions": d.mode_partitions, "compute_partition": d.compute_partition,
                            "memory_partition": d.memory_partition} for d in devs])
    if partial and not not_granted:
        shown = [f"{d.pci_address or d.key}: {d.partitions} of {d.mode_partitions} {d.partition_mode}" for d in partial]
        yield finding("gpu.partitions.missing", "gpu", Status.WARN,
                      f"{len(partial)} GPU(s) show fewer partitions than their mode makes ({'; '.join(shown[:4])}): "
                      "a partition did not come up", fix="check `dmesg | grep -i amdgpu` for the failed XCC, then "
                      "reset the GPU or set the mode again (`sudo amd-smi set --gpu N --compute-partition MODE`)",
                      ref=KFD_DOC, gpus=shown)
    if len(modes) > 1:
        yield finding("gpu.partitions", "gpu", Status.WARN, f"GPUs run in different partition modes: {dict(modes)}",
                      fix="set one compute partition mode on every GPU (`amd-smi set --compute-partition SPX`)",
                      ref="https://instinct.docs.amd.com/projects/amdgpu-docs/en/latest/system-optimization/mi300x.html",
                      modes=dict(modes))


@documents("gpu.render",
           what="the render node of every GPU partition present and openable")
def check_render(f: Facts, ctx: Context):
    if not f.devices:
        return
    missing, denied, ok = [], [], 0
    not_granted = not_granted_nodes(f)
    for d in f.devices:
        for minor in d.render_minors:
            node = f.render.get(minor)
            if node is None or not node.exists:
                missing.append(f"/dev/dri/renderD{minor}")
            elif not node.accessible:
                denied.append(f"/dev/dri/renderD{minor}")
            else:
                ok += 1
    evidence = {"accessible": ok, "missing": missing, "denied": denied, "not_granted_nodes": not_granted}
    if denied:
        yield finding("gpu.render", "gpu", Status.FAIL, f"{len(denied)} render node(s) cannot be opened: {denied[:4]}",
                      fix="add the user to the `render` group (`sudo usermod -aG render $USER`); in Docker pass "
                          "`--group-add <gid of the node>`", ref=PREREQ_DOC, **evidence)
    elif missing and ctx.pod_gpus is not None:
        # in a pod, sysfs lists the host's GPUs and the device plugin mounts only the pod's: pod.gpus judges them
        yield finding("gpu.render", "gpu", Status.PASS, f"{ok} render node(s) accessible; {len(missing)} of GPUs "
                      "not allocated to this pod are absent (not broken)", **evidence)
    elif missing:
        yield finding("gpu.render", "gpu", Status.FAIL if f.live else Status.WARN,
                      f"{len(missing)} render node(s) of readable GPUs are missing: {missing[:4]}",
                      fix=nodes_fix(f, "the render nodes", "--device=/dev/dri"),
                      ref=DOCKER_DOC if f.container else PREREQ_DOC, **evidence)
    else:
        yield finding("gpu.render", "gpu", Status.PASS, f"{ok} render node(s) accessible" +
                      (f"; {not_granted} GPU node(s) of the host are not granted to this container (not broken)"
                       if not_granted else ""), **evidence)


@documents("gpu.arch", "gpu.arch.mixed", "gpu.product", "gpu.vf",
           what="arch of every GPU (gfx_target_version), mixed archs, match with `--arch` or the image's manifest targets, product by PCI id, SR-IOV VF detection")
def check_arch(f: Facts, ctx: Context):
    devs = f.devices
    if not devs:
        return
    gfx = Counter(d.gfx for d in devs)
    unknown = [g for g in gfx if g is None or archs.all_archs().get(g) is None]
    if len(gfx) > 1:
        yield finding("gpu.arch.mixed", "gpu", Status.WARN, f"mixed GPU archs in one host: {dict(gfx)}",
                      fix="give each job GPUs of one arch (HIP_VISIBLE_DEVICES), and images built for all of them",
                      archs=dict(gfx))
    wanted = archs.split_targets(ctx.arch or "")
    host = sorted(g for g in gfx if g)
    if wanted:
        missing = [g for g in host if g not in wanted]
        if missing:
            yield finding("gpu.arch", "gpu", Status.FAIL,
                          f"host GPUs are {', '.join(missing)} but the image/--arch targets {';'.join(wanted)}: "
                          "kernels will fail with 'invalid device function'",
                          fix=f"use an image built for the host: `rocmkit build --arch {','.join(host)}`",
                          ref="vllm-project/vllm#17170; ROCm/TransformerEngine#74", host=host, targets=wanted)
            return
    status = Status.WARN if unknown else Status.PASS
    yield finding("gpu.arch", "gpu", status, f"GPU arch {', '.join(str(g) for g in gfx)}" +
                  (f" matches the targets {';'.join(wanted)}" if wanted else "") +
                  (f"; not in rocmkit's arch table: {unknown}" if unknown else ""), archs=dict(gfx), targets=wanted)
    products = Counter(d.product.name if d.product else f"unknown {d.device_id}" for d in devs)
    unknown_ids = [p for p in products if p.startswith("unknown")]
    yield finding("gpu.product", "gpu", Status.WARN if unknown_ids else Status.PASS,
                  f"products: {', '.join(f'{p}×{c}' for p, c in products.items())}",
                  fix="update rocmkit (its arch table lacks this PCI id)" if unknown_ids else None,
                  products=dict(products))
    vfs = sorted({d.product.name for d in devs if d.product and d.product.is_vf})
    if vfs:
        yield finding("gpu.vf", "gpu", Status.PASS, f"SR-IOV virtual function(s): {', '.join(vfs)} — torch reports "
                      "the VF name, so frameworks keyed by device name need VF configs (see software.vf_configs)",
                      products=vfs)


@documents("gpu.firmware", "gpu.xgmi",
           what="the same MEC/SDMA firmware and XGMI hive on every GPU")
def check_consistency(f: Facts, ctx: Context):
    devs = f.devices
    if len(devs) < 2:
        return
    fw = Counter((d.props.get("fw_version"), d.props.get("sdma_fw_version")) for d in devs)
    if len(fw) > 1:
        shown = "; ".join(f"MEC {mec} SDMA {sdma} on {n} GPU{'s' if n != 1 else ''}"
                          for (mec, sdma), n in sorted(fw.items(), key=lambda kv: (-kv[1], str(kv[0]))))
        yield finding("gpu.firmware", "gpu", Status.WARN, f"GPUs run different firmware: {shown}",
                      fix="flash one firmware bundle (PLDM) on every GPU", versions={str(k): v for k, v in fw.items()})
    hives = Counter(d.props.get("hive_id") for d in devs)
    if len(devs) >= 4 and (len(hives) > 1 or 0 in hives):
        yield finding("gpu.xgmi", "gpu", Status.WARN, f"XGMI hive ids differ or are zero across GPUs: {len(hives)} hive(s)",
                      fix="check the XGMI links (`amd-smi topology`); a GPU outside the hive makes all-reduce slow",
                      ref=KFD_DOC, hives=[str(h) for h in hives])


@documents("rocm.version",
           what="the active ROCm's version (its `.info/version`: `/opt/rocm`, `ROCM_PATH`, the Core SDK's `/opt/rocm/core-X.Y`; see rocm.installs) new enough for the GPUs (arch table)")
def check_rocm(f: Facts, ctx: Context):
    if f.rocm_version is None:
        yield finding("rocm.version", "software", Status.SKIP,
                      "no ROCm userspace (/opt/rocm, /opt/rocm-X.Y, /opt/rocm/core-X.Y, ROCM_PATH) "
                      "(fine when PyTorch wheels bring their own ROCm)")
        return
    version = f.rocm_version.split("-")[0]
    too_old = []
    for d in f.devices:
        arch = archs.all_archs().get(d.gfx or "")
        if arch and not archs.rocm_supports(version, arch, d.product):
            too_old.append(f"{d.product.name if d.product else d.gfx} needs ROCm >= "
                           f"{archs.min_rocm_for(arch, d.product)}")
    if too_old:
        yield finding("rocm.version", "software", Status.FAIL, f"ROCm {version} is too old: {'; '.join(sorted(set(too_old)))}",
                      fix="use an image or host ROCm new enough for these GPUs",
                      ref="https://rocm.docs.amd.com/en/latest/compatibility/compatibility-matrix.html", rocm=version)
    else:
        yield finding("rocm.version", "software", Status.PASS, f"ROCm {version} supports the GPUs present", rocm=version)


CHECKS = [check_driver, check_kfd, check_topology, check_render, check_arch, check_consistency, check_rocm]
