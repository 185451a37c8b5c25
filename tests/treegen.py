"""Generate host trees (sysfs, procfs, /dev, /opt/rocm, process facts) for the doctor's tests and
benchmarks: any product of the arch table, any partition mode, containers with GPUs not granted, and the
misconfigurations the checks look for. The layout and property formats follow the kernel (kfd_topology.c)
and real captures of MI300X, MI308X, MI210 and Vega10 hosts.

The hardware-health part (write_pci_health, write_kfd_procs): each GPU's PCI device nested under its bridges
as sysfs nests it, with RAS counters, link state, power cap, memory (mem_info_vram_*), the bridges' config space,
RDMA NICs beside the GPUs, and KFD processes; processes seen through DRM fdinfo come from holdergen.py. No AMD capture of these files was at hand: they are built from the kernel's
documented formats (amdgpu_ras.c and Documentation/gpu/amdgpu/ras.rst, pci-sysfs.c, kfd_process.c,
amdgpu_pm.c) and the PCIe base spec's config space layout (a type 1 header, a capability list at 0x34, the
extended capability list from 0x100 with ACS, id 0x000D, control register at +6).

Test support, not part of rocmkit: tests import it as `treegen` (pytest puts tests/ on sys.path), benchmarks
after putting tests/ on sys.path."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from aergen import write_aer
from holdergen import BTIME, IDLE_VRAM_USED, write_drm_procs, write_holder
from rocmlayouts import write_layout
from rocmkit import archs
from rocmkit.host.facts import PROCESS_FILE
from rocmkit.host.facts.journal import file_for as journal_file
from rocmkit.host.facts.kernlog import KMSG_FILE
from rocmkit.host.facts.kfd import MODES, XCC_PER_GPU
from rocmkit.host.facts.rdma import IB_CLASS, ZERO_GID, Gid, Port
from rocmkit.host.facts.reader import KFD_TOPOLOGY, READ_ERRORS_FILE


def format_records(messages: Iterable[str | tuple[int, str]], start_usec: int = 1_000_000,
                   step_usec: int = 12_345) -> str:
    """/dev/kmsg records of messages (a message, or (syslog level, message); level 6 by default), with
    rising sequence numbers and times: what tests and generated trees use in place of a real log."""
    out = []
    for seq, item in enumerate(messages):
        level, message = item if isinstance(item, tuple) else (6, item)
        out.append(f"{level},{seq},{start_usec + seq * step_usec},-;{message}\n")
    return "".join(out)


def format_journal(messages: Iterable[str | tuple[int, str]], boot_id: str = "8d3c6a1e5b0f4e2a9c7d1b3f5e7a9c0d",
                   start_usec: int = 1_000_000, step_usec: int = 12_345, realtime_usec: int = 1_763_900_000_000_000,
                   hostname: str = "gpu-node-07") -> str:
    """`journalctl -k -o json` lines of kernel messages: one JSON object per line with the fields journalctl
    prints for a kernel entry (systemd's Journal JSON Format, https://systemd.io/JOURNAL_EXPORT_FORMATS/;
    systemd.journal-fields(7)): every value a string, timestamps in µs (realtime since the epoch; monotonic
    and _SOURCE_MONOTONIC_TIMESTAMP since boot), PRIORITY the syslog level."""
    out = []
    for i, item in enumerate(messages):
        level, message = item if isinstance(item, tuple) else (6, item)
        mono = start_usec + i * step_usec
        out.append(json.dumps({
            "__CURSOR": f"s=5f0c2d7e9b1a4c3e8f6a2b4d6c8e0a1b;i={0x1a2b + i:x};b={boot_id};m={mono:x};t={realtime_usec + mono:x}",
            "__REALTIME_TIMESTAMP": str(realtime_usec + mono), "__MONOTONIC_TIMESTAMP": str(mono + 150),
            "_BOOT_ID": boot_id, "_SOURCE_MONOTONIC_TIMESTAMP": str(mono), "_TRANSPORT": "kernel",
            "PRIORITY": str(level), "SYSLOG_FACILITY": "0", "SYSLOG_IDENTIFIER": "kernel", "_HOSTNAME": hostname,
            "_MACHINE_ID": "0f1e2d3c4b5a69788796a5b4c3d2e1f0", "MESSAGE": message}) + "\n")
    return "".join(out)


def roce_gids(ipv4: str, ndev: str, table_size: int = 8) -> tuple[Gid, ...]:
    """The GID table mlx5 fills for one IPv4 address (indexes 0-3, hence NCCL_IB_GID_INDEX=3 in most
    recipes): link-local v1 and v2, then IPv4-mapped v1 and v2. Entries up to table_size are left empty."""
    mapped = "0000:0000:0000:0000:0000:ffff:" + "".join(f"{int(o):02x}" for o in ipv4.split(".")[:2]) + ":" + \
        "".join(f"{int(o):02x}" for o in ipv4.split(".")[2:])
    local = "fe80:0000:0000:0000:0a5c:39ff:fe1c:2e0a"
    return (Gid(0, local, "IB/RoCE v1", ndev), Gid(1, local, "RoCE v2", ndev),
            Gid(2, mapped, "IB/RoCE v1", ndev), Gid(3, mapped, "RoCE v2", ndev))[:table_size]


def healthy_ports(count: int = 8, link_layer: str = "Ethernet") -> tuple[Port, ...]:
    """A healthy host's RDMA ports: one port per device, RoCE with IPv4 GIDs (or InfiniBand)."""
    if link_layer == "InfiniBand":
        return tuple(Port(f"mlx5_{i}", 1, link_layer="InfiniBand") for i in range(count))
    return tuple(Port(f"mlx5_{i}", 1, gids=roce_gids(f"10.0.{i}.11", f"ens{i}f0np0")) for i in range(count))


