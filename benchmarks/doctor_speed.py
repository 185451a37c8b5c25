"""Whole-process time of `rocmkit doctor --json --root` on a generated 8-GPU MI300X host in CPX mode
(64 KFD partitions), against process-start baselines measured in the same run.

    python benchmarks/doctor_speed.py [--runs 15]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # this checkout's rocmkit, and the tests' tree generator

from treegen import HostSpec, healthy_process, write_tree  # noqa: E402


def timed(argv: list[str], runs: int) -> tuple[float, float]:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        subprocess.run(argv, capture_output=True, check=False)
        times.append(time.perf_counter() - t)
    return statistics.median(times), min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()
    root = write_tree(Path(tempfile.mkdtemp()) / "host", HostSpec(mode="CPX", process=healthy_process()))
    nodes = len(list((root / "sys/class/kfd/kfd/topology/nodes").iterdir()))
    py = [sys.executable]
    rows = [
        ("python -c pass (interpreter start)", py + ["-c", "pass"]),
        ("rocmkit --version (CLI start)", py + ["-m", "rocmkit", "--version"]),
        (f"rocmkit doctor --json --root (8 GPUs, CPX, {nodes} KFD nodes)", py + ["-m", "rocmkit", "doctor", "--json",
                                                                              "--root", str(root)]),
        ("rocmkit doctor --json (this machine, live)", py + ["-m", "rocmkit", "doctor", "--json"]),
        # the subprocess the live doctor adds for the previous boot's kernel log (facts/journal.py)
        ("journalctl -k -b -1 -o json (the live doctor's journal read)",
         ["journalctl", "-k", "-b", "-1", "-o", "json", "--no-pager", "-q", "-n", "50000"]),
    ]
    results = [(name, *timed(argv, args.runs)) for name, argv in rows]
    base = results[0][1]
    print(f"{'command':<62} {'median s':>9} {'min s':>7} {'÷ python start':>15}")
    for name, med, low in results:
        print(f"{name:<62} {med:9.3f} {low:7.3f} {med / base:15.2f}")


if __name__ == "__main__":
    main()
