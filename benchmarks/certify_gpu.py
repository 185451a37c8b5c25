"""Time to certificate and throughput of `rocmkit certify --engine trl` on one GPU, for the built-in tiny
model and a 0.5B-parameter Qwen2-shaped model (random weights, generated locally), with the tiny model on
the CPU of the same machine as the baseline.

    python benchmarks/certify_gpu.py [--out DIR]      # prints a table and writes results.json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

RUNS = [("tiny, CPU (baseline)", ["--gpus", "0", "--size", "tiny", "--steps", "16"]),
        ("tiny, 1 GPU", ["--gpus", "1", "--size", "tiny", "--steps", "16"]),
        ("0.5B, 1 GPU", ["--gpus", "1", "--size", "0.5b", "--steps", "16"])]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="bench-certify")
    args = ap.parse_args()
    out = Path(args.out)
    results = []
    for name, extra in RUNS:
        folder = out / name.split(",")[0].replace(".", "") / ("cpu" if "CPU" in name else "gpu")
        t = time.perf_counter()
        r = subprocess.run([sys.executable, "-m", "rocmkit", "certify", "--host", "--out", str(folder), "--json", *extra],
                           capture_output=True, text=True, env={**__import__("os").environ, "ROCMKIT_CERTIFY_ECHO": "0"})
        wall = time.perf_counter() - t
        try:
            cert = json.loads(r.stdout)
        except ValueError:
            print(f"{name}: no certificate (exit {r.returncode})\n{r.stderr[-3000:]}")
            results.append({"name": name, "exit": r.returncode, "wall_s": wall})
            continue
        mt = cert["metrics"]
        results.append({"name": name, "exit": r.returncode, "verdict": cert["verdict"], "wall_s": round(wall, 1),
                        "train_wall_s": round(cert["run"].get("wall_s", 0), 1), "device": cert["run"].get("device"),
                        "parameters": cert["run"].get("parameters"), "reward": mt["reward"],
                        "rollout_tokens_per_s": mt["rollout_tokens_per_s"],
                        "training_tokens_per_s": mt["training_tokens_per_s"], "mfu": mt["mfu"],
                        "phases_s": mt["phases_s"]})
    (out / "results.json").parent.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(results, indent=1))
    base = next((r for r in results if "baseline" in r["name"] and "verdict" in r), None)
    print(f"{'run':<22}{'verdict':>8}{'to cert s':>11}{'train s':>9}{'rollout tok/s':>15}{'train tok/s':>13}"
          f"{'MFU':>8}{'reward':>16}")
    for r in results:
        if "verdict" not in r:
            continue
        mfu = f"{r['mfu']['update']:.2%}" if r.get("mfu") else "-"
        print(f"{r['name']:<22}{r['verdict']:>8}{r['wall_s']:>11}{r['train_wall_s']:>9}"
              f"{r['rollout_tokens_per_s'] or 0:>15.0f}{r['training_tokens_per_s'] or 0:>13.0f}{mfu:>8}"
              f"{r['reward']['first']:>8.2f}->{r['reward']['last']:<6.2f}")
        if base and r is not base and base["training_tokens_per_s"] and r["training_tokens_per_s"]:
            print(f"{'':<22}   ÷ CPU baseline: time to certificate {r['wall_s'] / base['wall_s']:.2f}, "
                  f"training tokens/s {r['training_tokens_per_s'] / base['training_tokens_per_s']:.1f}×")


if __name__ == "__main__":
    main()
