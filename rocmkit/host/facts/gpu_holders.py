"""Who holds GPU memory, and how much each GPU has: one reader for the doctor's `gpu.busy` and for certify, which
must not start a job beside a leftover process (vLLM refuses to start when its share is not free: "Free memory on
device ... is less than desired GPU memory utilization").

Sources of holders, in order, merged per pid (the larger figure per GPU wins: they count the same buffers):
- KFD, `/sys/class/kfd/kfd/proc/<pid>/vram_<gpu_id>`: bytes of VRAM each ROCm process holds (amdkfd/kfd_process.c);
  gpu_id is a topology node's `gpu_id` file. Sysfs is not pid-namespaced, so in a container it lists the host's
  processes too (by their host pids); a pid whose /proc entry here has no /dev/kfd open is another process, and
  is not named after it.
- DRM fdinfo, `/proc/<pid>/fdinfo/<fd>` of the process's open DRM files (drm_fdinfo.py parses them): the GPU,
  the DRM client (one DRM file however many fds share it) and the VRAM it holds. Where KFD answers,
  only its processes' fdinfo is read: every process's fds cost ~6 µs each to look at, 0.6 s on a node with
  100,000 open fds, more than the doctor's whole first level; without KFD every process is read.
- nvidia-smi `--query-compute-apps`, on the live host only, when neither KFD nor an amdgpu DRM client answered
  (NVIDIA's driver writes no DRM usage stats), through the one process runner, with a timeout.
GPU totals: amdgpu's `mem_info_vram_total`/`mem_info_vram_used` of the PCI device (amdgpu_vram_mgr.c), else
nvidia-smi `--query-gpu` (MiB).

The records are NamedTuples, as all the doctor's records (host/model.py says why: a dataclass costs the doctor's
level 1 its import time, and tests/test_doctor_imports.py keeps `dataclasses` off that path).
"""

from __future__ import annotations

import os
import re
import time
from typing import Iterable, NamedTuple

from .drm_fdinfo import parse_drm_fdinfo, pci_address
from .kfd import Device
from .reader import KFD_TOPOLOGY, Reader, read_nodes

KFD_PROC = "sys/class/kfd/kfd/proc"
GIB, MIB = 1 << 30, 1 << 20
CMDLINE_MAX = 300
NVIDIA_SMI_S = 10.0  # nvidia-smi answers in well under a second; a wedged driver must not hang the caller
APPS_QUERY = "--query-compute-apps=pid,used_memory,gpu_bus_id"
GPUS_QUERY = "--query-gpu=pci.bus_id,memory.total,memory.used"


class Holder(NamedTuple):
    """A process holding GPU memory, and how much on which GPU."""

    pid: int
    comm: str | None  # /proc/<pid>/comm
    cmdline: str | None  # /proc/<pid>/cmdline joined by spaces, at most CMDLINE_MAX characters
    started: float | None  # epoch seconds it started (stat's starttime / CLK_TCK + /proc/stat btime)
    memory: dict[str, int]  # bytes held per GPU, by PCI address 'dddd:bb:dd.f' ("gpu_id N" when unknown)
    source: str  # "kfd", "drm-fdinfo" or "nvidia-smi": the first source that named it

    def to_json(self) -> dict:
        return {"pid": self.pid, "comm": self.comm, "cmdline": self.cmdline, "started": self.started,
                "memory_bytes": dict(self.memory), "source": self.source}


class GpuMemory(NamedTuple):
    """One GPU's memory: total and used bytes (None: not readable), and where they were read."""

    pci: str
    total_bytes: int | None
    used_bytes: int | None
    source: str  # "sysfs mem_info_vram" or "nvidia-smi"


class KfdProcess(NamedTuple):
    """A process KFD knows (it opened /dev/kfd), and the VRAM it holds on which GPU."""

    pid: int
    comm: str | None
    vram: dict[str, int]  # PCI address of the GPU (or "gpu_id N" when unknown) -> bytes


