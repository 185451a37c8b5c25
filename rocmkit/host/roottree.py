"""`doctor --root DIR`: DIR must be laid out as a root filesystem (the host's files at their paths under it), checked
before anything is read. A folder that is only a part of one (a `topology/` copied from /sys/class/kfd/kfd) would
otherwise be read as a host with no topology, no driver and no device nodes, and the report would say "amdgpu
kernel driver is not loaded" about a host where it was never looked for.
"""

from __future__ import annotations

import os

from ..errors import UsageError
from .facts import PROCESS_FILE
from .facts.reader import KFD_TOPOLOGY, READ_ERRORS_FILE

# What a tree holds, for the error and the hosts guide: the host's paths, without their leading "/".
LAYOUT = (f"{KFD_TOPOLOGY}/nodes/N/properties", "sys/module/amdgpu/initstate", "sys/bus/pci/devices/BDF/...",
          "proc/cmdline", "proc/sys/kernel/...", "dev/kfd", "dev/dri/renderD*", PROCESS_FILE)
TOP = ("sys", "proc", "dev")  # a tree has at least one of these folders, or rocmkit's own records


def check_root(root: str) -> None:
    """Refuse (exit 2) a folder that is not a root tree, saying where it belongs when it is a part of one."""
    if os.path.isdir(os.path.join(root, "sys")) or \
            any(os.path.isfile(os.path.join(root, f)) for f in (PROCESS_FILE, READ_ERRORS_FILE)):
        return
    # Parts first: /sys/class/kfd/kfd has a proc/ folder of its own (the processes using the GPUs).
    part = part_of_tree(root)
    if part is None and any(os.path.isdir(os.path.join(root, t)) for t in TOP):
        return
    layout = "a tree holds the host's files at their own paths under it: " + ", ".join(LAYOUT)
    capture = "`rocmkit doctor --capture DIR` on the host writes such a tree"
    if part:
        raise UsageError(f"--root {root}: this folder looks like the host's /{part} alone, not a root filesystem tree",
                         hint=f"put it at TREE/{part} (`mkdir -p TREE/{os.path.dirname(part)} && cp -r {root} "
                              f"TREE/{part}`) and run `rocmkit doctor --root TREE`; {layout}; {capture}")
    raise UsageError(f"--root {root}: not a root filesystem tree (it has none of {', '.join(t + '/' for t in TOP)} "
                     f"nor {PROCESS_FILE})", hint=f"{layout}; {capture}")


def part_of_tree(folder: str) -> str | None:
    """Which path of a root tree this folder is a copy of (e.g. "sys/class/kfd/kfd/topology"), or None."""
    def has(*rel: str) -> bool:
        return os.path.exists(os.path.join(folder, *rel))

    def kfd_nodes(path: str) -> bool:  # KFD node folders: 0, 1, ... each with a properties file
        try:
            return any(n.isdigit() and os.path.isfile(os.path.join(path, n, "properties")) for n in os.listdir(path))
        except OSError:
            return False

    kfd = os.path.dirname(KFD_TOPOLOGY)  # sys/class/kfd/kfd
    if kfd_nodes(os.path.join(folder, "nodes")) or has("system_properties"):
        return KFD_TOPOLOGY
    if kfd_nodes(folder):
        return f"{KFD_TOPOLOGY}/nodes"
    if has("topology", "nodes"):
        return kfd
    if has("kfd", "topology"):
        return os.path.dirname(kfd)
    if has("kfd", "kfd", "topology"):
        return "sys/class"
    if has("class") or has("module") or has("bus", "pci"):
        return "sys"
    if has("initstate"):
        return "sys/module/amdgpu"
    if has("cmdline") or has("cpuinfo") or has("self", "limits"):
        return "proc"
    if has("kfd") or has("dri"):
        return "dev"
    return None