def write_rdma(root: Path, ports: Iterable[Port], table_size: int = 8) -> None:
    """Write ports as sysfs shows them; every port gets table_size GID entries, the unused ones all zeros."""
    for p in ports:
        base = Path(root) / IB_CLASS / p.device / "ports" / str(p.port)
        for name, value in (("state", p.state), ("phys_state", p.phys_state), ("link_layer", p.link_layer),
                            ("rate", p.rate)):
            if value is not None:
                _write(base / name, value + "\n")
        used = {g.index: g for g in p.gids}
        for i in range(max([table_size, *(g.index + 1 for g in p.gids)])):
            g = used.get(i)
            _write(base / "gids" / str(i), (g.gid if g else ZERO_GID) + "\n")
            # the kernel refuses (EINVAL) types/ndevs of an empty entry; the tree simply lacks them
            if g and g.type is not None:
                _write(base / "gid_attrs/types" / str(i), g.type + "\n")
            if g and g.ndev is not None:
                _write(base / "gid_attrs/ndevs" / str(i), g.ndev + "\n")


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
        # without HIP_VISIBLE_DEVICES (what rocmkit.host.facts.process.ray_amd_facts reads from Ray's code).
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
    # ROCm install layouts from rocmlayouts.LAYOUTS (their file lists and sources), written beside or instead of
    # the plain /opt/rocm/.info/version above (set rocm=None for a host whose only ROCm is one of them)
    rocm_layouts: tuple[str, ...] = ()
    fw_versions: tuple[int, ...] = ()  # MEC firmware per GPU; default 177 everywhere
    hive_ids: tuple[int, ...] = ()
    gpu_numa: tuple[int, ...] = ()  # NUMA node per GPU; default: first half node 0, rest node 1
    manifest: dict | None = None
    # libdrm's usr/share/libdrm/amdgpu.ids: "all" names every product of the arch table (as upstream libdrm
    # does), a tuple names only those PCI device ids, None writes no file
    amdgpu_ids: str | tuple[str, ...] | None = "all"
    process: dict | None = field(default_factory=healthy_process)
    amdgpu_version: str = "6.12.12"  # the DKMS driver's sys/module/amdgpu/version
    kernel_release: str = "6.8.0-57-generic"
    # Hardware health (rocmkit/host/facts/health.py), keyed by physical GPU index. The files follow the kernel's
    # formats (amdgpu_ras.c, pci-sysfs.c, kfd_process.c, amdgpu_pm.c) and the PCIe spec's config space.
    ras: dict[int, dict[str, tuple[int, int]]] = field(default_factory=dict)  # block -> (ue, ce); others 0
    bad_pages: dict[int, str] = field(default_factory=dict)  # flags of the GPU's bad pages, e.g. "RRP"
    ras_sysfs: bool = True  # amdgpu's ras/ folder (absent where RAS is not supported or disabled)
    links: dict[int, tuple[float, int]] = field(default_factory=dict)  # current (GT/s, width); default 32 x16
    acs: dict[int, int] = field(default_factory=dict)  # ACS control of the switch port above the GPU (0: off)
    config_root: bool = True  # False: config files as a non-root reader sees them (first 64 bytes)
    kfd_procs: dict[int, dict[int, int]] = field(default_factory=dict)  # other pid -> {GPU: VRAM bytes}
    # gpu.busy (rocmkit/host/facts/gpu_holders.py): amdgpu's mem_info_vram_total/_used of each GPU (used: the
    # driver's own IDLE_VRAM_USED, what the processes here hold, and vram_unseen, held by no process in the tree);
    # processes holding VRAM seen through DRM fdinfo only (amdgpu_fdinfo below); the holders' command lines and
    # start times (seconds after boot; the tree's boot is BTIME)
    vram_sysfs: bool = True
    vram_unseen: dict[int, int] = field(default_factory=dict)  # GPU -> bytes
    drm_procs: dict[int, dict[int, int]] = field(default_factory=dict)  # pid -> {GPU: VRAM bytes}
    cmdlines: dict[int, str] = field(default_factory=dict)  # pid -> command line; HOLDER_CMDLINE when not named
    started_s: dict[int, float] = field(default_factory=dict)  # pid -> seconds after boot; HOLDER_STARTED_S
    power_caps: dict[int, int] = field(default_factory=dict)  # power1_cap in W; default and max 750 W
    rdma_nics: int = 0  # RDMA NICs; NIC i sits beside GPU i under one PCIe switch
    nic_links: dict[int, tuple[float, int]] = field(default_factory=dict)
    self_pid: int = 4242  # the doctor's own pid (proc/self/stat), which holds no VRAM
    # the kernel log (/dev/kmsg records, format_records above) as a capture holds it; None: no such file
    kmsg: str | None = field(default_factory=lambda: HEALTHY_KMSG)
    kmsg_error: str | None = None  # the log was not readable where the tree was "captured" (this reason)
    rdma: tuple = ()  # rdma.Port: RDMA ports in /sys/class/infiniband (healthy_ports() above)
    # PCIe AER counters (aer_dev_*; root ports also aer_rootport_total_err_*), zero unless named here:
    # "gpu<g>", "nic<g>", "port<g>" (the switch port above GPU g), "root<g>" (its root port) -> {bit: count}
    aer: dict[str, dict[str, int]] = field(default_factory=dict)
    aer_sysfs: bool = True  # False: no AER files (firmware-first AER, pci=noaer)
    uptime_s: float = 86_400.0  # proc/uptime: the time the AER counters had to grow
    # the systemd journal's kernel messages as a capture holds them: boot (0, -1) -> journalctl's JSON lines
    # (format_journal above); journal_errors: boot -> why it could not be read where the tree was "captured"
    journal: dict[int, str] = field(default_factory=dict)
    journal_errors: dict[int, str] = field(default_factory=dict)


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
    write_drm_procs(root, spec)
    if spec.kfd_procs or spec.drm_procs:
        _write(root / "proc/stat", f"cpu  4705 356 584 3699 23 23 0 0 0 0\nintr 114930548 113199788 3 0 5 263\n"
                                   f"ctxt 1990473\nbtime {BTIME}\nprocesses 2915\nprocs_running 1\n")
    if spec.amdgpu is not None:
        _write(root / "sys/module/amdgpu/initstate", spec.amdgpu + "\n")
        _write(root / "sys/module/amdgpu/version", spec.amdgpu_version + "\n")
    _write(root / "proc/cmdline", spec.cmdline + "\n")
    _write(root / "proc/sys/kernel/numa_balancing", spec.numa_balancing + "\n")
    _write(root / "proc/sys/kernel/osrelease", spec.kernel_release + "\n")
    _write(root / "proc/uptime", f"{spec.uptime_s:.2f} {spec.uptime_s * 180:.2f}\n")
    _write(root / "proc/cpuinfo", f"processor\t: 0\nvendor_id\t: {spec.cpu_vendor}\n")
    if spec.proc_self:
        _write_proc_self(root, spec.process or {}, spec.self_pid)
    if spec.rocm:
        _write(root / "opt/rocm/.info/version", spec.rocm + "-1\n")
    for layout in spec.rocm_layouts:
        write_layout(root, layout)
    if spec.container:
        _touch(root / ".dockerenv")
    if spec.manifest is not None:
        _write(root / "opt/rocmkit/manifest.json", json.dumps(spec.manifest))
    if spec.amdgpu_ids is not None:
        ids = sorted({i.upper().removeprefix("0X") for a in archs.all_archs().values() for p in a.products
                      for i in p.pci_ids}) if spec.amdgpu_ids == "all" else list(spec.amdgpu_ids)
        _write(root / "usr/share/libdrm/amdgpu.ids", "# List of AMDGPU IDs\n1.0.0\n"
               + "".join(f"{i},\t00,\tAMD Instinct test {i}\n" for i in ids))
    if spec.kmsg_error:
        read_errors[KMSG_FILE] = spec.kmsg_error
        _touch(root / KMSG_FILE)
    elif spec.kmsg is not None:
        _write(root / KMSG_FILE, spec.kmsg)
    write_rdma(root, spec.rdma)
    for boot, lines in spec.journal.items():
        _write(root / journal_file(boot), f"#rocmkit-journal v1 boot={boot} records={lines.count(chr(10))} capped=0\n"
               + lines)
    for boot, why in spec.journal_errors.items():
        read_errors[journal_file(boot)] = why
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


