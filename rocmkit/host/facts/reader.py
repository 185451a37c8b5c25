"""The one way the doctor reads a host or a captured tree: every file under a root prefix, non-blocking,
regular files only (a FIFO or a device in a tree is a read error, not a hang), errors recorded, never raised."""

from __future__ import annotations

import errno
import json
import os
import re
import stat
from pathlib import Path
from typing import Any, NamedTuple

from .kfd import Node, parse_properties

KFD_TOPOLOGY = "sys/class/kfd/kfd/topology"
# In a captured tree: files that could not be read where the capture was made, with the reason
# (a container's EPERM on GPUs not granted to it), so --root reproduces them.
READ_ERRORS_FILE = "rocmkit-read-errors.json"


class DevNode(NamedTuple):
    """A device node (/dev/kfd, a render node): whether it exists, its group, and whether it opens."""

    path: str
    exists: bool
    accessible: bool = False  # opened read-write by this process (live); True in a captured tree (not judged)
    gid: int | None = None
    error: str | None = None


class Reader:
    """Reads files under a root, remembering what it read and every error, never raising: its read log is
    files_read (every file read) and read_errors ((path, why) of every failure, in order)."""

    def __init__(self, root: str, live: bool):
        self.root = Path(root)
        self._root = str(self.root)  # raw()'s joins: os.path.join is a tenth of a Path join, ~300 times a run
        self.files_read: list[str] = []
        self.read_errors: list[tuple[str, str]] = []
        self.recorded_errors: dict[str, str] = {}
        if not live:
            try:
                data = json.loads((self.root / READ_ERRORS_FILE).read_text())
                self.recorded_errors = {str(k).lstrip("/"): str(v) for k, v in data.items()}
            except (OSError, ValueError, AttributeError):
                pass

    def path(self, rel: str) -> Path:
        return self.root / rel.lstrip("/")

    def raw(self, rel: str, limit: int = 1 << 20) -> tuple[bytes | None, str | None]:
        """(the file's first `limit` bytes, None), or (None, why it could not be read); a missing file is
        (None, None). Every failure is recorded in read_errors, every read in files_read."""
        rel = rel.lstrip("/")
        if rel in self.recorded_errors:
            self.read_errors.append((rel, self.recorded_errors[rel]))
            return None, self.recorded_errors[rel]
        try:
            # Non-blocking, and regular files only: a FIFO or device planted in a captured tree would
            # otherwise hang the doctor (sysfs and procfs files are all regular files).
            fd = os.open(os.path.join(self._root, rel), os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    why = "not a regular file"
                else:
                    data = _read_upto(fd, limit)
                    self.files_read.append(rel)
                    return data, None
            finally:
                os.close(fd)
        except FileNotFoundError:
            return None, None
        except OSError as exc:
            why = "permission denied" if isinstance(exc, PermissionError) else (exc.strerror or type(exc).__name__)
        self.read_errors.append((rel, why))
        return None, why

    def text(self, rel: str, limit: int = 1 << 20) -> str | None:
        data, _ = self.raw(rel, limit)
        return data.decode("utf-8", errors="replace") if data is not None else None

    def listdir(self, rel: str) -> list[str]:
        """The names in a folder under the root; none where it is missing or unreadable."""
        try:
            return os.listdir(self.path(rel))
        except (OSError, ValueError):
            return []

    def line(self, rel: str) -> str | None:
        t = self.text(rel)
        return t.strip() if t is not None else None


def _read_upto(fd: int, limit: int) -> bytes:
    """The first `limit` bytes, read in 64 KiB chunks: a buffered read(limit) allocates all of `limit` (1 MiB)
    for every file, most of a small sysfs file's read time. (sysfs sizes say 4096 whatever the content, so
    the size cannot tell how much to read.) os.read on the descriptor: a file object around it costs as much
    again as the read itself, ~400 times a run."""
    chunks: list[bytes] = []
    n = 0
    while n < limit:
        chunk = os.read(fd, min(1 << 16, limit - n))
        if not chunk:
            break
        chunks.append(chunk)
        n += len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def read_nodes(reader: Reader) -> list[Node] | None:
    """The KFD topology's nodes, or None when the tree has no topology."""
    nodes_dir = reader.path(f"{KFD_TOPOLOGY}/nodes")
    try:
        names = sorted((n for n in os.listdir(nodes_dir) if n.isdigit()), key=int)
    except OSError:
        return None
    nodes = []
    for name in names:
        rel = f"{KFD_TOPOLOGY}/nodes/{name}/properties"
        before = len(reader.read_errors)
        text = reader.text(rel)
        error = reader.read_errors[-1][1] if len(reader.read_errors) > before else (None if text is not None else "missing")
        nodes.append(Node(index=int(name), props=parse_properties(text or ""), error=error))
    return nodes


def dev_node(reader: Reader, rel: str, live: bool) -> DevNode:
    p = reader.path(rel)
    try:
        st = os.stat(p)
    except OSError:
        return DevNode(path="/" + rel, exists=False)
    if not live:  # a captured tree cannot tell; access is judged only live
        return DevNode(path="/" + rel, exists=True, accessible=True, gid=st.st_gid)
    try:  # opening is the only honest test of access (device cgroup, groups, mode)
        os.close(os.open(p, os.O_RDWR | os.O_CLOEXEC))
    except OSError as exc:
        why = "permission denied" if exc.errno in (errno.EACCES, errno.EPERM) else (exc.strerror or str(exc))
        return DevNode(path="/" + rel, exists=True, gid=st.st_gid, error=why)
    return DevNode(path="/" + rel, exists=True, accessible=True, gid=st.st_gid)


# Marker files and folders that only container engines create (a capture records them by existence).
CONTAINER_MARKERS = {".dockerenv": "/.dockerenv exists", "run/.containerenv": "/run/.containerenv exists (podman)",
                     "run/secrets/kubernetes.io": "/run/secrets/kubernetes.io exists (Kubernetes pod)"}


def container(reader: Reader) -> str | None:
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




def pci_device(reader: Reader, pci: str | None) -> dict[str, Any]:
    """A PCI device's id and link state (current and maximum speed and width), where sysfs has them."""
    if not pci:
        return {}
    base = f"sys/bus/pci/devices/{pci}"
    link = {k: reader.line(f"{base}/{k}") for k in ("current_link_speed", "current_link_width", "max_link_speed",
                                                    "max_link_width")}
    return {"device": reader.line(f"{base}/device"),
            "link": {"current_speed": link["current_link_speed"], "current_width": link["current_link_width"],
                     "max_speed": link["max_link_speed"], "max_width": link["max_link_width"]}
            if link["current_link_width"] else None}


def read_pci_device(pci: str | None, root: str = "/") -> dict[str, Any]:
    """pci_device() for a live host's (or a tree's) PCI address, recording nothing (the probes' evidence)."""
    return pci_device(Reader(root, live=root == "/"), pci)

