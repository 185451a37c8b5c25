"""Every read the doctor makes, done once, into a plain Facts object (see the package's docstring for the two
kinds of facts). Nothing here raises for a broken tree: unreadable or malformed files become recorded read
errors.
"""

from __future__ import annotations

import json
import os
import re
from typing import TYPE_CHECKING

from . import kernlog, rocm_installs
from .journal import Journal, read as read_journal
from .health import HealthFacts, read_health
from .kfd import MODES, Device, Node, group_devices
from .process import collect_process, valid_process
from .reader import DevNode, Reader, container, dev_node, memlock_from_limits, read_nodes, shm_from_mounts

if TYPE_CHECKING:  # read_rdma is imported where --multi-node asks for it
    from .rdma import RdmaFacts

PROCESS_FILE = "rocmkit-process.json"


class Facts:
    """Everything one doctor run read (see the package's docstring); the checks read only this. collect() fills it in
    step by step. A plain class, not a @dataclass: creating one with these 30 fields costs 1.3 ms, a fiftieth of
    `doctor --root` (benchmarks/doctor_speed.py), and nothing compares or prints Facts."""

    def __init__(self, root: str, live: bool, read_errors: list[tuple[str, str]], files_read: list[str]):
        self.root: str = root
        self.live: bool = live
        # the facts' read log is the reader's: every read and read error, in the order they happened
        self.read_errors, self.files_read = read_errors, files_read
        self.nodes: list[Node] = []
        self.devices: list[Device] = []
        self.topology_found: bool = False
        self.dev_kfd: DevNode | None = None
        self.render: dict[int, DevNode] = {}  # render minor -> node
        self.amdgpu_initstate: str | None = None
        self.cmdline: str | None = None
        self.numa_balancing: str | None = None
        self.rocm_version: str | None = None  # the active ROCm's (rocm_layout.active), else /opt/rocm/.info/version
        # every ROCm install and what points a process at one (rocm_installs.read); None only before collect() fills it
        self.rocm_installs: dict | None = None
        self.container: str | None = None  # evidence that this is a container, or None
        self.cpu_vendor: str | None = None  # AuthenticAMD / GenuineIntel, for the IOMMU advice
        self.numa_nodes: int | None = None  # host NUMA nodes
        self.gpu_numa: dict[str, int] = {}  # PCI address -> NUMA node of that GPU
        self.manifest: dict | None = None  # /opt/rocmkit/manifest.json of a rocmkit-built image
        # libdrm's amdgpu.ids: (its path, the upper-case PCI device ids it names), or None where there is none.
        # hipDeviceGetName reads the product name from it; a device id it lacks shows as "AMD Radeon Graphics".
        self.amdgpu_ids: tuple[str, frozenset[str]] | None = None
        # $ROCM_PATH/lib/librocm_smi64.so (ROCM_PATH from the environment, else /opt/rocm) and whether it is a
        # file: older Ray counts AMD GPUs through it, and sees none without it.
        self.rocm_smi_lib: tuple[str, bool] | None = None
        # /dev/shm size and the memlock limit: measured by the process (statvfs, getrlimit) when its record is
        # there, else read from the tree's proc/self/mounts (+ proc/meminfo) and proc/self/limits
        self.shm_bytes: int | None = None
        self.memlock: dict | None = None  # {"soft": bytes or None for unlimited, "hard": ...}
        self.process: dict | None = None  # see collect_process(); None when not available (captured tree without it)
        self.kernel_release: str | None = None  # proc/sys/kernel/osrelease
        self.amdgpu_version: str | None = None  # sys/module/amdgpu/version (the DKMS driver; absent for the in-tree one)
        self.health: HealthFacts | None = None  # RAS, PCIe links and ACS, KFD processes, power caps (health.py)
        self.kernel_log: kernlog.KernelLog | None = None  # the kernel log since boot (kernlog.py)
        self.journal: Journal | None = None  # the kernel's journal of the previous boot (+ this one) (journal.py)
        self.rdma: RdmaFacts | None = None  # RDMA ports and GIDs, read only for --multi-node (rdma.py)

    @property
    def env(self) -> dict[str, str]:
        return (self.process or {}).get("env", {})

    def package(self, name: str) -> str | None:
        return (self.process or {}).get("packages", {}).get(name)


