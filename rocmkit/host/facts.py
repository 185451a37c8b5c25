"""Every read the doctor makes, done once, into a plain Facts object.

Two kinds of facts:
- tree facts (sysfs, procfs, /dev, /opt/rocm) are read under a root prefix, so a captured tree (`--root`)
  is checked exactly like a live host;
- process facts (environment, resource limits, /dev/shm size, installed Python packages, Docker engine,
  GPU libraries) belong to the running process. Live, they are read directly; under `--root` they come
  from the `rocmkit-process.json` that `--capture` writes, or are absent (the checks then skip).
Nothing here raises for a broken tree: unreadable or malformed files become recorded read errors.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import io
import json
import os
import re
import stat
from dataclasses import dataclass, field
from pathlib import Path

from .kfd import MODES, Device, Node, group_devices, parse_properties

KFD_TOPOLOGY = "sys/class/kfd/kfd/topology"
PROCESS_FILE = "rocmkit-process.json"
# In a captured tree: files that could not be read where the capture was made, with the reason
# (a container's EPERM on GPUs not granted to it), so --root reproduces them.
READ_ERRORS_FILE = "rocmkit-read-errors.json"
# Environment variables the checks look at (and the only ones a capture records).
ENV_PREFIXES = ("HIP_", "HSA_", "ROCR_", "ROCM_", "CUDA_VISIBLE", "NCCL_", "RCCL_", "RAY_", "PYTORCH_",
                "GPU_ARCHS", "AMDGPU_TARGET", "NVTE_", "TORCH_", "VLLM_", "SGLANG_", "MIOPEN_")
PACKAGES = ("torch", "vllm", "sglang", "ray", "verl", "transformers", "triton", "pytorch-triton-rocm",
            "amdsmi", "pyamdgpuinfo", "rocmkit")


@dataclass
class DevNode:
    path: str
    exists: bool
    accessible: bool = False  # opened read-write by this process (live) — None-like False otherwise
    gid: int | None = None
    error: str | None = None


@dataclass
class Facts:
    root: str
    live: bool
    nodes: list[Node] = field(default_factory=list)
    devices: list[Device] = field(default_factory=list)
    topology_found: bool = False
    dev_kfd: DevNode | None = None
    render: dict[int, DevNode] = field(default_factory=dict)  # render minor -> node
    amdgpu_initstate: str | None = None
    cmdline: str | None = None
    numa_balancing: str | None = None
    rocm_version: str | None = None
    container: str | None = None  # evidence that this is a container, or None
    cpu_vendor: str | None = None  # AuthenticAMD / GenuineIntel, for the IOMMU advice
    numa_nodes: int | None = None  # host NUMA nodes
    gpu_numa: dict[str, int] = field(default_factory=dict)  # PCI address -> NUMA node of that GPU
    manifest: dict | None = None  # /opt/rocmkit/manifest.json of a rocmkit-built image
    # $ROCM_PATH/lib/librocm_smi64.so (ROCM_PATH from the environment, else /opt/rocm) and whether it is a
    # file: older Ray counts AMD GPUs through it, and sees none without it.
    rocm_smi_lib: tuple[str, bool] | None = None
    # /dev/shm size and the memlock limit: measured by the process (statvfs, getrlimit) when its record is
    # there, else read from the tree's proc/self/mounts (+ proc/meminfo) and proc/self/limits
    shm_bytes: int | None = None
    memlock: dict | None = None  # {"soft": bytes or None for unlimited, "hard": ...}
    process: dict | None = None  # see collect_process(); None when not available (captured tree without it)
    read_errors: list[tuple[str, str]] = field(default_factory=list)
    files_read: list[str] = field(default_factory=list)

    @property
    def env(self) -> dict[str, str]:
        return (self.process or {}).get("env", {})

    def package(self, name: str) -> str | None:
        return (self.process or {}).get("packages", {}).get(name)


class Reader:
    """Reads files under a root, remembering what it read and every error, never raising."""

    def __init__(self, root: str, facts: Facts):
        self.root = Path(root)
        self.facts = facts
        self.recorded_errors: dict[str, str] = {}
        if not facts.live:
            try:
                data = json.loads((self.root / READ_ERRORS_FILE).read_text())
                self.recorded_errors = {str(k).lstrip("/"): str(v) for k, v in data.items()}
            except (OSError, ValueError, AttributeError):
                pass

    def path(self, rel: str) -> Path:
        return self.root / rel.lstrip("/")

    def text(self, rel: str, limit: int = 1 << 20) -> str | None:
        p = self.path(rel)
        if rel.lstrip("/") in self.recorded_errors:
            self.facts.read_errors.append((rel, self.recorded_errors[rel.lstrip("/")]))
            return None
        try:
            # Non-blocking, and regular files only: a FIFO or device planted in a captured tree would
            # otherwise hang the doctor (sysfs and procfs files are all regular files).
            fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            with open(fd, "rb") as f:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    self.facts.read_errors.append((rel, "not a regular file"))
                    return None
                data = f.read(limit)
        except FileNotFoundError:
            return None
        except PermissionError:
            self.facts.read_errors.append((rel, "permission denied"))
            return None
        except OSError as exc:
            self.facts.read_errors.append((rel, exc.strerror or type(exc).__name__))
            return None
        self.facts.files_read.append(rel.lstrip("/"))
        return data.decode("utf-8", errors="replace")

    def line(self, rel: str) -> str | None:
        t = self.text(rel)
        return t.strip() if t is not None else None


def _read_nodes(reader: Reader, facts: Facts) -> None:
    nodes_dir = reader.path(f"{KFD_TOPOLOGY}/nodes")
    try:
        names = sorted((n for n in os.listdir(nodes_dir) if n.isdigit()), key=int)
    except OSError:
        return
    facts.topology_found = True
    for name in names:
        rel = f"{KFD_TOPOLOGY}/nodes/{name}/properties"
        before = len(facts.read_errors)
        text = reader.text(rel)
        error = facts.read_errors[-1][1] if len(facts.read_errors) > before else (None if text is not None else "missing")
        facts.nodes.append(Node(index=int(name), props=parse_properties(text or ""), error=error))
    facts.devices = group_devices(facts.nodes)


def _dev_node(reader: Reader, rel: str, live: bool) -> DevNode:
    p = reader.path(rel)
    try:
        st = os.stat(p)
    except OSError:
        return DevNode(path="/" + rel, exists=False)
    node = DevNode(path="/" + rel, exists=True, gid=st.st_gid)
    if live:  # opening is the only honest test of access (device cgroup, groups, mode)
        try:
            fd = os.open(p, os.O_RDWR | os.O_CLOEXEC)
            os.close(fd)
            node.accessible = True
        except OSError as exc:
            node.error = "permission denied" if exc.errno in (errno.EACCES, errno.EPERM) else (exc.strerror or str(exc))
    else:
        node.accessible = True  # a captured tree cannot tell; access is judged only live
    return node


# Marker files and folders that only container engines create (a capture records them by existence).
CONTAINER_MARKERS = {".dockerenv": "/.dockerenv exists", "run/.containerenv": "/run/.containerenv exists (podman)",
                     "run/secrets/kubernetes.io": "/run/secrets/kubernetes.io exists (Kubernetes pod)"}


def _container(reader: Reader) -> str | None:
    for rel, why in CONTAINER_MARKERS.items():
        if reader.path(rel).exists():
            return why
    # cgroup v1 paths name the engine; under cgroup v2 with a cgroup namespace /proc/1/cgroup is just
    # "0::/", but the root filesystem of every Docker/containerd/podman container is an overlay mount.
    cgroup = reader.text("proc/1/cgroup") or ""
    m = re.search(r"(docker|kubepods|containerd|libpod|lxc)", cgroup)
    if m:
        return f"/proc/1/cgroup mentions {m.group(1)}"
    for line in (reader.text("proc/self/mountinfo") or "").splitlines():
        fields, _, after = line.partition(" - ")
        parts = fields.split()
        if len(parts) >= 5 and parts[4] == "/" and after.split()[:1] == ["overlay"]:
            return "the root filesystem is an overlay mount (a container image)"
    return None


def collect(root: str = "/", *, process: bool | None = None) -> Facts:
    """Read everything the checks need. root "/" is the live host; any other root is a captured tree."""
    live = os.path.realpath(root) == "/"
    facts = Facts(root=root, live=live)
    reader = Reader(root, facts)
    _read_nodes(reader, facts)
    facts.dev_kfd = _dev_node(reader, "dev/kfd", live)
    for d in facts.devices:
        for minor in d.render_minors:
            facts.render[minor] = _dev_node(reader, f"dev/dri/renderD{minor}", live)
    facts.amdgpu_initstate = reader.line("sys/module/amdgpu/initstate")
    facts.cmdline = reader.line("proc/cmdline")
    facts.numa_balancing = reader.line("proc/sys/kernel/numa_balancing")
    facts.rocm_version = reader.line("opt/rocm/.info/version")
    facts.container = _container(reader)
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
            facts.devices[i] = dataclasses.replace(
                d, compute_partition=compute if compute in MODES else None,
                memory_partition=memory if memory and re.fullmatch(r"NPS\d", memory) else None)
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
        if data is not None and _valid_process(data):
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
    return facts


def shm_from_mounts(mounts: str, meminfo: str) -> int | None:
    """The size of the tmpfs on /dev/shm (the last mount there wins): its size= option (the kernel shows
    it in KiB, "size=65536k"), or without one tmpfs's default of half the RAM (MemTotal)."""
    opts = None
    for line in mounts.splitlines():
        parts = line.split()
        if len(parts) >= 4 and parts[1] == "/dev/shm":
            opts = parts[3] if parts[2] == "tmpfs" else None
    if opts is None:
        return None
    units = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    for opt in opts.split(","):
        m = re.fullmatch(r"size=([0-9]+)([kmg]?)", opt, re.I)
        if m:
            return int(m.group(1)) * units[m.group(2).lower()]
    m = re.search(r"^MemTotal:\s+([0-9]+) kB", meminfo, re.M)
    return int(m.group(1)) * 1024 // 2 if m else None


