"""Generate host trees (sysfs, procfs, /dev, /opt/rocm, process facts) for the doctor's tests and
benchmarks: any product of the arch table, any partition mode, containers with GPUs not granted, and the
misconfigurations the checks look for. The layout and property formats follow the kernel (kfd_topology.c)
and real captures of MI300X, MI308X, MI210 and Vega10 hosts."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from .. import archs
from .facts import KFD_TOPOLOGY, PROCESS_FILE, READ_ERRORS_FILE
from .kernlog import KMSG_FILE, format_records
from .kfd import MODES, XCC_PER_GPU
from .treegen_health import write_kfd_procs, write_pci_health
from .rdma import write_rdma

# SIMDs per XCC; MI300X: 38 CUs × 4 SIMDs. Products without an XCC count (MI210) get 8 here: generated
# trees of them exercise the parsers, not a real layout.
SIMD_PER_XCC = {"gfx950": 128, "gfx90a": 208}


def healthy_process(**overrides) -> dict:
    """Process facts of a well-set-up RL container."""
    p = {
        "env": {"HIP_FORCE_DEV_KERNARG": "1", "HSA_NO_SCRATCH_RECLAIM": "1", "NCCL_MIN_NCHANNELS": "112",
                "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES": "1"},
        "shm_bytes": 64 << 30,
        "memlock": {"soft": None, "hard": None},
        "uid": 0,
        "groups": [0],
        "packages": {"torch": "2.9.1+rocm7.0.2", "vllm": "0.20.2", "sglang": None, "ray": "2.55.1", "verl": "0.9.1",
                     "transformers": "5.14.1", "triton": "3.5.1", "rocmkit": "0.1.0"},
        "torch_hip": "7.0.51831",
        "ray_noset_vars": ["RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES"],
        "sglang_dir": None,
        "sglang_vf_missing": None,
        # Ray 2.55 reads the HIP no-set variable, counts GPUs through amdsmi and refuses ROCR_VISIBLE_DEVICES
        # without HIP_VISIBLE_DEVICES (what rocmkit.host.process.ray_amd_facts reads from Ray's code).
        "ray_amd": {"gpu_backend": "amdsmi", "amdsmi_guard": "ImportError", "rocr_rule": "without_hip"},
        "gpu_libraries": {"amdsmi": {"status": "ok", "gpus": 8}, "pyamdgpuinfo": {"status": "absent"}},
        "docker": {"host": "unix:///var/run/docker.sock", "status": "absent"},
    }
    for k, v in overrides.items():
        if k == "env":
            p["env"] = dict(v)
        elif isinstance(v, dict) and isinstance(p.get(k), dict):
            p[k] = {**p[k], **v}
        else:
            p[k] = v
    return p


# What amdgpu logs bringing up an MI300X (the kernel's message formats; not a captured log): no faults.
HEALTHY_KMSG = format_records([
    (5, "Linux version 6.8.0-51-generic (buildd@lcy02-amd64-045) #52-Ubuntu SMP PREEMPT_DYNAMIC"),
    (6, "Command line: BOOT_IMAGE=/boot/vmlinuz root=/dev/nvme0n1p2 ro iommu=pt pci=realloc=off pci=bfsort"),
    (6, "[drm] amdgpu kernel modesetting enabled."),
    (6, "amdgpu: Virtual CRAT table created for CPU"),
    (6, "amdgpu 0000:05:00.0: amdgpu: Fetched VBIOS from IFWI"),
    (6, "amdgpu 0000:05:00.0: amdgpu: VRAM: 196592M 0x0000008000000000 - 0x000000BFFEFFFFFF (196592M used)"),
    (6, "amdgpu 0000:05:00.0: amdgpu: SECUREDISPLAY: securedisplay ta ucode is not available"),
    (6, "amdgpu 0000:05:00.0: amdgpu: SMU is initialized successfully!"),
    (6, "kfd kfd: amdgpu: added device 1002:74a1"),
    (6, "[drm] amdgpu: 196592M of VRAM memory ready"),
    (6, "[drm] Initialized amdgpu 3.57.0 20150101 for 0000:05:00.0 on minor 1"),
    (4, "pcieport 0000:00:01.1: AER: enabled with IRQ 28"),
])


@dataclass
class HostSpec:
    product: str = "MI300X"
    gpus: int = 8
    mode: str = "SPX"
    cpu_nodes: int = 2
    not_granted: tuple[int, ...] = ()  # physical GPU indices a container was not given
    # physical GPU index -> how many of its partitions a container was given (the rest: EPERM), as a
    # Kubernetes device plugin hands out single CPX partitions
    partitions_granted: dict[int, int] = field(default_factory=dict)
    partition_sysfs: bool = True  # amdgpu's current_compute/memory_partition files (absent on older kernels)
    memory_mode: str = "NPS1"
    # proc/self/mounts, proc/self/limits, proc/meminfo, agreeing with the process record (64 GiB /dev/shm
    # and unlimited memlock when there is none); False leaves them out
    proc_self: bool = True
    missing_render: tuple[int, ...] = ()  # physical GPUs whose render nodes are absent from /dev/dri
    container: bool = False
    kfd: bool = True
    amdgpu: str | None = "live"
    numa_balancing: str = "0"
    cmdline: str = "BOOT_IMAGE=/boot/vmlinuz root=/dev/nvme0n1p2 ro iommu=pt pci=realloc=off pci=bfsort"
    cpu_vendor: str = "AuthenticAMD"
    rocm: str | None = "7.0.2"
    fw_versions: tuple[int, ...] = ()  # MEC firmware per GPU; default 177 everywhere
    hive_ids: tuple[int, ...] = ()
    gpu_numa: tuple[int, ...] = ()  # NUMA node per GPU; default: first half node 0, rest node 1
    manifest: dict | None = None
    process: dict | None = field(default_factory=healthy_process)
    amdgpu_version: str = "6.12.12"  # the DKMS driver's sys/module/amdgpu/version
    kernel_release: str = "6.8.0-57-generic"
    # Hardware health (rocmkit/host/health.py), keyed by physical GPU index. The files follow the kernel's
    # formats (amdgpu_ras.c, pci-sysfs.c, kfd_process.c, amdgpu_pm.c) and the PCIe spec's config space.
    ras: dict[int, dict[str, tuple[int, int]]] = field(default_factory=dict)  # block -> (ue, ce); others 0
    bad_pages: dict[int, str] = field(default_factory=dict)  # flags of the GPU's bad pages, e.g. "RRP"
    ras_sysfs: bool = True  # amdgpu's ras/ folder (absent where RAS is not supported or disabled)
    links: dict[int, tuple[float, int]] = field(default_factory=dict)  # current (GT/s, width); default 32 x16
    acs: dict[int, int] = field(default_factory=dict)  # ACS control of the switch port above the GPU (0: off)
    config_root: bool = True  # False: config files as a non-root reader sees them (first 64 bytes)
    kfd_procs: dict[int, dict[int, int]] = field(default_factory=dict)  # other pid -> {GPU: VRAM bytes}
    power_caps: dict[int, int] = field(default_factory=dict)  # power1_cap in W; default and max 750 W
    rdma_nics: int = 0  # RDMA NICs; NIC i sits beside GPU i under one PCIe switch
    nic_links: dict[int, tuple[float, int]] = field(default_factory=dict)
    self_pid: int = 4242  # the doctor's own pid (proc/self/stat), which holds no VRAM
    # the kernel log (/dev/kmsg records, kernlog.format_records) as a capture holds it; None: no such file
    kmsg: str | None = field(default_factory=lambda: HEALTHY_KMSG)
    kmsg_error: str | None = None  # the log was not readable where the tree was "captured" (this reason)
    rdma: tuple = ()  # rdma.Port: RDMA ports in /sys/class/infiniband (rdma.healthy_ports())


def _product(name: str) -> archs.Product:
    p = archs.product_named(name)
    if p is None:
        raise ValueError(f"unknown product {name!r}")
    return p


def write_tree(root: Path, spec: HostSpec) -> Path:
    root = Path(root)
    product = _product(spec.product)
    arch = archs.get_arch(product.arch)
    xcc = XCC_PER_GPU.get(product.vf_of or product.name, 8)
    parts = MODES[spec.mode] or xcc
    simd = SIMD_PER_XCC.get(arch.name, 152) * xcc
    nodes_dir = root / KFD_TOPOLOGY / "nodes"
    read_errors: dict[str, str] = {}
    index = 0
    for cpu in range(spec.cpu_nodes):
        _write_props(nodes_dir / str(index), {
            "cpu_cores_count": 96, "simd_count": 0, "mem_banks_count": 1, "caches_count": 0, "io_links_count": 4,
            "gfx_target_version": 0, "vendor_id": 0, "device_id": 0, "location_id": 0, "domain": 0,
            "drm_render_minor": 0, "hive_id": 0, "max_engine_clk_ccompute": 2400})
        (root / f"sys/devices/system/node/node{cpu}").mkdir(parents=True, exist_ok=True)
        index += 1
    first_nodes = {}  # GPU -> index of its first KFD node (its gpu_id names it in kfd/proc)
    for g in range(spec.gpus):
        bus = 0x05 + 0x10 * g
        first_nodes[g] = index
        numa = spec.gpu_numa[g] if g < len(spec.gpu_numa) else (0 if g < spec.gpus / 2 else 1) % max(spec.cpu_nodes, 1)
        bdf = f"0000:{bus:02x}:00.0"
        write_pci_health(root, spec, g, bus)
        numa_file = root / f"sys/bus/pci/devices/{bdf}/numa_node"
        numa_file.parent.mkdir(parents=True, exist_ok=True)
        numa_file.write_text(f"{numa}\n")
        if spec.partition_sysfs:
            _write(numa_file.parent / "current_compute_partition", spec.mode + "\n")
            _write(numa_file.parent / "current_memory_partition", spec.memory_mode + "\n")
        for part in range(parts):
            minor = 128 + g * 8 + part
            props = {
                "cpu_cores_count": 0, "simd_count": simd // parts, "mem_banks_count": 1, "caches_count": 626 // parts,
                "io_links_count": 7, "p2p_links_count": 1, "max_waves_per_simd": 8, "lds_size_in_kb": 64,
                "wave_front_size": 64, "array_count": 4 * xcc // parts, "simd_per_cu": 4,
                "gfx_target_version": arch.gfx_target_version, "vendor_id": 4098,
                "device_id": int(product.pci_ids[0], 16), "location_id": (bus << 8) | part, "domain": 0,
                "drm_render_minor": minor,
                "hive_id": spec.hive_ids[g] if g < len(spec.hive_ids) else 10631624818852212319,
                "num_sdma_engines": 2, "num_sdma_xgmi_engines": 14 // parts, "max_engine_clk_fcompute": 2100,
                "local_mem_size": 0, "fw_version": spec.fw_versions[g] if g < len(spec.fw_versions) else 177,
                "sdma_fw_version": 22, "unique_id": 4376936076086227261 + g, "num_xcc": xcc // parts,
                "max_engine_clk_ccompute": 2400,
            }
            rel = f"{KFD_TOPOLOGY}/nodes/{index}/properties"
            _write_props(nodes_dir / str(index), props)
            if g in spec.not_granted or part >= spec.partitions_granted.get(g, parts):
                read_errors[rel] = "permission denied"
            elif g not in spec.missing_render:
                _touch(root / f"dev/dri/renderD{minor}")
            index += 1
    if spec.kfd:
        _touch(root / "dev/kfd")
        write_kfd_procs(root, spec, first_nodes)
    if spec.amdgpu is not None:
        _write(root / "sys/module/amdgpu/initstate", spec.amdgpu + "\n")
        _write(root / "sys/module/amdgpu/version", spec.amdgpu_version + "\n")
    _write(root / "proc/cmdline", spec.cmdline + "\n")
    _write(root / "proc/sys/kernel/numa_balancing", spec.numa_balancing + "\n")
    _write(root / "proc/sys/kernel/osrelease", spec.kernel_release + "\n")
    _write(root / "proc/cpuinfo", f"processor\t: 0\nvendor_id\t: {spec.cpu_vendor}\n")
    if spec.proc_self:
        _write_proc_self(root, spec.process or {}, spec.self_pid)
    if spec.rocm:
        _write(root / "opt/rocm/.info/version", spec.rocm + "-1\n")
    if spec.container:
        _touch(root / ".dockerenv")
    if spec.manifest is not None:
        _write(root / "opt/rocmkit/manifest.json", json.dumps(spec.manifest))
    if spec.kmsg_error:
        read_errors[KMSG_FILE] = spec.kmsg_error
        _touch(root / KMSG_FILE)
    elif spec.kmsg is not None:
        _write(root / KMSG_FILE, spec.kmsg)
    write_rdma(root, spec.rdma)
    if read_errors:
        _write(root / READ_ERRORS_FILE, json.dumps(read_errors, indent=1))
    if spec.process is not None:
        _write(root / PROCESS_FILE, json.dumps(spec.process, indent=1))
    return root


def _write_proc_self(root: Path, process: dict, pid: int = 4242) -> None:
    """What the kernel shows for the doctor's own process: its pid, mounts and resource limits."""
    _write(root / "proc/self/stat", f"{pid} (rocmkit) R 1 {pid} {pid} 0 -1 4194304\n")
    shm = process.get("shm_bytes") if isinstance(process.get("shm_bytes"), int) else 64 << 30
    _write(root / "proc/self/mounts", "overlay / overlay rw,relatime 0 0\nproc /proc proc rw 0 0\n"
                                     f"shm /dev/shm tmpfs rw,nosuid,nodev,noexec,relatime,size={shm // 1024}k 0 0\n")
    _write(root / "proc/meminfo", "MemTotal:       2113612800 kB\nMemFree:        2013612800 kB\n")
    memlock = process.get("memlock") if isinstance(process.get("memlock"), dict) else {}
    soft, hard = (("unlimited" if memlock.get(k) is None else memlock[k]) for k in ("soft", "hard"))
    _write(root / "proc/self/limits",
           "Limit                     Soft Limit           Hard Limit           Units     \n"
           "Max cpu time              unlimited            unlimited            seconds   \n"
           f"Max locked memory         {soft:<20} {hard:<20} bytes     \n"
           "Max open files            1048576              1048576              files     \n")


def _write_props(node_dir: Path, props: dict[str, int]) -> None:
    _write(node_dir / "properties", "".join(f"{k} {v}\n" for k, v in props.items()))


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def _touch(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch()