def kfd_processes(reader: Reader, devices: Iterable[Device] = ()) -> list[KfdProcess] | None:
    """Every process KFD knows, with the VRAM it holds (None: no KFD proc folder). The doctor (through holders)
    and the stall report (rocmkit/stall/tree.py) read it. Without devices, gpu_ids are mapped through the
    topology's nodes; one not found there is named "gpu_id N"."""
    if not reader.path(KFD_PROC).is_dir():
        return None
    procs, ids = [], None
    for pid in sorted(reader.listdir(KFD_PROC), key=lambda p: (len(p), p)):
        if not pid.isdigit():
            continue
        vram: dict[str, int] = {}
        for name in sorted(reader.listdir(f"{KFD_PROC}/{pid}")):
            if not name.startswith("vram_"):
                continue
            v = reader.line(f"{KFD_PROC}/{pid}/{name}")
            if v and v.isdigit() and int(v) > 0:
                if ids is None:  # gpu_id -> PCI address, read only when some process holds VRAM
                    ids = _gpu_ids(reader, list(devices))
                gpu = ids.get(name[len("vram_"):], f"gpu_id {name[len('vram_'):]}")
                vram[gpu] = vram.get(gpu, 0) + int(v)
        comm = reader.line(f"proc/{pid}/comm") if vram else None
        procs.append(KfdProcess(pid=int(pid), comm=comm, vram=vram))
    return procs


def _gpu_ids(reader: Reader, devices: list[Device]) -> dict[str, str]:
    """gpu_id -> PCI address, for every KFD node (a partition of a GPU has its own gpu_id)."""
    out = {}
    if devices:
        for d in devices:
            for n in d.nodes:
                gid = reader.line(f"{KFD_TOPOLOGY}/nodes/{n.index}/gpu_id")
                if gid and gid.isdigit() and d.pci_address:
                    out[gid] = d.pci_address
        return out
    for n in read_nodes(reader) or []:
        loc = n.props.get("location_id")
        gid = reader.line(f"{KFD_TOPOLOGY}/nodes/{n.index}/gpu_id") if n.is_gpu and loc else None
        if gid and gid.isdigit() and gid != "0":  # same address as kfd.Device.pci_address (function bits dropped)
            out[gid] = f"{n.props.get('domain', 0):04x}:{loc >> 8:02x}:{(loc >> 3) & 0x1f:02x}.0"
    return out


def holders(reader: Reader, devices: Iterable[Device] = (),
            exclude: Iterable[int] = ()) -> tuple[list[Holder], str]:
    """The processes holding GPU memory (pids in exclude left out), and one line saying what was read ("" when no
    source was readable)."""
    live = os.path.realpath(reader.root) == "/"
    skip = set(exclude)
    held: dict[int, dict[str, int]] = {}
    source: dict[int, str] = {}
    read: list[str] = []
    kfd = kfd_processes(reader, devices)
    elsewhere: set[int] = set()  # KFD's pids whose /proc entry here is another process (see _without_kfd)
    if kfd is not None:
        for p in kfd:
            if p.pid not in skip and p.vram:
                held[p.pid], source[p.pid] = dict(p.vram), "kfd"
        read.append(f"KFD (/{KFD_PROC}: {len(kfd)} process(es))")
        elsewhere = {pid for pid in held if live and _without_kfd(reader, pid)}
        pids = sorted(set(held) - elsewhere)
    else:
        pids = sorted(int(p) for p in reader.listdir("proc") if p.isdigit())
    drm, seen, unreadable, amd = _drm_memory(reader, [p for p in pids if p not in skip], live)
    for pid, memory in drm.items():
        mine = held.setdefault(pid, {})
        for pci, n in memory.items():
            mine[pci] = max(mine.get(pci, 0), n)
        source.setdefault(pid, "drm-fdinfo")
    if kfd is None and (seen or unreadable):
        read.append(f"DRM fdinfo (/proc/<pid>/fdinfo: {seen} process(es) read"
                    + (f", {unreadable} not readable without root" if unreadable else "") + ")")
    if live and kfd is None and not amd:
        lines = _nvidia_smi(APPS_QUERY)
        if lines is not None:
            read.append("nvidia-smi --query-compute-apps")
            for pid, memory in parse_nvidia_apps(lines).items():
                if pid not in skip:
                    held.setdefault(pid, {}).update(memory)
                    source.setdefault(pid, "nvidia-smi")
    out: list[Holder] = []
    btime = _btime(reader) if any(any(m.values()) for m in held.values()) else None
    for pid in sorted(held):
        memory = {k: v for k, v in held[pid].items() if v > 0}
        if memory:
            known = (None, None, None) if pid in elsewhere else _process(reader, pid, btime)
            out.append(Holder(pid, *known, memory=memory, source=source[pid]))
    return out, "; ".join(read)


