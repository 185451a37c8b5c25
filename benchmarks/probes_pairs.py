"""The pairwise P2P and VRAM-release probes on this machine's GPUs, for the README and tests/data/probes.

    python benchmarks/probes_pairs.py --out DIR

Writes DIR/figures.json (a whole `probes.measure()` document, as the doctor measures it) and prints the
P2P figure of each pair beside a reference: the same copy sampled for REF_S seconds with no early stop, and
a 1 GiB copy; then the VRAM probe with 5 cycles at 90 % of free memory.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from rocmkit.host.probes import run as probes  # noqa: E402
from rocmkit.host.probes.measure import GB, _measure  # noqa: E402
from rocmkit.host.probes.vram import judge_vram, measure_vram  # noqa: E402

REF_S = 3.0


def reference(torch, a: int, b: int, nbytes: int) -> dict:
    src = torch.empty(nbytes // 4, dtype=torch.int32, device=f"cuda:{a}").random_()
    dst = torch.empty_like(src, device=f"cuda:{b}")
    with torch.cuda.device(a):
        fig = _measure(torch.device(f"cuda:{a}"), lambda: dst.copy_(src), float(nbytes), "GB/s", GB, {"bytes": nbytes},
                       budget_s=REF_S, warmup_s=0.5, stop_early=False, started=time.perf_counter())
    torch.cuda.empty_cache()
    return {"value": round(fig.value, 1), "n": len(fig.samples), "spread": round(fig.spread, 4)}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    import torch

    t = time.perf_counter()
    doc = probes.measure(progress=None)
    print(f"measure(): {time.perf_counter() - t:.1f} s", flush=True)
    with open(os.path.join(args.out, "figures.json"), "w") as f:
        json.dump(doc, f, indent=1)
    for finding in probes.findings_for(doc):
        print(f"{finding.id}: {finding.status.value}: {finding.title}", flush=True)
    out = {"probe": doc.get("p2p"), "reference": []}
    for row in (doc.get("p2p") or {}).get("pairs", []):
        a, b = row["src"], row["dst"]
        ref = {"src": a, "dst": b, "same": reference(torch, a, b, 256 << 20), "1GiB": reference(torch, a, b, 1 << 30)}
        out["reference"].append(ref)
        fig = row.get("figure") or {}
        print(f"P2P {a}->{b}: probe {fig.get('value')} GB/s ({fig.get('n')} samples, {fig.get('seconds')} s); "
              f"reference 256 MiB {ref['same']}, 1 GiB {ref['1GiB']}", flush=True)
    long = measure_vram(0, share=0.9, cycles=5)
    out["vram_90pct_5cycles"] = long
    print("VRAM 90 % x 5:", judge_vram(long).title, flush=True)
    with open(os.path.join(args.out, "reference.json"), "w") as f:
        json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