def memlock_from_limits(limits: str) -> dict | None:
    """`Max locked memory  <soft> <hard> bytes` of /proc/<pid>/limits; None (unlimited) or bytes."""
    m = re.search(r"^Max locked memory\s+(\S+)\s+(\S+)", limits, re.M)
    if not m:
        return None
    values = [None if v == "unlimited" else int(v) if re.fullmatch(r"[0-9]+", v) else False for v in m.groups()]
    return None if False in values else {"soft": values[0], "hard": values[1]}


def _valid_process(d) -> bool:
    """The shape the checks rely on (a hand-edited or foreign file is reported, not trusted)."""
    if not isinstance(d, dict):
        return False
    env, packages = d.get("env", {}), d.get("packages", {})
    if not (isinstance(env, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in env.items())):
        return False
    if not (isinstance(packages, dict) and all(v is None or isinstance(v, str) for v in packages.values())):
        return False
    shm, memlock = d.get("shm_bytes"), d.get("memlock", {})
    if shm is not None and not isinstance(shm, int) or not isinstance(memlock, dict):
        return False
    if any(not (v is None or isinstance(v, int)) for v in memlock.values()):
        return False
    lists = ("ray_noset_vars", "sglang_vf_missing", "groups")
    if any(d.get(k) is not None and not isinstance(d.get(k), list) for k in lists):
        return False
    dicts = ("gpu_libraries", "docker", "ray_amd")
    if any(d.get(k) is not None and not isinstance(d.get(k), dict) for k in dicts):
        return False
    return all(d.get(k) is None or isinstance(d.get(k), str) for k in ("torch_hip", "sglang_dir"))