def _drm_memory(reader: Reader, pids: list[int],
                live: bool) -> tuple[dict[int, dict[str, int]], int, int, bool]:
    """VRAM per pid and GPU from the DRM fdinfo of these pids; how many pids were read, how many could not be (no
    ptrace access: another user's process, without root), and whether any client was amdgpu's. A DRM file shared
    by several processes (inherited over fork) counts once, for the first (lowest) pid: it is one allocation."""
    out: dict[int, dict[str, int]] = {}
    clients: set[tuple[str, str]] = set()
    seen = unreadable = 0
    amd = False
    own = os.getpid() if live else None
    for pid in pids:
        fds = _drm_fds(reader, pid, live)
        if fds is None:
            continue
        if fds is False:
            unreadable += 1
            continue
        seen += pid != own
        for fd in fds:
            c = parse_drm_fdinfo(reader.text(f"proc/{pid}/fdinfo/{fd}", limit=1 << 14) or "")
            if c is None or c.pdev is None:
                continue
            amd = amd or c.driver == "amdgpu"
            key = (c.pdev, c.client_id or f"{pid}/{fd}")
            if key in clients:
                continue
            clients.add(key)
            if c.vram:
                mine = out.setdefault(pid, {})
                mine[c.pdev] = mine.get(c.pdev, 0) + c.vram
    return out, seen, unreadable, amd


def _drm_fds(reader: Reader, pid: int, live: bool) -> list[str] | bool | None:
    """The fds of a process that are DRM files (their links lead to /dev/dri/); False: not readable; None: no
    such process. A captured tree keeps no fd links, only the fdinfo files the doctor read: all of them are DRM's."""
    fd_dir = reader.path(f"proc/{pid}/fd")
    try:
        names = os.listdir(fd_dir)
    except PermissionError:
        return False
    except OSError:
        if live:
            return None
        return reader.listdir(f"proc/{pid}/fdinfo") or None
    out = []
    for fd in names:
        try:
            if os.readlink(fd_dir / fd).startswith("/dev/dri/"):
                out.append(fd)
        except OSError:  # closed since listed
            continue
    return out


def _without_kfd(reader: Reader, pid: int) -> bool:
    """Whether the live /proc/<pid> here is a process without /dev/kfd open, so not the one KFD names: KFD's sysfs
    is not pid-namespaced, so in a container a host pid may be another process here (or none). False where its fds
    cannot be read (another user's, without root): then it is named as /proc says."""
    fd_dir = reader.path(f"proc/{pid}/fd")
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return not os.path.exists(fd_dir.parent)  # gone, or not visible here: nothing to name it by
    for fd in names:
        try:
            if os.readlink(fd_dir / fd) == "/dev/kfd":
                return False
        except OSError:
            continue
    return True


def _process(reader: Reader, pid: int,
             btime: float | None) -> tuple[str | None, str | None, float | None]:
    """comm, cmdline (joined by spaces, cut at CMDLINE_MAX) and start time of a process, None where unreadable."""
    comm = reader.line(f"proc/{pid}/comm") or None
    raw, _ = reader.raw(f"proc/{pid}/cmdline", 4 * CMDLINE_MAX)
    cmdline = None
    if raw:  # NUL-separated arguments
        cmdline = " ".join(a.decode("utf-8", "replace") for a in raw.split(b"\0") if a)[:CMDLINE_MAX] or None
    started = None
    stat = reader.text(f"proc/{pid}/stat", limit=4096) or ""
    # the comm field may hold spaces and parentheses: fields count from the last ')'; starttime is field 22,
    # the 20th after it (proc(5))
    after = stat.rpartition(")")[2].split()
    if btime is not None and len(after) > 19 and after[19].isdigit():
        started = btime + int(after[19]) / _clock_ticks()
    return comm, cmdline, started


def _btime(reader: Reader) -> float | None:
    m = re.search(r"^btime\s+(\d+)\s*$", reader.text("proc/stat") or "", re.M)
    return float(m.group(1)) if m else None


def _clock_ticks() -> int:
    # USER_HZ, the unit of stat's times: 100 on every Linux architecture that runs GPUs (a captured tree cannot say)
    try:
        return os.sysconf("SC_CLK_TCK") or 100
    except (ValueError, OSError, AttributeError):
        return 100


