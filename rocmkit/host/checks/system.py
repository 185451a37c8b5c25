"""Kernel settings, NUMA, and what a container was given (shared memory, memlock)."""

from __future__ import annotations

from collections import Counter

from ..facts import Facts
from ..model import Status
from . import Context, documents, finding, not_captured

MI300X_OPT = "https://instinct.docs.amd.com/projects/amdgpu-docs/en/latest/system-optimization/mi300x.html"
KERNEL_PARAMS = "https://instinct.docs.amd.com/projects/system-acceptance/en/latest/common/kernel-parameters.html"
GIB = 1 << 30


@documents("kernel.numa_balancing",
           what="NUMA auto-balancing off (AMD MI300X system optimization guide); in a container the fix says to change the host")
def check_numa_balancing(f: Facts, ctx: Context):
    v = f.numa_balancing
    if v is None:
        yield finding("kernel.numa_balancing", "kernel", Status.SKIP, "/proc/sys/kernel/numa_balancing not readable")
    elif v == "0":
        yield finding("kernel.numa_balancing", "kernel", Status.PASS, "NUMA auto-balancing is off", value=v)
    else:
        yield finding("kernel.numa_balancing", "kernel", Status.WARN,
                      "NUMA auto-balancing is on: page migrations stall GPU transfers",
                      fix=_on_host(f, "sudo sysctl -w kernel.numa_balancing=0 (persist: kernel.numa_balancing=0 "
                                      "in /etc/sysctl.d/, or numa_balancing=disable on the kernel command line)"),
                      ref=MI300X_OPT, value=v)


def _on_host(f: Facts, fix: str) -> str:
    """Kernel settings are the host's: a container sees them but cannot change them."""
    return f"on the host (this is a container): {fix}" if f.container else fix


@documents("kernel.iommu", "kernel.pci_realloc", "kernel.pci_bfsort",
           what="system-acceptance kernel parameters: `iommu=pt` (Intel: `intel_iommu=on iommu=pt`), `pci=realloc=off`, `pci=bfsort` (not judged on SR-IOV VF guests)")
def check_cmdline(f: Facts, ctx: Context):
    if f.cmdline is None:
        yield finding("kernel.iommu", "kernel", Status.SKIP, "/proc/cmdline not readable")
        return
    if not f.devices:
        return  # these settings matter on GPU hosts only
    if all(d.product and d.product.is_vf for d in f.devices):
        # AMD's kernel parameters are for the bare-metal host; a guest with SR-IOV VFs has SR-IOV on, where
        # pci=realloc=off is not required (bios-settings: only "if SR-IOV is disabled")
        yield finding("kernel.iommu", "kernel", Status.SKIP, "SR-IOV virtual functions: the kernel parameters "
                      "that matter are the hypervisor host's", ref=KERNEL_PARAMS)
        return
    args = f.cmdline.split()
    intel = f.cpu_vendor == "GenuineIntel"
    want = ["intel_iommu=on", "iommu=pt"] if intel else ["iommu=pt"]
    missing = [a for a in want if a not in args]
    if missing:
        yield finding("kernel.iommu", "kernel", Status.WARN,
                      "IOMMU is not in pass-through mode: DMA to the GPUs is translated (slower, and >255 CPUs "
                      "need the IOMMU on)",
                      fix=_on_host(f, f"add {' '.join(want)} to GRUB_CMDLINE_LINUX, update-grub, reboot"),
                      ref=MI300X_OPT, cmdline=f.cmdline, cpu_vendor=f.cpu_vendor)
    else:
        yield finding("kernel.iommu", "kernel", Status.PASS, "IOMMU in pass-through mode (iommu=pt)")
    # pci= takes a comma list: "pci=realloc=off,bfsort" sets both
    pci = {o for a in args if a.startswith("pci=") for o in a[len("pci="):].split(",")}
    if "realloc=off" not in pci:
        yield finding("kernel.pci_realloc", "kernel", Status.WARN,
                      "pci=realloc=off is not set: Linux may not detect every GPU of an MI300X-class system",
                      fix=_on_host(f, "add pci=realloc=off to GRUB_CMDLINE_LINUX (required unless SR-IOV is on)"),
                      ref=KERNEL_PARAMS, cmdline=f.cmdline)
    if "bfsort" not in pci:
        yield finding("kernel.pci_bfsort", "kernel", Status.WARN,
                      "pci=bfsort is not set: PCI devices are numbered depth-first, so GPU and NIC numbering may not "
                      "pair each GPU with its own NIC (a transfer can cross the wrong link)",
                      fix=_on_host(f, "add pci=bfsort to GRUB_CMDLINE_LINUX, update-grub, reboot"),
                      ref=KERNEL_PARAMS, cmdline=f.cmdline)


