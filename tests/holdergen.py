"""The processes holding GPU memory in a generated host tree (treegen's HostSpec names them): their procfs
files (comm, cmdline, stat; /proc/stat's btime is treegen's) and, for those seen through DRM only, their open
render nodes and amdgpu's fdinfo. Test support, as treegen is."""

from __future__ import annotations

import os
from pathlib import Path

# What a holder is, unless a test names it, and when it started: 2 h 14 min after the tree's boot (08:00 UTC)
HOLDER_CMDLINE = "/usr/bin/python3 -m vllm.entrypoints.openai.api_server --model Qwen/Qwen2.5-7B-Instruct"
HOLDER_STARTED_S = 2 * 3600 + 14 * 60
BTIME = 1795852800  # 2026-11-28 08:00:00 UTC
CLK_TCK = 100
IDLE_VRAM_USED = 288 << 20  # an idle GPU's mem_info_vram_used: the driver's own buffers


def write_holder(root: Path, spec, pid: int) -> None:
    """proc/<pid>/{comm,cmdline,stat} of a process holding GPU memory, as procfs shows them (proc(5)): cmdline's
    arguments NUL-terminated; stat's starttime (field 22) in clock ticks since boot."""
    cmdline = spec.cmdlines.get(pid, HOLDER_CMDLINE)
    comm = os.path.basename(cmdline.split(" ")[0])[:15]
    ticks = int(spec.started_s.get(pid, HOLDER_STARTED_S) * CLK_TCK)
    _write(root / f"proc/{pid}/comm", comm + "\n")
    (root / f"proc/{pid}/cmdline").write_bytes(b"".join(a.encode() + b"\0" for a in cmdline.split(" ")))
    _write(root / f"proc/{pid}/stat", f"{pid} ({comm}) S 1 {pid} {pid} 0 -1 4194560 812345 0 12 0 90817 20311 0 0 "
                                      f"20 0 143 0 {ticks} 72567922688 2394872 18446744073709551615\n")


def amdgpu_fdinfo(pdev: str, client_id: int, vram_bytes: int, gtt_bytes: int = 2 << 20) -> str:
    """/proc/<pid>/fdinfo/<fd> of an amdgpu render node, line for line as amdgpu_show_fdinfo prints it
    (https://github.com/torvalds/linux/blob/0604aa87b098740f2e517a584552591cbf2209d7/drivers/gpu/drm/amd/amdgpu/amdgpu_fdinfo.c,
    keys per https://docs.kernel.org/gpu/drm-usage-stats.html), after the VFS's own pos/flags/mnt_id/ino lines."""
    kib, gtt = vram_bytes // 1024, gtt_bytes // 1024
    return (f"pos:\t0\nflags:\t02100002\nmnt_id:\t26\nino:\t1090\npasid:\t{32768 + client_id}\n"
            f"drm-driver:\tamdgpu\ndrm-pdev:\t{pdev}\ndrm-client-id:\t{client_id}\n"
            f"drm-memory-vram:\t{kib} KiB\ndrm-memory-gtt: \t{gtt} KiB\ndrm-memory-cpu: \t0 KiB\n"
            f"amd-memory-visible-vram:\t{kib} KiB\namd-evicted-vram:\t0 KiB\namd-evicted-visible-vram:\t0 KiB\n"
            f"amd-requested-vram:\t{kib} KiB\namd-requested-visible-vram:\t0 KiB\namd-requested-gtt:\t{gtt} KiB\n"
            f"drm-engine-compute:\t8123456789 ns\n")


def write_drm_procs(root: Path, spec) -> None:
    """spec.drm_procs as procfs shows them: each GPU's render node open as one fd (a link to /dev/dri/renderD<N>,
    its fdinfo amdgpu's), beside a socket and a file that are not DRM's."""
    for pid, held in spec.drm_procs.items():
        write_holder(root, spec, pid)
        fd, fdinfo = root / f"proc/{pid}/fd", root / f"proc/{pid}/fdinfo"
        fd.mkdir(parents=True, exist_ok=True)
        fdinfo.mkdir(parents=True, exist_ok=True)
        os.symlink("socket:[4719203]", fd / "3")
        (fdinfo / "3").write_text("pos:\t0\nflags:\t02000002\nmnt_id:\t9\nino:\t4719203\n")
        os.symlink("/var/log/vllm.log", fd / "4")
        (fdinfo / "4").write_text("pos:\t1834\nflags:\t02102001\nmnt_id:\t1318\nino:\t2621831\n")
        for g, vram in held.items():
            n = 10 + g
            os.symlink(f"/dev/dri/renderD{128 + 8 * g}", fd / str(n))
            (fdinfo / str(n)).write_text(amdgpu_fdinfo(f"0000:{0x05 + 0x10 * g:02x}:00.0", 40 + pid % 1000 + g, vram))



def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