def gpu_memory(reader: Reader, devices: Iterable[Device] = ()) -> list[GpuMemory]:
    """Each GPU's total and used memory: amdgpu's sysfs for these devices (without devices: every DRM card's PCI
    device), else on the live host nvidia-smi's."""
    bases: dict[str, str] = {}
    for d in devices:
        if d.pci_address:
            bases.setdefault(d.pci_address, f"sys/bus/pci/devices/{d.pci_address}")
    if not bases:
        for card in sorted(reader.listdir("sys/class/drm"), key=lambda c: (len(c), c)):
            if re.fullmatch(r"card\d+", card):
                uevent = reader.text(f"sys/class/drm/{card}/device/uevent", limit=4096) or ""
                m = re.search(r"^PCI_SLOT_NAME=(\S+)$", uevent, re.M)
                pci = pci_address(m.group(1)) if m else None
                if pci:
                    bases.setdefault(pci, f"sys/class/drm/{card}/device")
    out = []
    for pci, base in bases.items():
        total, used = (_int(reader.line(f"{base}/mem_info_vram_{k}")) for k in ("total", "used"))
        if total is not None or used is not None:
            out.append(GpuMemory(pci, total, used, "sysfs mem_info_vram"))
    if not out and not bases and os.path.realpath(reader.root) == "/":
        out = parse_nvidia_gpus(_nvidia_smi(GPUS_QUERY) or [])
    return out


def _int(v: str | None) -> int | None:
    return int(v) if v and v.isdigit() else None


def parse_nvidia_apps(lines: Iterable[str]) -> dict[int, dict[str, int]]:
    """`nvidia-smi --query-compute-apps=pid,used_memory,gpu_bus_id --format=csv,noheader,nounits` lines
    ("4242, 131584, 00000000:1B:00.0", MiB) -> pid -> {PCI address: bytes}; "[N/A]" and other lines skipped."""
    out: dict[int, dict[str, int]] = {}
    for line in lines:
        parts = [x.strip() for x in line.split(",")]
        if len(parts) != 3 or not parts[0].isdigit() or not parts[1].isdigit():
            continue
        pci = pci_address(parts[2])
        if pci:
            mine = out.setdefault(int(parts[0]), {})
            mine[pci] = mine.get(pci, 0) + int(parts[1]) * MIB
    return out


def parse_nvidia_gpus(lines: Iterable[str]) -> list[GpuMemory]:
    """`nvidia-smi --query-gpu=pci.bus_id,memory.total,memory.used --format=csv,noheader,nounits` lines (MiB)."""
    out = []
    for line in lines:
        parts = [x.strip() for x in line.split(",")]
        pci = pci_address(parts[0]) if len(parts) == 3 else None
        if pci:
            total, used = (int(v) * MIB if v.isdigit() else None for v in parts[1:])
            out.append(GpuMemory(pci, total, used, "nvidia-smi"))
    return out


def _nvidia_smi(query: str) -> list[str] | None:
    """nvidia-smi's stdout lines for one query, or None (no nvidia-smi on PATH, or it failed)."""
    exe = next((os.path.join(d, "nvidia-smi") for d in os.environ.get("PATH", "").split(os.pathsep)
                if d and os.access(os.path.join(d, "nvidia-smi"), os.X_OK)), None)
    if exe is None:
        return None
    # imported here: the doctor's first level never loads the runtime layer (tests/test_doctor_imports.py)
    from ...runtime import proc

    r = proc.capture([exe, query, "--format=csv,noheader,nounits"], timeout=NVIDIA_SMI_S, keep_stdout=True)
    return list(r.stdout or []) if r.ok else None


def size(n: int) -> str:
    """Bytes as a user reads them: "128.5 GiB", or "288 MiB" below a GiB."""
    return f"{n / GIB:.1f} GiB" if n >= GIB else f"{n / MIB:.0f} MiB"


def short_name(h: Holder, width: int = 40) -> str | None:
    """What the process is, in a few words: its command line (the program's base name first), else its comm."""
    if not h.cmdline:
        return h.comm
    first, _, rest = " ".join(h.cmdline.split()).partition(" ")  # one line: `python -c` code holds newlines
    text = " ".join(filter(None, [os.path.basename(first) or first, rest]))
    return text if len(text) <= width else text[:width].rstrip() + "..."


def describe(h: Holder, pci: str, now: float | None = None) -> str:
    """"pid 4242 (python3 -m vllm.entrypoints.openai.api_serv...) 128.5 GiB, started 10:14": the memory it holds
    on that GPU (pci "": on all), and its local start time (with the date when not today)."""
    amount = h.memory.get(pci, 0) if pci else sum(h.memory.values())
    what = short_name(h)
    text = f"pid {h.pid}" + (f" ({what})" if what else "") + f" {size(amount)}"
    if h.started is not None:
        start, today = time.localtime(h.started), time.localtime(time.time() if now is None else now)
        same_day = start[:3] == today[:3]
        text += ", started " + time.strftime("%H:%M" if same_day else "%b %d %H:%M", start)
    return text
