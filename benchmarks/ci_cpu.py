"""What the slowest tests cost in CPU, not only in seconds: each test named runs alone (`pytest -n 0`), and the
machine's busy CPU time over its run is read from /proc/stat (every core's, every process's: Ray's daemons and
vLLM's engine included, which a test's own rusage misses). Run it on an otherwise idle machine; a test that used
C core-seconds takes at least C / cores seconds of pytest's wall on this machine however the tests are spread, so
the sum over the tests named is a floor for the suite (issue 73: pytest at most 15 minutes on 2 cores).

    python benchmarks/ci_cpu.py tests/test_certify_runs.py::test_real_verl_grpo_on_the_host_cpu_certifies_the_builtin_default ...
    python benchmarks/ci_cpu.py --slowest 10 .ci-work/durations.json     # the 10 slowest of a CI run's tests

The environment is the caller's (source .ci-work/env first, as CI's pytest has it).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

TICK = os.sysconf("SC_CLK_TCK")


def busy_idle() -> tuple[int, int]:
    """Every core's busy and idle ticks so far (user, nice, system, irq, softirq, steal; idle, iowait)."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return v[0] + v[1] + v[2] + v[5] + v[6] + v[7], v[3] + v[4]


def measure(nodeid: str) -> dict:
    (b0, i0), t0 = busy_idle(), time.monotonic()
    r = subprocess.run([sys.executable, "-m", "pytest", "-n", "0", "-q", "-p", "no:cacheprovider", nodeid],
                       capture_output=True, text=True)
    (b1, i1), wall = busy_idle(), time.monotonic() - t0
    cpu = (b1 - b0) / TICK
    return {"test": nodeid, "passed": r.returncode == 0, "wall_s": round(wall, 1), "cpu_s": round(cpu, 1),
            "cores_busy": round(cpu / wall, 2) if wall else 0.0, "idle_share": round((i1 - i0) / max(1, b1 - b0 + i1 - i0), 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tests", nargs="*", help="pytest node ids")
    ap.add_argument("--slowest", type=int, metavar="N", help="the N slowest tests of a durations.json")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    tests = list(a.tests)
    if a.slowest:
        if len(tests) != 1:
            ap.error("--slowest N takes one durations.json")
        doc = json.load(open(tests[0]))["tests"]
        tests = [k for k, _ in sorted(doc.items(), key=lambda kv: -kv[1]["s"])[:a.slowest]]
    rows = []
    for t in tests:
        rows.append(measure(t))
        if not a.json:
            r = rows[-1]
            print(f"{r['wall_s']:7.1f} s wall {r['cpu_s']:7.1f} s CPU ({r['cores_busy']:.2f} cores) "
                  f"{'pass' if r['passed'] else 'FAIL'}  {t}", flush=True)
    cores = os.cpu_count() or 1
    total = sum(r["cpu_s"] for r in rows)
    if a.json:
        print(json.dumps({"cores": cores, "tests": rows, "cpu_s": total}, indent=1))
    else:
        print(f"together: {sum(r['wall_s'] for r in rows) / 60:.1f} min one after the other, {total / 60:.1f} "
              f"core-minutes of CPU: at least {total / cores / 60:.1f} min of pytest's wall on {cores} cores")
    return 0 if all(r["passed"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