def collect(root: str = "/", *, process: bool | None = None, rdma: bool = False) -> Facts:
    """Read everything the checks need. root "/" is the live host; any other root is a captured tree."""
    live = os.path.realpath(root) == "/"
    reader = Reader(root, live)
    facts = Facts(root, live, reader.read_errors, reader.files_read)
    nodes = read_nodes(reader)
    if nodes is not None:
        facts.topology_found, facts.nodes, facts.devices = True, nodes, group_devices(nodes)
    facts.dev_kfd = dev_node(reader, "dev/kfd", live)
    for d in facts.devices:
        for minor in d.render_minors:
            facts.render[minor] = dev_node(reader, f"dev/dri/renderD{minor}", live)
    facts.amdgpu_initstate = reader.line("sys/module/amdgpu/initstate")
    facts.amdgpu_version = reader.line("sys/module/amdgpu/version")
    facts.kernel_release = reader.line("proc/sys/kernel/osrelease")
    facts.cmdline = reader.line("proc/cmdline")
    facts.numa_balancing = reader.line("proc/sys/kernel/numa_balancing")
    facts.container = container(reader)
    cpuinfo = reader.text("proc/cpuinfo", limit=4096) or ""
    m = re.search(r"^vendor_id\s*:\s*(\S+)", cpuinfo, re.M)
    facts.cpu_vendor = m.group(1) if m else None
    try:
        facts.numa_nodes = sum(1 for n in os.listdir(reader.path("sys/devices/system/node"))
                               if re.fullmatch(r"node\d+", n))
    except OSError:
        facts.numa_nodes = None
    for i, d in enumerate(facts.devices):
        if d.pci_address:
            pci = f"sys/bus/pci/devices/{d.pci_address}"
            v = reader.line(f"{pci}/numa_node")
            if v is not None and re.fullmatch(r"-?\d+", v):
                facts.gpu_numa[d.pci_address] = int(v)
            # amdgpu's partition state (kernels and GPUs without partitions have no such files)
            compute = reader.line(f"{pci}/current_compute_partition")
            memory = reader.line(f"{pci}/current_memory_partition")
            facts.devices[i] = d._replace(
                compute_partition=compute if compute in MODES else None,
                memory_partition=memory if memory and re.fullmatch(r"NPS\d", memory) else None)
    facts.health = read_health(reader, facts.devices)
    facts.amdgpu_ids = read_amdgpu_ids(reader)
    manifest = reader.text("opt/rocmkit/manifest.json")
    if manifest:
        try:
            facts.manifest = json.loads(manifest)
        except ValueError:
            facts.read_errors.append(("opt/rocmkit/manifest.json", "not valid JSON"))
    if live if process is None else process:
        facts.process = collect_process(vf_host=any(d.product and d.product.is_vf for d in facts.devices))
    else:
        text = reader.text(PROCESS_FILE)
        try:
            data = json.loads(text) if text else None
        except ValueError:
            data = None
            facts.read_errors.append((PROCESS_FILE, "not valid JSON"))
        if data is not None and valid_process(data):
            facts.process = data
        elif data is not None:
            facts.read_errors.append((PROCESS_FILE, "not a rocmkit process record"))
    p = facts.process or {}
    facts.shm_bytes = p.get("shm_bytes")
    if facts.shm_bytes is None:
        facts.shm_bytes = shm_from_mounts(reader.text("proc/self/mounts") or "", reader.text("proc/meminfo") or "")
    facts.memlock = p.get("memlock") or memlock_from_limits(reader.text("proc/self/limits") or "")
    if facts.process is not None:
        rel = f"{(facts.env.get('ROCM_PATH') or '/opt/rocm').strip('/')}/lib/librocm_smi64.so"
        try:
            facts.rocm_smi_lib = ("/" + rel, reader.path(rel).is_file())
        except (OSError, ValueError):  # a path too long or with a NUL byte from a recorded environment
            facts.rocm_smi_lib = ("/" + rel, False)
    read_rocm(facts, reader)
    facts.kernel_log = kernlog.read(reader, live)
    facts.journal = read_journal(reader, live, this_boot=facts.kernel_log.text is None)
    if rdma:  # hundreds of GID files on a RoCE host: only when a multi-node job asks (so imported only then)
        from .rdma import read_rdma

        facts.rdma = read_rdma(reader)
    return facts


def read_rocm(facts: Facts, reader: Reader) -> None:
    """The ROCm installs, and the summary version every check and the report name: the active install's (ROCM_PATH,
    the /opt/rocm links, a lone Core SDK at /opt/rocm/core-10.0), else /opt/rocm/.info/version as before."""
    from ..rocm_layout import active

    p = facts.process or {}
    facts.rocm_installs = rocm_installs.read(reader, facts.env, p.get("rocm_sdk"), p.get("torch_hip"))
    chosen = active(facts.rocm_installs["installs"], facts.rocm_installs["links"], facts.env).install
    facts.rocm_version = (chosen or {}).get("version") or reader.line("opt/rocm/.info/version")


AMDGPU_IDS = ("usr/share/libdrm/amdgpu.ids", "opt/amdgpu/share/libdrm/amdgpu.ids")


def read_amdgpu_ids(reader: Reader) -> tuple[str, frozenset[str]] | None:
    """The first amdgpu.ids libdrm would read ("device_id,\trevision_id,\tproduct_name" lines)."""
    for rel in AMDGPU_IDS:
        text = reader.text(rel)
        if text is not None:
            ids = {m.group(1).upper() for m in re.finditer(r"^([0-9A-Fa-f]{4}),", text, re.M)}
            return "/" + rel, frozenset(ids)
    return None
