"""The reader of GPU memory holders (rocmkit/host/facts/gpu_holders.py, drm_fdinfo.py) on its own: amdgpu's DRM
fdinfo as the kernel prints it, nvidia-smi's CSV lines (and nvidia-smi itself, a stand-in), the words a user reads
(describe), a real MI308X CPX topology's gpu_ids, the GPUs found through /sys/class/drm without the doctor's
devices, unreadable files, and this machine's own /proc."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import psutil
import pytest

from conftest import SHARED_FIXTURES
from holdergen import BTIME, amdgpu_fdinfo
from rocmkit.host.facts import collect
from rocmkit.host.facts.drm_fdinfo import parse_drm_fdinfo, pci_address
from rocmkit.host.facts.gpu_holders import (GpuMemory, Holder, _btime, _process, _without_kfd, describe, gpu_memory,
                                            holders, kfd_processes, parse_nvidia_apps, parse_nvidia_gpus)
from rocmkit.host.facts.reader import KFD_TOPOLOGY, Reader
from treegen import HostSpec, healthy_process, write_tree

GIB, MIB = 1 << 30, 1 << 20

# /proc/<pid>/fdinfo/<fd> of an amdgpu render node, line for line as amdgpu_show_fdinfo() prints it:
# https://github.com/torvalds/linux/blob/0604aa87b098740f2e517a584552591cbf2209d7/drivers/gpu/drm/amd/amdgpu/amdgpu_fdinfo.c
# (the keys: https://docs.kernel.org/gpu/drm-usage-stats.html), after the VFS's own pos/flags/mnt_id/ino lines
AMDGPU_FDINFO = """pos:\t0
flags:\t02100002
mnt_id:\t26
ino:\t1090
pasid:\t32859
drm-driver:\tamdgpu
drm-pdev:\t0000:c1:00.0
drm-client-id:\t91
drm-memory-vram:\t134742016 KiB
drm-memory-gtt: \t2048 KiB
drm-memory-cpu: \t0 KiB
amd-memory-visible-vram:\t134742016 KiB
amd-evicted-vram:\t0 KiB
amd-evicted-visible-vram:\t0 KiB
amd-requested-vram:\t134742016 KiB
amd-requested-visible-vram:\t0 KiB
amd-requested-gtt:\t2048 KiB
drm-engine-compute:\t8123456789 ns
"""


def test_amdgpu_fdinfo_gives_the_gpu_the_client_and_its_vram():
    c = parse_drm_fdinfo(AMDGPU_FDINFO)
    assert (c.driver, c.pdev, c.client_id, c.engines_ns) == ("amdgpu", "0000:c1:00.0", "91", 8123456789)
    assert c.vram == 134742016 * 1024 and c.memory["memory-gtt"] == 2 << 20
    assert parse_drm_fdinfo("pos:\t0\nflags:\t02000002\nmnt_id:\t9\nino:\t4719203\n") is None  # a socket
    # drm-usage-stats.rst's standard keys (newer kernels): the resident figure, which drm-memory-* aliases
    newer = parse_drm_fdinfo("drm-driver:\tamdgpu\ndrm-pdev:\t0000:05:00.0\ndrm-client-id:\t7\n"
                             "drm-total-vram:\t3 GiB\ndrm-resident-vram:\t2 GiB\ndrm-memory-vram:\t2097152 KiB\n")
    assert newer.vram == 2 * GIB
    # xe's cycle counters are no memory
    assert parse_drm_fdinfo("drm-driver:\txe\ndrm-total-cycles-rcs:\t7655183225\n").memory == {}


def test_the_generator_writes_the_kernels_format():
    assert amdgpu_fdinfo("0000:c1:00.0", 91, 134742016 * 1024) == AMDGPU_FDINFO


def test_nvidia_smi_lines_give_each_process_its_memory_per_gpu():
    # `nvidia-smi --query-compute-apps=pid,used_memory,gpu_bus_id --format=csv,noheader,nounits` (MiB), a process
    # on two GPUs, and what it prints where a value is not available
    apps = parse_nvidia_apps(["4242, 131584, 00000000:1B:00.0", "4242, 2048, 00000000:1C:00.0",
                              "5151, [N/A], 00000000:1B:00.0", ""])
    assert apps == {4242: {"0000:1b:00.0": 131584 * MIB, "0000:1c:00.0": 2048 * MIB}}
    # `nvidia-smi --query-gpu=pci.bus_id,memory.total,memory.used --format=csv,noheader,nounits` of an H200
    assert parse_nvidia_gpus(["00000000:1B:00.0, 143771, 132034", "00000000:1C:00.0, 143771, [N/A]"]) == [
        GpuMemory("0000:1b:00.0", 143771 * MIB, 132034 * MIB, "nvidia-smi"),
        GpuMemory("0000:1c:00.0", 143771 * MIB, None, "nvidia-smi")]
    assert pci_address("00000000:1B:00.0") == "0000:1b:00.0" and pci_address("gpu_id 41657") is None


def test_describe_names_the_process_its_memory_and_start(utc):
    started = BTIME + 2 * 3600 + 14 * 60  # 10:14 UTC
    h = Holder(4242, "python3", "/usr/bin/python3 -m vllm.entrypoints.openai.api_server --model Qwen/Qwen3-8B",
               started, {"0000:c1:00.0": int(128.5 * GIB), "0000:d1:00.0": 300 * MIB}, "kfd")
    assert describe(h, "0000:c1:00.0", now=started + 3600) == \
        "pid 4242 (python3 -m vllm.entrypoints.openai.api_s...) 128.5 GiB, started 10:14"
    assert describe(h, "0000:d1:00.0", now=started + 3600).endswith(") 300 MiB, started 10:14")
    assert describe(h, "", now=started + 3 * 86400).endswith(") 128.8 GiB, started Nov 28 10:14")  # not today
    engine = h._replace(comm="VLLM::EngineCor", cmdline="VLLM::EngineCore", started=None)
    assert describe(engine, "0000:c1:00.0") == "pid 4242 (VLLM::EngineCore) 128.5 GiB"
    assert describe(engine._replace(cmdline=None), "0000:c1:00.0") == "pid 4242 (VLLM::EngineCor) 128.5 GiB"
    assert describe(engine._replace(cmdline=None, comm=None), "0000:c1:00.0") == "pid 4242 128.5 GiB"


def test_holders_merge_kfd_and_drm_fdinfo_per_pid(tmp_path):
    """KFD names the process; its DRM fdinfo counts the same buffers: the larger figure per GPU, one source."""
    root = write_tree(tmp_path / "h", HostSpec(gpus=2, kfd_procs={777: {1: 4 * GIB}}, process=healthy_process()))
    fdinfo = root / "proc/777/fdinfo"
    fdinfo.mkdir()
    (fdinfo / "12").write_text(amdgpu_fdinfo("0000:15:00.0", 5, 5 * GIB))
    (fdinfo / "13").write_text(amdgpu_fdinfo("0000:15:00.0", 5, 5 * GIB))  # a dup() of fd 12: one client
    found, read = holders(Reader(str(root), False), collect(str(root)).devices)
    assert [(h.pid, h.memory, h.source) for h in found] == [(777, {"0000:15:00.0": 5 * GIB}, "kfd")]
    assert read == "KFD (/sys/class/kfd/kfd/proc: 2 process(es))"  # 777 and the doctor's own 4242
    assert found[0].started == BTIME + 8040 and found[0].comm == "python3"
    assert holders(Reader(str(root), False), exclude=[777]) == ([], read)


def test_a_drm_file_shared_over_fork_counts_once(tmp_path):
    root = write_tree(tmp_path / "h", HostSpec(gpus=1, kfd=False, drm_procs={500: {0: 3 * GIB}},
                                               process=healthy_process()))
    child = root / "proc/501"
    shutil.copytree(root / "proc/500", child, symlinks=True)
    found, read = holders(Reader(str(root), False))
    assert [(h.pid, h.memory) for h in found] == [(500, {"0000:05:00.0": 3 * GIB})]
    assert read == "DRM fdinfo (/proc/<pid>/fdinfo: 2 process(es) read)"


def test_real_mi308x_cpx_partitions_map_onto_their_gpu(tmp_path):
    """The real MI308X CPX capture: each partition node has its own gpu_id; VRAM held on two partitions of one GPU
    is that GPU's, read with the doctor's devices or without them (certify's way)."""
    topo = SHARED_FIXTURES / "kfd" / "mi308x-cpx" / "topology"
    if not topo.is_dir():
        pytest.skip("real capture mi308x-cpx not present (../shared/fixtures is absent in a fresh clone)")
    root = tmp_path / "h"
    (root / KFD_TOPOLOGY).parent.mkdir(parents=True)
    (root / KFD_TOPOLOGY).symlink_to(topo)
    gid = {n: (topo / f"nodes/{n}/gpu_id").read_text().strip() for n in (2, 3, 23)}
    proc = root / "sys/class/kfd/kfd/proc/9001"
    proc.mkdir(parents=True)
    (proc / f"vram_{gid[2]}").write_text(f"{10 * GIB}\n")
    (proc / f"vram_{gid[3]}").write_text(f"{6 * GIB}\n")
    (proc / f"vram_{gid[23]}").write_text(f"{GIB}\n")
    (proc / "vram_12345").write_text(f"{GIB}\n")  # a gpu_id of no node here
    expected = {"0000:0a:00.0": 16 * GIB, "0001:81:00.0": GIB, "gpu_id 12345": GIB}
    assert kfd_processes(Reader(str(root), False))[0].vram == expected
    found, _ = holders(Reader(str(root), False), collect(str(root), process=False).devices)
    assert found[0].memory == expected and found[0].comm is None and found[0].started is None


def test_gpu_memory_without_devices_reads_each_drm_card(tmp_path):
    root = write_tree(tmp_path / "h", HostSpec(gpus=2, kfd_procs={777: {1: 4 * GIB}}, process=healthy_process()))
    total = 196592 * MIB
    assert gpu_memory(Reader(str(root), False)) == [
        GpuMemory("0000:05:00.0", total, 288 * MIB, "sysfs mem_info_vram"),
        GpuMemory("0000:15:00.0", total, 288 * MIB + 4 * GIB, "sysfs mem_info_vram")]
    assert gpu_memory(Reader(str(root), False), collect(str(root)).devices) == gpu_memory(Reader(str(root), False))
    assert gpu_memory(Reader(str(tmp_path / "empty"), False)) == []


def test_unreadable_files_are_absent_not_a_traceback(tmp_path):
    root = write_tree(tmp_path / "h", HostSpec(gpus=1, kfd=False, drm_procs={500: {0: 3 * GIB}},
                                               process=healthy_process()))
    fdinfo = root / "proc/500/fdinfo/10"
    fdinfo.unlink()
    os.mkfifo(fdinfo)  # a FIFO where a file was: a read error, never a hang
    (root / "proc/500/stat").write_text("garbage")
    (root / "sys/bus/pci/devices/0000:05:00.0/mem_info_vram_total").write_text("n/a\n")
    reader = Reader(str(root), False)
    assert holders(reader) == ([], "DRM fdinfo (/proc/<pid>/fdinfo: 1 process(es) read)")
    assert ("proc/500/fdinfo/10", "not a regular file") in reader.read_errors
    assert gpu_memory(reader) == [GpuMemory("0000:05:00.0", None, 288 * MIB + 3 * GIB, "sysfs mem_info_vram")]


def test_this_machines_own_processes():
    """Live: this process's command line and start time, read as holders() reads a holder's, against psutil's; and
    holders() over this machine's /proc names no process twice and leaves the excluded pid out."""
    reader = Reader("/", True)
    comm, cmdline, started = _process(reader, os.getpid(), _btime(reader))
    me = psutil.Process()
    assert comm == me.name()[:15] and cmdline == " ".join(me.cmdline())[:300]
    assert abs(started - me.create_time()) < 1.0
    found, read = holders(reader, exclude=[os.getpid()])
    assert len({h.pid for h in found}) == len(found) and os.getpid() not in {h.pid for h in found}
    assert read == "" or read.startswith(("KFD", "DRM fdinfo", "nvidia-smi"))
    assert all(isinstance(m, GpuMemory) for m in gpu_memory(reader))
    # a KFD pid is named after its /proc entry only when that process has /dev/kfd open (pid namespaces): this
    # process has not, and a pid that is no process here is not named either
    assert _without_kfd(reader, os.getpid()) and _without_kfd(reader, 2**22 + 1)


def test_nvidia_smi_is_asked_on_a_live_host_without_kfd(tmp_path, monkeypatch):
    """The live path to nvidia-smi, through the process runner: a stand-in on PATH prints what the real one prints
    for both queries (this machine has no NVIDIA GPU); the process it names is this one, so its command line and
    start time are read from the real /proc."""
    if Path("/sys/class/kfd/kfd/proc").is_dir() or Path("/sys/class/drm").is_dir():
        pytest.skip("this host has KFD or DRM cards: those answer before nvidia-smi is asked")
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    me = os.getpid()
    smi.write_text('#!/bin/sh\ncase "$1" in\n'
                   f'  --query-compute-apps=pid,used_memory,gpu_bus_id) echo "{me}, 131584, 00000000:1B:00.0";;\n'
                   '  --query-gpu=pci.bus_id,memory.total,memory.used) echo "00000000:1B:00.0, 143771, 132034";;\n'
                   '  *) echo "unexpected: $*" >&2; exit 2;;\nesac\n')
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", f"{smi.parent}{os.pathsep}{os.environ['PATH']}")
    reader = Reader("/", True)
    found, read = holders(reader)
    mine = [h for h in found if h.pid == os.getpid()]
    assert "nvidia-smi --query-compute-apps" in read
    assert [(h.memory, h.source) for h in mine] == [({"0000:1b:00.0": 131584 * MIB}, "nvidia-smi")]
    assert mine[0].cmdline == " ".join(psutil.Process().cmdline())[:300]
    assert holders(reader, exclude=[os.getpid()])[0] == [h for h in found if h.pid != os.getpid()]
    assert gpu_memory(reader) == [GpuMemory("0000:1b:00.0", 143771 * MIB, 132034 * MIB, "nvidia-smi")]
