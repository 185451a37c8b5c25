"""Whole-process time of `rocmkit doctor --root` on a generated 8-GPU MI300X host in CPX mode (64 KFD
partitions), as a ratio to a bare `python -c pass` of the same interpreter, measured in the same run.

    python benchmarks/doctor_speed.py [--runs 31] [--against ../main]

Every command runs once per round, rounds interleaved, so machine load shifts every row alike; the
figures are medians (and minimums) over the rounds. The headlines are `doctor --root ÷ python -c pass` on the
generated CPX host and on the real capture (issue 27's target, at most 3.0, is on the real capture).

Bytecode: an installed rocmkit has its .pyc files (pip compiles them), so every command here runs with
PYTHONPYCACHEPREFIX set to a fresh folder and a warm-up round fills it first; a PYTHONDONTWRITEBYTECODE
in the caller's environment would otherwise make every run recompile rocmkit's sources (about 0.1 s on a
2-core machine) and measure the compiler, not the doctor. `--no-bytecode` measures that case instead.
When ../shared/fixtures holds the real MI300X CPX KFD capture, a row checks it too. `--against DIR` adds a
row for another checkout's rocmkit (a before/after in one run): DIR first on PYTHONPATH, run from a folder that
is neither checkout.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "tests")]  # this checkout's rocmkit, and the tests' tree generator

from treegen import HostSpec, healthy_process, write_tree  # noqa: E402

REAL_CPX = REPO.parent / "shared" / "fixtures" / "kfd" / "mi300x-cpx"
TARGET = 3.0


def real_capture_root(tmp: Path) -> Path | None:
    """A --root holding only the real capture's KFD topology (as tests/test_doctor_cli.py builds it)."""
    if not (REAL_CPX / "topology").is_dir():
        return None
    root = tmp / "real-cpx"
    link = root / "sys/class/kfd/kfd/topology"
    link.parent.mkdir(parents=True)
    link.symlink_to(REAL_CPX / "topology")
    return root


def run_once(argv: list[str], env: dict[str, str], cwd: Path = REPO) -> float:
    t = time.perf_counter()
    subprocess.run(argv, capture_output=True, check=False, env=env, cwd=cwd)
    return time.perf_counter() - t


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=31)
    ap.add_argument("--no-bytecode", action="store_true", help="Recompile every module on every run.")
    ap.add_argument("--against", type=Path, default=None, metavar="DIR",
                    help="Also time doctor --root CPX with the rocmkit of this checkout (e.g. ../main).")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp())
    root = write_tree(tmp / "host", HostSpec(mode="CPX", process=healthy_process()))
    nodes = len(list((root / "sys/class/kfd/kfd/topology/nodes").iterdir()))
    env = dict(os.environ)
    if args.no_bytecode:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
        env.pop("PYTHONPYCACHEPREFIX", None)
    else:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
    py = [sys.executable]
    doctor = py + ["-m", "rocmkit", "doctor"]
    # (name, argv, environment, working folder)
    rows = [
        ("python -c pass (interpreter start)", py + ["-c", "pass"], env, REPO),
        ("rocmkit --version (CLI start)", py + ["-m", "rocmkit", "--version"], env, REPO),
        (f"rocmkit doctor --root CPX (8 GPUs, {nodes} KFD nodes)", doctor + ["--root", str(root)], env, REPO),
        ("rocmkit doctor --json --root CPX", doctor + ["--json", "--root", str(root)], env, REPO),
    ]
    real = real_capture_root(tmp)
    if real is not None:
        rows.append(("rocmkit doctor --root (real MI300X CPX KFD capture)", doctor + ["--root", str(real)], env, REPO))
    rows.append(("rocmkit doctor --json (this machine, live)", doctor + ["--json"], env, REPO))
    # the subprocess the live doctor adds for the previous boot's kernel log (facts/journal.py)
    if shutil.which("journalctl"):
        rows.append(("journalctl -k -b -1 -o json (the live doctor's journal read)",
                     ["journalctl", "-k", "-b", "-1", "-o", "json", "--no-pager", "-q", "-n", "50000"], env, REPO))
    if args.against:
        other = {**env, "PYTHONPATH": str(args.against.resolve())}
        rows.append((f"doctor --root CPX, rocmkit of {args.against}", doctor + ["--root", str(root)], other, tmp))
    for _, argv, e, cwd in rows:  # warm-up: fills the bytecode cache and the page cache
        run_once(argv, e, cwd)
    times: list[list[float]] = [[] for _ in rows]
    for _ in range(args.runs):
        for i, (_, argv, e, cwd) in enumerate(rows):
            times[i].append(run_once(argv, e, cwd))
    base = statistics.median(times[0])
    print(f"{args.runs} interleaved rounds, {'no bytecode' if args.no_bytecode else 'bytecode cached'}, "
          f"{sys.executable}")
    print(f"{'command':<58} {'median s':>9} {'min s':>7} {'÷ python start':>15}")
    for (name, *_), ts in zip(rows, times):
        med = statistics.median(ts)
        print(f"{name:<58} {med:9.3f} {min(ts):7.3f} {med / base:15.2f}")
    # the headline: the generated host (every health file: more to read); issue 27's target is on the real capture
    heads = [("doctor --root CPX", 2)] + ([("doctor --root on the real MI300X CPX capture", 4)] if real is not None else [])
    print()
    for name, row in heads:
        ratio = statistics.median(times[row]) / base
        print(f"{name} ÷ python -c pass (medians): {ratio:.2f}× (target ≤ {TARGET:.1f}×: "
              f"{'met' if ratio <= TARGET else 'not met'})")


if __name__ == "__main__":
    main()
