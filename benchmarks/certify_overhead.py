"""Where the time of a `rocmkit certify` goes: the whole command split into container start, imports, model
and data, the engine's start-up, the training steps and judging, for TRL and verl, on the host and in an
image. Ratios are against the training steps of the same run (the part that is the engine's real work), so
rocmkit's own overhead is the rest.

    python benchmarks/certify_overhead.py [--runs 1] [--steps 8] [--trl] [--verl-python PY] [--image IMG]

--trl             TRL on this host's CPU, with the Python running this script (rocmkit[certify] installed)
--verl-python PY  verl on this host's CPU with PY (a venv holding the verl-cpu stack's packages and rocmkit)
--image IMG       verl on the CPU inside IMG (the verl-cpu image), through the Docker engine
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def certify(python: str, args: list[str], out: Path) -> tuple[float, dict]:
    env = {**os.environ, "CI": "true"}
    start = time.perf_counter()
    r = subprocess.run([python, "-m", "rocmkit", "certify", *args, "--out", str(out), "--json"], capture_output=True,
                       text=True, env=env, timeout=3600)
    whole = time.perf_counter() - start
    if not r.stdout.strip():
        sys.exit(f"certify produced no certificate (exit {r.returncode}):\n{r.stderr[-3000:]}")
    return whole, json.loads(r.stdout)


def container_start(image: str, runs: int = 3) -> float:
    """`docker run --rm IMAGE true`: what any container costs before the first command runs."""
    docker = os.environ.get("ROCMKIT_DOCKER", "docker")
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([docker, "run", "--rm", "--network", "none", image, "true"], check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def split(whole: float, cert: dict, start_s: float) -> dict:
    t, st = cert["timings"], (cert.get("setup") or {}).get("timings", {})
    steps = sum(r.get("timing_s/step", 0.0) for r in cert["metrics"]["per_step"])
    imports = st.get("import_torch_s", 0) + st.get("import_engine_s", 0)
    model_data = st.get("model_s", 0) + st.get("data_s", 0) + st.get("verl_check_s", 0)
    return {
        "whole": whole,
        "container start": start_s * 2,  # setup and run each start one
        "imports (setup)": imports,
        "model, data, config check": model_data,
        # what is left of the whole once the parts above and the run's own time are taken out
        "rocmkit (CLI, resolve, setup rest, judge)": whole - t["run_s"] - imports - model_data - start_s
        - t.get("probes_s", 0),
        "engine start-up": t["run_s"] - steps - start_s,
        "training steps": steps,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--trl", action="store_true")
    ap.add_argument("--verl-python")
    ap.add_argument("--image")
    a = ap.parse_args()
    cases = []
    if a.trl:
        cases.append(("TRL, host CPU", sys.executable, ["--host", "--engine", "trl", "--gpus", "0"], 0.0))
    if a.verl_python:
        cases.append(("verl, host CPU", a.verl_python, ["--host", "--engine", "verl", "--gpus", "0"], 0.0))
    if a.image:
        cases.append(("verl, image (CPU)", sys.executable, ["--image", a.image, "--engine", "verl", "--gpus", "0"],
                      container_start(a.image)))
    if not cases:
        ap.error("name at least one of --trl, --verl-python, --image")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, python, args, start_s in cases:
            for i in range(a.runs):
                whole, cert = certify(python, [*args, "--steps", str(a.steps)], Path(tmp) / f"{len(rows)}")
                parts = split(whole, cert, start_s)
                rows.append((name, cert["verdict"], cert["metrics"]["reward"], parts))
                print(f"{name} run {i + 1}: {cert['verdict']}, {whole:.1f} s", file=sys.stderr)
    keys = list(rows[0][3])
    print("| run | verdict | reward | " + " | ".join(keys) + " | whole ÷ steps |")
    print("|---|---|---|" + "---:|" * (len(keys) + 1))
    for name, verdict, reward, parts in rows:
        cells = " | ".join(f"{parts[k]:.1f} s" for k in keys)
        ratio = parts["whole"] / parts["training steps"] if parts["training steps"] else float("nan")
        print(f"| {name} | {verdict} | {reward['first']} → {reward['last']} | {cells} | {ratio:.1f}× |")


if __name__ == "__main__":
    main()