def collect_process(vf_host: bool = False) -> dict:
    """Facts of the running process; everything JSON-serialisable so a capture can carry them."""
    import resource
    import shutil

    env = {k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIXES)}
    try:
        shm = shutil.disk_usage("/dev/shm").total
    except OSError:
        shm = None
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    unlimited = resource.RLIM_INFINITY
    return {
        "env": env,
        "shm_bytes": shm,
        "memlock": {"soft": None if soft == unlimited else soft, "hard": None if hard == unlimited else hard},
        "uid": os.getuid(),
        "groups": sorted(set(os.getgroups()) | {os.getgid()}),
        "packages": _packages(),
        "torch_hip": _torch_hip(),
        "ray_noset_vars": _ray_noset_vars(),
        "ray_amd": _ray_amd(),
        "sglang_dir": _package_dir("sglang"),
        "sglang_vf_missing": _sglang_vf_missing() if vf_host else None,
        "gpu_libraries": _gpu_libraries(),
        "docker": _docker(),
    }


def _packages() -> dict[str, str | None]:
    from importlib import metadata

    out = {}
    for name in PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            out[name] = None
        except Exception as exc:  # a broken install is a fact, not a crash
            out[name] = f"unreadable: {type(exc).__name__}"
    return out


def _package_dir(name: str) -> str | None:
    import importlib.util

    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None
    return list(spec.submodule_search_locations)[0] if spec and spec.submodule_search_locations else None