@documents("numa.affinity",
           what="every GPU reporting its NUMA node")
def check_numa_affinity(f: Facts, ctx: Context):
    if not f.devices or not f.numa_nodes or f.numa_nodes < 2:
        return
    nodes = {pci: n for pci, n in f.gpu_numa.items()}
    if not nodes:
        return
    unknown = [pci for pci, n in nodes.items() if n < 0]
    spread = Counter(n for n in nodes.values() if n >= 0)
    if unknown:
        yield finding("numa.affinity", "kernel", Status.WARN,
                      f"{len(unknown)} GPU(s) report no NUMA node on a {f.numa_nodes}-node host: process binding "
                      "cannot follow the GPU", fix="enable ACPI SRAT/NUMA reporting in the BIOS (NPS1)", ref=MI300X_OPT,
                      gpus_without_node=unknown, numa_nodes=f.numa_nodes)
    else:
        yield finding("numa.affinity", "kernel", Status.PASS,
                      f"GPUs spread over NUMA nodes {dict(sorted(spread.items()))}; bind each rank to its GPU's node",
                      gpu_numa=nodes, numa_nodes=f.numa_nodes)


@documents("container.detect",
           what="container detection (`/.dockerenv`, `/run/.containerenv`, a Kubernetes serviceaccount, cgroup v1 names, an overlay root in `mountinfo` under cgroup v2)")
def check_container(f: Facts, ctx: Context):
    if f.container:
        yield finding("container.detect", "container", Status.PASS, f"running in a container ({f.container})",
                      evidence_of=f.container)


@documents("container.shm",
           what="`/dev/shm` (fail < 1 GiB, warn < 8 GiB)")
def check_shm(f: Facts, ctx: Context):
    if f.shm_bytes is None:
        yield (finding("container.shm", "container", Status.SKIP, "/dev/shm size unknown") if f.process else
               not_captured("container.shm", "container", "/dev/shm size (no /dev/shm tmpfs in proc/self/mounts)"))
        return
    size = f.shm_bytes
    fix = "run the container with --ipc=host (or --shm-size=16g); on a host, enlarge the /dev/shm tmpfs"
    ref = "vLLM docs: use --ipc=host or --shm-size for tensor-parallel inference; Docker's default is 64 MiB"
    if size < GIB:
        yield finding("container.shm", "container", Status.FAIL, f"/dev/shm is {size / GIB:.2f} GiB: RCCL and "
                      "DataLoader workers run out of shared memory", fix=fix, ref=ref, bytes=size)
    elif size < 8 * GIB:
        yield finding("container.shm", "container", Status.WARN, f"/dev/shm is {size / GIB:.1f} GiB (under 8 GiB)",
                      fix=fix, ref=ref, bytes=size)
    else:
        yield finding("container.shm", "container", Status.PASS, f"/dev/shm is {size / GIB:.0f} GiB", bytes=size)


@documents("container.memlock",
           what="memlock unlimited for RDMA")
def check_memlock(f: Facts, ctx: Context):
    if f.memlock is None:
        yield (finding("container.memlock", "container", Status.SKIP, "memlock limit unknown") if f.process else
               not_captured("container.memlock", "container", "memlock limit (no proc/self/limits)"))
        return
    soft = f.memlock.get("soft")
    if soft is None:
        yield finding("container.memlock", "container", Status.PASS, "memlock limit is unlimited")
    else:
        yield finding("container.memlock", "container", Status.WARN,
                      f"memlock limit is {soft} bytes: RDMA (multi-node RCCL) needs it unlimited",
                      fix="Docker: --ulimit memlock=-1:-1; host: `* soft memlock unlimited` and `* hard memlock "
                          "unlimited` in /etc/security/limits.conf",
                      ref="ROCm system-acceptance docs, network validation: set ulimit to infinite", soft=soft)


CHECKS = [check_numa_balancing, check_cmdline, check_numa_affinity, check_container, check_shm, check_memlock]