RAS_BLOCKS = ("umc", "gfx", "sdma", "mmhub", "xgmi_wafl", "pcie_bif", "hdp")
GEN5 = (32.0, 16)
DEFAULT_CAP_W = 750  # MI300X's default and maximum (amd-smi's power cap of an OAM MI300X)


def gpu_id(node_index: int) -> int:
    """The KFD gpu_id a generated tree gives a topology node (the kernel's is a hash; any non-zero value)."""
    return 40000 + node_index


def bridge_config(acs_control: int, root: bool = True) -> bytes:
    """A PCIe bridge's config space: type 1 header, PCIe capability, AER then ACS extended capabilities."""
    c = bytearray(4096)
    c[0:4] = (0x1022 | 0x14A4 << 16).to_bytes(4, "little")  # AMD vendor id, a switch port's device id
    c[0x06] = 0x10  # status: capability list present
    c[0x0E] = 0x01  # header type 1 (bridge)
    c[0x34] = 0x40
    c[0x40:0x44] = (0x10 | 0x0042 << 16).to_bytes(4, "little")  # PCI Express capability, v2, next 0
    c[0x100:0x104] = (0x0001 | 0x2 << 16 | 0x148 << 20).to_bytes(4, "little")  # AER, next: ACS at 0x148
    c[0x148:0x14C] = (0x000D | 0x1 << 16).to_bytes(4, "little")  # ACS, v1, end of list
    c[0x14C:0x14E] = (0x005F).to_bytes(2, "little")  # capabilities: SV TB RR CR UF EC
    c[0x14E:0x150] = acs_control.to_bytes(2, "little")
    return bytes(c if root else c[:64])