def _sglang_vf_missing() -> list[str] | None:
    """VF-named SGLang configs that `rocmkit vf-configs` would create (dry run); None without SGLang."""
    from . import vfconfigs

    d = _package_dir("sglang")
    if not d:
        return None
    result = vfconfigs.replicate([(vfconfigs.FRAMEWORKS["sglang"], Path(d))], vfconfigs.pairs_for("sglang"),
                                 dry_run=True)
    return result.created


def _torch_hip() -> str | None:
    """torch.version.hip, read from torch/version.py without importing torch (which takes seconds)."""
    d = _package_dir("torch")
    if not d:
        return None
    try:
        text = Path(d, "version.py").read_text()
    except OSError:
        return None
    m = re.search(r"^hip\s*(?::\s*[^=]+)?=\s*['\"]([^'\"]+)['\"]", text, re.M)
    return m.group(1) if m else ""  # "" = torch present, built without HIP


def _ray_noset_vars() -> list[str] | None:
    """The RAY_EXPERIMENTAL_NOSET_* names the installed Ray's AMD accelerator module actually reads
    (Ray changed which one it reads without a clean version boundary — ray-project/ray#51104, #53757,
    radixark/miles#1233 — so the code is read rather than the version trusted)."""
    d = _package_dir("ray")
    if not d:
        return None
    try:
        text = Path(d, "_private", "accelerators", "amd_gpu.py").read_text()
    except OSError:
        return None
    return sorted(set(re.findall(r"RAY_EXPERIMENTAL_NOSET_[A-Z_]+", text)))


def _ray_amd() -> dict | None:
    """How the installed Ray treats AMD GPUs, read from its code (it changed between releases without a
    clean version boundary): which library counts the GPUs — the `amdsmi` package (Ray 2.60's
    thirdparty/pyamdsmi shim) or $ROCM_PATH/lib/librocm_smi64.so (older ctypes bindings) — which exception
    guards its `import amdsmi`, and whether it refuses ROCR_VISIBLE_DEVICES: always (2.45, ray#51104) or
    only without HIP_VISIBLE_DEVICES (after ray#53757)."""
    d = _package_dir("ray")
    return ray_amd_facts(Path(d)) if d else None


def ray_amd_facts(ray_dir: Path) -> dict:
    """_ray_amd() for the Ray package at ray_dir."""
    d = ray_dir
    out: dict = {"gpu_backend": None, "amdsmi_guard": None, "rocr_rule": None}
    try:
        smi = Path(d, "_private", "thirdparty", "pyamdsmi", "pyamdsmi.py").read_text(errors="replace")
    except OSError:
        smi = ""
    m = re.search(r"^[ \t]*(?:import amdsmi\b|from amdsmi import)", smi, re.M)
    if m:
        out["gpu_backend"] = "amdsmi"
        guard = re.search(r"^[ \t]*except\b[ \t]*([^:\n]*):", smi[m.end():m.end() + 1500], re.M)
        out["amdsmi_guard"] = guard.group(1).strip() if guard else None
    elif "librocm_smi64" in smi:
        out["gpu_backend"] = "rocm_smi"
    try:
        acc = Path(d, "_private", "accelerators", "amd_gpu.py").read_text(errors="replace")
    except OSError:
        acc = ""
    m = re.search(r"instead of ROCR_VISIBLE_DEVICES", acc)
    if m:
        before = acc[max(0, m.start() - 600):m.start()]
        out["rocr_rule"] = "without_hip" if re.search(r"HIP_VISIBLE_DEVICES\w*\s+not in os\.environ", before) \
            else "always"
    return out


