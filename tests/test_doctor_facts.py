"""Facts read from files, checked against what the running process measures directly, and a tree that would
hang a naive reader."""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rocmkit.doctor.facts import collect, memlock_from_limits, shm_from_mounts


def test_shm_from_this_machines_mounts_matches_statvfs():
    mounts = Path("/proc/self/mounts").read_text()
    if not any(line.split()[1:3] == ["/dev/shm", "tmpfs"] for line in mounts.splitlines()):
        pytest.skip("/dev/shm is not a tmpfs mount here")
    assert shm_from_mounts(mounts, Path("/proc/meminfo").read_text()) == shutil.disk_usage("/dev/shm").total


def test_memlock_from_this_process_limits_matches_getrlimit():
    soft, hard = resource.getrlimit(resource.RLIMIT_MEMLOCK)
    unlimited = resource.RLIM_INFINITY
    expected = {"soft": None if soft == unlimited else soft, "hard": None if hard == unlimited else hard}
    assert memlock_from_limits(Path("/proc/self/limits").read_text()) == expected


@pytest.mark.parametrize("line,size", [
    ("shm /dev/shm tmpfs rw,nosuid,nodev,noexec,relatime,size=65536k 0 0", 64 << 20),  # Docker's default
    ("tmpfs /dev/shm tmpfs rw,size=16g 0 0", 16 << 30),
    ("tmpfs /dev/shm tmpfs rw,nosuid,nodev,inode64 0 0", 1000 * 1024 // 2),  # no size=: half of MemTotal
    ("/dev/sda1 /dev/shm ext4 rw 0 0", None),  # not a tmpfs
    ("tmpfs /run tmpfs rw,size=8g 0 0", None),  # no /dev/shm mount
])
def test_shm_parsing(line, size):
    assert shm_from_mounts(line + "\n", "MemTotal:           1000 kB\n") == size


def test_last_shm_mount_wins():
    mounts = "shm /dev/shm tmpfs rw,size=65536k 0 0\ntmpfs /dev/shm tmpfs rw,size=32g 0 0\n"
    assert shm_from_mounts(mounts, "") == 32 << 30


@pytest.mark.parametrize("text,expected", [
    ("Max locked memory         8388608              8388608              bytes\n", {"soft": 8388608, "hard": 8388608}),
    ("Max locked memory         unlimited            unlimited            bytes\n", {"soft": None, "hard": None}),
    ("Max locked memory         65536                unlimited            bytes\n", {"soft": 65536, "hard": None}),
    ("Max locked memory         lots                 unlimited            bytes\n", None),
    ("", None),
])
def test_limits_parsing(text, expected):
    assert memlock_from_limits(text) == expected


def test_a_fifo_in_a_tree_does_not_hang_the_doctor(tmp_path):
    (tmp_path / "proc").mkdir()
    os.mkfifo(tmp_path / "proc/cmdline")
    (tmp_path / "proc/self").mkdir()
    os.mkfifo(tmp_path / "proc/self/limits")
    facts = collect(str(tmp_path))
    assert ("proc/cmdline", "not a regular file") in facts.read_errors and facts.cmdline is None
    # and the whole command, in a real process, finishes
    r = subprocess.run([sys.executable, "-m", "rocmkit", "doctor", "--root", str(tmp_path), "--json"],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode in (0, 1), r.stderr
