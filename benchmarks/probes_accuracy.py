"""How close each fast level-2 probe comes to a long, careful measurement of the same quantity, in the same run.

    python benchmarks/probes_accuracy.py [--gpu 0] [--runs 3] [--ref-seconds 5] [--allreduce] [--json FILE]

For one GPU: the probes exactly as `rocmkit doctor --level 2` runs them (default sizes and time budget),
`--runs` times, then references, each sampled for --ref-seconds with no early stop (the median of every
sample after a 1 s warm-up): the probe's GEMM shape and a 16384^3 GEMM (bf16, fp8), an 8 GiB device
copy, 2 GiB pinned host copies. With --allreduce (two or more GPUs): the all-reduce probe across all
visible GPUs against all-reduces of the same size and of 2 GiB, sampled the same way. Prints the probe's
value (first run, which is what a doctor run sees, and the range over runs), each reference, their
ratio and the probe's time; --json also writes every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from rocmkit.host.probes import run as probes  # noqa: E402
from rocmkit.host.probes.measure import allreduce, device_copy, gemm, host_copy  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpu", type=int, default=0)
    ap.add_argument("--runs", type=int, default=3, help="probe runs (the first is what a doctor run sees)")
    ap.add_argument("--ref-seconds", type=float, default=5.0)
    ap.add_argument("--allreduce", action="store_true", help="also the all-reduce across all visible GPUs")
    ap.add_argument("--json", dest="json_out", default=None)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("no GPU visible to torch.cuda", file=sys.stderr)
        return 3

    # The probes, as the doctor runs them (one GPU, default sizes and budget).
    runs = [probes.measure(gpus=[args.gpu], with_allreduce=False) for _ in range(args.runs)]
    gpu = runs[0]["gpus"][0]
    dev = torch.device(f"cuda:{args.gpu}")
    torch.cuda.set_device(dev)
    fp8 = probes._fp8_dtype(gpu)
    mem = torch.cuda.get_device_properties(dev).total_memory
    ref_s = args.ref_seconds
    slow = {"budget_s": ref_s, "warmup_s": 1.0, "stop_early": False}
    n = probes.Sizes().gemm_n
    references = [
        ("gemm.bf16", "bf16 same shape, long", lambda: gemm(dev, n=n, dtype="bf16", **slow)),
        ("gemm.bf16", "bf16 16384^3, long", lambda: gemm(dev, n=16384, dtype="bf16", **slow)),
        ("gemm.fp8", "fp8 same shape, long", (lambda: gemm(dev, n=n, dtype="fp8", fp8_dtype=fp8, **slow))
         if fp8 else None),
        ("gemm.fp8", "fp8 16384^3, long", (lambda: gemm(dev, n=16384, dtype="fp8", fp8_dtype=fp8, **slow))
         if fp8 else None),
        ("hbm", "8 GiB copy, long", lambda: device_copy(dev, nbytes=min(8 << 30, mem // 8), **slow)),
        ("h2d", "2 GiB pinned, long", lambda: host_copy(dev, direction="h2d", nbytes=2 << 30, **slow)),
        ("d2h", "2 GiB pinned, long", lambda: host_copy(dev, direction="d2h", nbytes=2 << 30, **slow)),
    ]
    rows, refs = [], {}
    for key, label, ref in references:
        if ref is None or key not in gpu["figures"]:
            continue
        refs[label] = ref().to_json()
        torch.cuda.empty_cache()
        rows.append(_row(key, label, [run["gpus"][0]["figures"][key] for run in runs], refs[label]))
    ar_probe = None
    if args.allreduce and torch.cuda.device_count() >= 2:
        devices = [f"cuda:{i}" for i in range(torch.cuda.device_count())]
        size = probes.Sizes().allreduce_bytes
        ar_probe = [allreduce(devices, nbytes=size, budget_s=probes.ALLREDUCE_BUDGET_S).to_json()
                    for _ in range(args.runs)]
        key = f"allreduce x{len(devices)}"
        for label, nbytes in ((f"{key} same size, long", size), (f"{key} 2 GiB, long", 2 << 30)):
            refs[label] = allreduce(devices, nbytes=nbytes, **slow).to_json()
            rows.append(_row(key, label, ar_probe, refs[label]))

    print(f"# {gpu['name']} ({gpu['product']}, {gpu['arch']}), torch {runs[0]['torch']}, {runs[0]['runtime']}; "
          f"probe budget {runs[0]['budget_s']} s/GPU; reference: {ref_s:.0f} s of samples each")
    print(f"# probe time for the whole GPU (all its probes, first run): {gpu['seconds']:.2f} s; "
          f"runs: {', '.join(str(r['gpus'][0]['seconds']) for r in runs)} s")
    head = ("| quantity | probe (run 1) | probe range over runs | probe spread | probe time | reference "
            "| reference value | probe / reference |")
    print(head)
    print("|---" * (head.count("|") - 1) + "|")
    for r in rows:
        print(f"| {r['key']} | {r['probe']:.1f} {r['unit']} | {r['lo']:.1f}–{r['hi']:.1f} | {r['spread']:.1%} "
              f"| {r['seconds']:.2f} s | {r['label']} | {r['ref']:.1f} | {r['ratio']:.3f} |")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"probe_runs": runs, "references": refs, "allreduce_probe": ar_probe, "rows": rows,
                       "when": time.strftime("%Y-%m-%d %H:%M:%S")}, f, indent=1)
    return 0


def _row(key: str, label: str, probe_figs: list[dict], ref: dict) -> dict:
    first = probe_figs[0]
    values = [f["value"] for f in probe_figs]
    return {"key": key, "label": f"{label} ({ref['n']} samples)", "unit": first["unit"], "probe": first["value"],
            "lo": min(values), "hi": max(values), "spread": first["spread"],
            "seconds": statistics.median(f["seconds"] for f in probe_figs), "ref": ref["value"],
            "ratio": first["value"] / ref["value"]}


if __name__ == "__main__":
    sys.exit(main())