def _gpu_libraries() -> dict[str, dict]:
    """pyamdgpuinfo and amdsmi when they import and work; any failure of theirs is recorded."""
    out: dict[str, dict] = {}
    for name, probe in (("pyamdgpuinfo", _probe_pyamdgpuinfo), ("amdsmi", _probe_amdsmi)):
        if _package_dir(name) is None:
            out[name] = {"status": "absent"}
            continue
        printed: list[str] = []
        stage = {"stage": "import"}  # the probe moves it on; where it failed matters to Ray and vLLM
        try:
            with _silenced(printed):
                out[name] = {"status": "ok", **probe(stage)}
        except ModuleNotFoundError:
            out[name] = {"status": "absent"}
        except BaseException as exc:  # noqa: BLE001 - these libraries raise anything (KeyError, FileNotFoundError)
            if isinstance(exc, KeyboardInterrupt):
                raise
            # import_error: whether `except ImportError` (Ray's and vLLM's guard around `import amdsmi`)
            # would catch it; amdsmi 7.0.2 without libamd_smi.so raises KeyError instead.
            out[name] = {"status": "error", "error": f"{type(exc).__name__}: {exc}", "stage": stage["stage"],
                         "import_error": isinstance(exc, ImportError)}
        if printed and printed[0].strip():
            out[name]["printed"] = printed[0].strip()[-500:]
    return out


@contextlib.contextmanager
def _silenced(printed: list[str]):
    """Run a GPU library with its prints caught: `import amdsmi` without ROCm prints to stdout, which would
    corrupt `--json`. Python-level output and C-level output (fd 1 and 2) are both caught, kept as evidence."""
    import sys
    import tempfile

    py = io.StringIO()
    with tempfile.TemporaryFile(mode="w+b") as tmp:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):
                pass
        saved = []
        try:
            for fd in (1, 2):
                try:
                    saved.append((fd, os.dup(fd)))
                    os.dup2(tmp.fileno(), fd)
                except OSError:  # no such fd (a daemonised caller): Python-level capture still applies
                    pass
            with contextlib.redirect_stdout(py), contextlib.redirect_stderr(py):
                yield
        finally:
            for fd, copy in saved:
                os.dup2(copy, fd)
                os.close(copy)
            tmp.seek(0)
            printed.append(py.getvalue() + tmp.read(1 << 16).decode("utf-8", errors="replace"))


def _probe_pyamdgpuinfo(stage: dict) -> dict:
    import pyamdgpuinfo

    stage["stage"] = "use"
    return {"gpus": pyamdgpuinfo.detect_gpus()}


def _probe_amdsmi(stage: dict) -> dict:
    import amdsmi

    stage["stage"] = "use"
    amdsmi.amdsmi_init()
    try:
        return {"gpus": len(amdsmi.amdsmi_get_processor_handles())}
    finally:
        amdsmi.amdsmi_shut_down()


def _docker() -> dict:
    """Whether the Docker engine is reachable and usable by this user, without importing the SDK."""
    host = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    if not host.startswith("unix://"):
        return {"host": host, "status": "unchecked", "reason": "non-unix DOCKER_HOST is not probed at level 1"}
    sock = host[len("unix://"):]
    if not os.path.exists(sock):
        return {"host": host, "status": "absent"}
    import socket

    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(1.0)
    try:
        s.connect(sock)
        s.sendall(b"GET /_ping HTTP/1.0\r\nHost: docker\r\n\r\n")
        reply = s.recv(64).decode(errors="replace")
    except PermissionError:
        return {"host": host, "status": "denied"}
    except OSError as exc:
        return {"host": host, "status": "down", "error": exc.strerror or str(exc)}
    finally:
        s.close()
    return {"host": host, "status": "ok" if " 200 " in reply else "down", "reply": reply.split("\r\n")[0]}
