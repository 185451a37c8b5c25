"""What a GPU process held at its allocation peak, from a PyTorch memory snapshot (the pickle that
`torch.cuda.memory._dump_snapshot` writes, and verl's `global_profiler.tool=torch_memory` dumps): the tensors alive
at the highest point of allocated memory, grouped by the Python line that allocated them.

    python3 benchmarks/gpu_jobs/memory_peak.py SNAPSHOT.pickle [--top 30]

It replays the snapshot's allocator trace (`device_traces`: alloc and free_completed events, with their stacks).
Allocations made before the trace began (a ring buffer that wrapped, or history switched on late) are not in it:
the tensors still alive at the dump (`segments`, active_allocated blocks) that the trace never allocated are added
to every moment as "before the trace". This is how the memory model of rocmkit tune was checked against a verl
job on a GPU (benchmarks/gpu_jobs/README.md).
"""

from __future__ import annotations

import argparse
import pickle
import sys
from collections import defaultdict

GIB = 1 << 30
# frames that say where in the job a tensor came from, before torch's own plumbing
OWNERS = ("/verl/", "/transformers/", "/peft/", "/vllm/", "/rocmkit/")


def where(frames: list[dict]) -> str:
    """The first frame in the job's libraries, else the first Python frame."""
    py = [f for f in frames if str(f.get("filename", "")).endswith(".py")]
    for f in py:
        if any(o in f["filename"] for o in OWNERS):
            return f"{f['filename'].split('site-packages/')[-1]}:{f['line']} {f['name']}"
    if py:
        f = py[0]
        return f"{f['filename'].split('site-packages/')[-1]}:{f['line']} {f['name']}"
    return "(no Python frame)"


def replay(trace: list[dict], before: int) -> tuple[int, int, dict[int, tuple[int, str]], int]:
    """(peak bytes, index of the event that reached it, the traced allocations alive then, bytes alive then that
    the trace never allocated). `before`: bytes alive at the dump that the trace never allocated. A free of an
    address the trace never allocated releases memory allocated before the trace began: those sizes are added at
    the start and taken off where they are freed."""
    seen: set[int] = set()
    early = 0
    for e in trace:
        if e.get("action") == "alloc":
            seen.add(e["addr"])
        elif e.get("action") == "free_completed" and e["addr"] not in seen:
            early += e["size"]
    pre = before + early
    live: dict[int, tuple[int, str]] = {}
    total = peak = pre
    peak_at, at_peak, pre_at_peak = -1, {}, pre
    for i, e in enumerate(trace):
        action = e.get("action")
        if action == "alloc":
            live[e["addr"]] = (e["size"], where(e.get("frames") or []))
            total += e["size"]
            if total > peak:
                peak, peak_at, at_peak, pre_at_peak = total, i, dict(live), pre
        elif action == "free_completed":
            gone = live.pop(e["addr"], None)
            size = e["size"] if gone is None else gone[0]
            if gone is None:
                pre -= size
            total -= size
    return peak, peak_at, at_peak, pre_at_peak


def alive_at_dump(snap: dict, device: int) -> list[tuple[int, int]]:
    """(address, size) of every allocated block at the dump; a block's address is its segment's plus the sizes
    of the blocks before it (torch writes it as "address" where it knows it)."""
    out = []
    for seg in snap.get("segments") or []:
        if seg.get("device", 0) != device:
            continue
        address = seg["address"]
        for b in seg.get("blocks") or []:
            if b.get("state") == "active_allocated":
                out.append((b.get("address", address), b["size"]))
            address = b.get("address", address) + b["size"]
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("snapshot")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--device", type=int, default=0, help="index into device_traces (default 0)")
    args = ap.parse_args(argv)
    with open(args.snapshot, "rb") as f:
        snap = pickle.load(f)
    traces = snap.get("device_traces") or []
    if args.device >= len(traces) or not traces[args.device]:
        print(f"{args.snapshot}: no allocator trace for device {args.device} (memory history off?)", file=sys.stderr)
        return 1
    trace = traces[args.device]
    traced = {e["addr"] for e in trace if e.get("action") == "alloc"}
    before = sum(size for address, size in alive_at_dump(snap, args.device) if address not in traced)
    peak, peak_at, at_peak, pre = replay(trace, before)
    print(f"{args.snapshot}: {len(trace)} trace events")
    print(f"peak: {peak / GIB:.2f} GiB at event {peak_at} of {len(trace)}, of which {pre / GIB:.2f} GiB allocated "
          "before the trace began")
    if peak_at < 0:
        return 0
    stack = [f"{f['filename'].split('site-packages/')[-1]}:{f['line']} {f['name']}"
             for f in trace[peak_at].get("frames") or [] if str(f.get("filename", "")).endswith(".py")]
    print("the allocation that reached it:", trace[peak_at]["size"] / GIB, "GiB")
    for line in stack[:14]:
        print("   ", line)
    groups: dict[str, list[int]] = defaultdict(list)
    for size, owner in at_peak.values():
        groups[owner].append(size)
    print(f"\nalive at the peak, by the line that allocated it (top {args.top}):")
    groups["(allocated before the trace began)"].append(pre)
    for owner, sizes in sorted(groups.items(), key=lambda kv: -sum(kv[1]))[:args.top]:
        print(f"  {sum(sizes) / GIB:8.3f} GiB  {len(sizes):6d} tensors  largest {max(sizes) / GIB:.3f}  {owner}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
