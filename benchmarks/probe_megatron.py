"""probe.megatron on this machine's GPUs, for the README and tests/data/probes: TP=1 on GPU 0, TP=2 on GPUs 0
and 1 where there are two, each with the layers the doctor picks (TransformerEngine when it is installed) and,
where TE is installed, again with megatron-core's local layers (the comparison that tells a broken TE from a
broken megatron-core).

    pip install --target DIR megatron-core==0.18.0 --no-deps     # if the environment has none
    PYTHONPATH=DIR python benchmarks/probe_megatron.py --out OUT [--steps N]

Writes OUT/megatron-tp{1,2}-{layers}.json (measure_megatron's documents, as the doctor embeds them) and prints
each finding's title: TP, steps, loss first -> last, median step time. On a CPU-only machine it runs the
CPU/gloo path instead (--cpu), which is what the tests run.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from rocmkit.host.probes.megatron import STEPS, judge_megatron, measure_megatron


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=STEPS)
    ap.add_argument("--cpu", action="store_true", help="the CPU/gloo path (no GPU needed)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.cpu:
        device_sets = [["cpu"], ["cpu", "cpu"]]
    else:
        import torch

        n = torch.cuda.device_count()
        if n == 0:
            print("no GPU visible to torch; use --cpu for the CPU/gloo path", file=sys.stderr)
            return 3
        device_sets = [[f"cuda:{i}" for i in range(k)] for k in (1, 2) if k <= n]
    failed = False
    for devices in device_sets:
        runs = [measure_megatron(devices, steps=args.steps)]
        if runs[0].get("layers") == "te":  # the same with megatron-core's own layers, beside it
            runs.append(measure_megatron(devices, steps=args.steps, layers="local"))
        for doc in runs:
            f = judge_megatron(doc)
            name = f"megatron-tp{len(devices)}-{doc.get('layers') or 'none'}.json"
            with open(os.path.join(args.out, name), "w") as fh:
                json.dump(doc, fh, indent=1)
            print(f"{f.status.value:5} {f.title}")
            failed |= f.status.value == "fail"
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
