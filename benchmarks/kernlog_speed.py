"""How long the `kernel.log` scan takes on a full kernel ring: a synthetic 1 MiB /dev/kmsg (the benign lines of
the corpus and ordinary boot lines, with the corpus's fault items sprinkled through it), against the time to
parse the same records (a ratio, so the figure does not depend on the machine), and against the pattern table of
an earlier revision (`--before`) and trying every regex on every line.

    PYTHONPATH=. python benchmarks/kernlog_speed.py [--mib 1] [--runs 11] [--before REV]

(--before defaults to the merge base of HEAD and main; the figures in docs/guides/hosts.md compare with 48056da,
the revision before the pattern table grew.)
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
import types
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from kernlog_corpus import CORPUS, load, split_level  # noqa: E402

from treegen import format_records  # noqa: E402

from rocmkit.host.facts import kernlog  # noqa: E402
from rocmkit.host.checks import kernel_log  # noqa: E402

ORDINARY = [
    "pci 0000:00:01.1: PCI bridge to [bus 01]", "audit: type=1400 audit(1704636055.456:2): apparmor=\"STATUS\"",
    "systemd[1]: Started Journal Service.", "EXT4-fs (nvme0n1p2): mounted filesystem with ordered data mode",
    "IPv6: ADDRCONF(NETDEV_CHANGE): enp5s0: link becomes ready", "usb 1-7: new high-speed USB device number 2",
    "amdgpu 0000:05:00.0: amdgpu: ring comp_1.0.0 uses VM inv eng 1 on hub 0",
    "[drm] amdgpu: 196288M of GTT memory ready.", "kfd kfd: amdgpu: Allocated 3969056 bytes on gart",
    "mlx5_core 0000:3b:00.0: E-Switch: Total vports 2, per vport: max uc(128) max mc(2048)",
]


def synthetic(mib: float) -> str:
    items = load(CORPUS)
    benign = [split_level(x) for i in items if i["expect"] == "benign" for x in i["lines"]]
    faults = [[split_level(x) for x in i["lines"]] for i in items if i["expect"] != "benign"]
    ordinary = [(6, m) for m in ORDINARY] + benign
    out, n, size = [], 0, 0
    while size < mib * (1 << 20):
        if n % 500 == 499:
            block = faults[(n // 500) % len(faults)]
        else:
            block = [ordinary[n % len(ordinary)]]
        out.extend(block)
        size += sum(len(m) + 24 for _, m in block)
        n += 1
    return format_records(out)


def _git_show(rev: str, path: str) -> str | None:
    try:
        return subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:{path}"], capture_output=True, text=True,
                              check=True).stdout
    except (subprocess.CalledProcessError, FileNotFoundError):
        return None


# The modules of the check at a revision, loaded beside the current ones under a prefix, each importing the
# revision's siblings (else an earlier kernel_log.py would scan with today's pattern table).
SIBLINGS = ("kernel_patterns", "kernel_net", "kernel_log")


def before(rev: str):
    """The scan of the kernel.log check at an earlier revision, loaded beside the current one."""
    mod = None
    for name in SIBLINGS:
        src = _git_show(rev, f"rocmkit/host/checks/{name}.py")
        if src is None:
            continue  # a module that revision does not have
        src = src.replace("from ..kernlog import", "from ..facts.kernlog import")  # kernlog.py moved into facts/
        for sibling in SIBLINGS:
            src = src.replace(f"from .{sibling} import", f"from ._before_{sibling} import")
        mod = types.ModuleType(f"rocmkit.host.checks._before_{name}")
        mod.__package__ = "rocmkit.host.checks"
        sys.modules[mod.__name__] = mod  # dataclasses look their module up
        try:
            exec(compile(src, f"{rev}:{name}.py", "exec"), mod.__dict__)
        except ImportError as exc:  # a revision whose modules moved since
            print(f"(--before {rev} not loaded: {exc})")
            return None
    return mod if mod is not None and mod.__name__.endswith("kernel_log") else None


def timed(fn, runs: int) -> float:
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return min(times)  # the run least disturbed by the rest of the machine


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=float, default=1.0)
    ap.add_argument("--runs", type=int, default=11)
    ap.add_argument("--before", default=None, help="a git revision whose kernel_log.py to compare (\"\": none; "
                    "default: the merge base of HEAD and main)")
    args = ap.parse_args()
    text = synthetic(args.mib)
    records = list(kernlog.parse(text))
    parse = timed(lambda: list(kernlog.parse(text)), args.runs)
    rows = [("parse the records (kernlog.parse)", parse)]
    if args.before is None:
        base = subprocess.run(["git", "-C", str(REPO), "merge-base", "HEAD", "main"], capture_output=True, text=True)
        args.before = base.stdout.strip()[:12]
    old = before(args.before) if args.before else None
    if old is not None:
        rows.append((f"scan, {args.before}'s table ({len(old.PATTERNS)} patterns)",
                     timed(lambda: old.scan(records), args.runs)))
    rows.append((f"scan, this table ({len(kernel_log.PATTERNS)} patterns, incidents grouped)",
                 timed(lambda: kernel_log.scan(records), args.runs)))
    rows.append(("every regex on every line (no keyword prefilter)",
                 timed(lambda: [p.regex.search(r.message) for p in kernel_log.PATTERNS for r in records], 1)))
    found = kernel_log.scan(records)
    print(f"{len(text) / (1 << 20):.2f} MiB of /dev/kmsg, {len(records)} records; "
          f"{sum(len(v) for v in found.values())} incidents of {len(found)} patterns found")
    print(f"{'':<62} {'best ms':>10} {'÷ parse':>8}")
    for name, sec in rows:
        print(f"{name:<62} {1000 * sec:10.1f} {sec / parse:8.2f}")


if __name__ == "__main__":
    main()