def _link_files(d: Path, current: tuple[float, int], maximum: tuple[float, int] = GEN5) -> None:
    for name, (speed, width) in (("current", current), ("max", maximum)):
        (d / f"{name}_link_speed").write_text(f"{speed:.1f} GT/s PCIe\n")
        (d / f"{name}_link_width").write_text(f"{width}\n")


def _device(root: Path, path: list[str], link: tuple[float, int]) -> Path:
    """sys/devices/pci<dom:bus>/<bridge>/.../<dev>, linked from sys/bus/pci/devices/<dev> as sysfs does."""
    d = root / "sys/devices" / "/".join(path)
    d.mkdir(parents=True, exist_ok=True)
    _link_files(d, link)
    bus_link = root / "sys/bus/pci/devices" / path[-1]
    bus_link.parent.mkdir(parents=True, exist_ok=True)
    if not bus_link.is_symlink():
        os.symlink(os.path.relpath(d, bus_link.parent), bus_link)
    return d


def write_pci_health(root: Path, spec: HostSpec, g: int, bus: int) -> None:
    """GPU g at 0000:<bus>:00.0 behind root port <bus-3>:01.1, switch upstream port <bus-2>:00.0 and
    downstream ports <bus-1>:00.0 (to the GPU) and <bus-1>:01.0 (to NIC g at <bus+1>:00.0)."""
    r = bus - 3
    chain = [f"pci0000:{r:02x}", f"0000:{r:02x}:01.1", f"0000:{r + 1:02x}:00.0"]
    ports = {f"0000:{r + 2:02x}:00.0": spec.acs.get(g, 0), f"0000:{r + 2:02x}:01.0": 0}
    for i, bridge in enumerate(chain[1:] + list(ports)):
        path = chain[:i + 2] if i < 2 else chain + [bridge]
        d = _device(root, path, GEN5)
        (d / "config").write_bytes(bridge_config(ports.get(bridge, 0), spec.config_root))
        names = {chain[1]: f"root{g}", f"0000:{r + 2:02x}:00.0": f"port{g}"}
        if spec.aer_sysfs:
            write_aer(d, spec.aer.get(names.get(bridge, ""), {}),
                      rootport=[spec.aer.get(f"{k}{g}", {}) for k in ("gpu", "nic", "port", "root")]
                      if bridge == chain[1] else None)
    gpu = _device(root, chain + [f"0000:{r + 2:02x}:00.0", f"0000:{bus:02x}:00.0"], spec.links.get(g, GEN5))
    if spec.aer_sysfs:
        write_aer(gpu, spec.aer.get(f"gpu{g}", {}))
    if spec.ras_sysfs:
        ras = gpu / "ras"
        ras.mkdir(exist_ok=True)
        counts = spec.ras.get(g, {})
        for block in sorted(set(RAS_BLOCKS) | set(counts)):
            ue, ce = counts.get(block, (0, 0))
            (ras / f"{block}_err_count").write_text(f"ue: {ue}\nce: {ce}\n")
        (ras / "features").write_text("feature mask: 0x3fbf\n")
        pages = "".join(f"0x{0x1000 + i:08x} : 0x00001000 : {flag}\n" for i, flag in enumerate(spec.bad_pages.get(g, "")))
        (ras / "gpu_vram_bad_pages").write_text(pages)
    if spec.vram_sysfs:
        held = sum(p.get(g, 0) for p in [*spec.kfd_procs.values(), *spec.drm_procs.values()])
        total = int((_product(spec.product).memory_gib or 64) * 1024) - 16  # MiB: 196592 on an MI300X
        (gpu / "mem_info_vram_total").write_text(f"{total << 20}\n")
        (gpu / "mem_info_vram_used").write_text(f"{IDLE_VRAM_USED + held + spec.vram_unseen.get(g, 0)}\n")
    # the PCI device's uevent (pci-driver.c's pci_uevent, DRIVER= from the driver core) and its DRM card's link
    (gpu / "uevent").write_text(f"DRIVER=amdgpu\nPCI_CLASS=120000\nPCI_ID=1002:{_product(spec.product).pci_ids[0][2:].upper()}"
                                f"\nPCI_SLOT_NAME=0000:{bus:02x}:00.0\n")
    card = root / f"sys/class/drm/card{g + 1}"
    card.mkdir(parents=True, exist_ok=True)
    (card / "device").unlink(missing_ok=True)  # a tree written again over itself (a test's second doctor run)
    os.symlink(os.path.relpath(gpu, card), card / "device")
    hw = gpu / "hwmon" / f"hwmon{g + 2}"
    hw.mkdir(parents=True, exist_ok=True)
    for name, watts in (("power1_cap", spec.power_caps.get(g, DEFAULT_CAP_W)), ("power1_cap_max", DEFAULT_CAP_W),
                        ("power1_cap_default", DEFAULT_CAP_W)):
        (hw / name).write_text(f"{watts * 1_000_000}\n")
    if g < spec.rdma_nics:
        nic = _device(root, chain + [f"0000:{r + 2:02x}:01.0", f"0000:{bus + 1:02x}:00.0"], spec.nic_links.get(g, GEN5))
        if spec.aer_sysfs:
            write_aer(nic, spec.aer.get(f"nic{g}", {}))
        ib = root / f"sys/class/infiniband/mlx5_{g}"
        ib.mkdir(parents=True, exist_ok=True)
        os.symlink(os.path.relpath(nic, ib), ib / "device")


def write_kfd_procs(root: Path, spec: HostSpec, first_nodes: dict[int, int]) -> None:
    """sys/class/kfd/kfd/proc/<pid>/vram_<gpu_id>: the doctor's own process (no VRAM) and spec.kfd_procs."""
    procs = {spec.self_pid: {}, **spec.kfd_procs}
    for node in first_nodes.values():  # (a real node of each partition has one; these are the ones named below)
        (root / f"sys/class/kfd/kfd/topology/nodes/{node}/gpu_id").write_text(f"{gpu_id(node)}\n")
    for pid, held in procs.items():
        d = root / f"sys/class/kfd/kfd/proc/{pid}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "pasid").write_text(f"{32768 + pid % 1000}\n")
        for g, node in first_nodes.items():
            (d / f"vram_{gpu_id(node)}").write_text(f"{held.get(g, 0)}\n")
        if pid != spec.self_pid:
            write_holder(root, spec, pid)
