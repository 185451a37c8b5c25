"""Where the time of a `rocmkit certify` goes: the whole command split into setup, Ray's start, each worker's
start, the rollout engine's init (compile, graph capture), the first step, the other steps and judging, for
verl (on the CPU or on GPUs) and TRL, on the host and in an image.

    python benchmarks/certify_overhead.py [--runs 1] [--steps 16] [--trl] [--verl-python PY] [--image IMG]
                                          [--gpus 0] [--size tiny] [--certify-arg ARG ...] [--no-floor] [--keep DIR]
                                          [--with-probes] [--json FILE]

--trl             TRL on this host's CPU, with the Python running this script (rocmkit[certify] installed)
--verl-python PY  verl on this host with PY (the verl-cpu stack's packages with --gpus 0; verl, vLLM and Ray on a
                  GPU host with --gpus N)
--image IMG       verl on the CPU inside IMG (the verl-cpu image), through the Docker engine
--keep DIR        copy each run's certificate.json and run.log there (DIR/<case>-<run>.{json,log})
--with-probes     on GPUs, keep the GPU probes (off by default here, on in the command a user types)

To compare two rocmkit versions on the same machine, run the script twice with the other checkout first on
PYTHONPATH (the script runs `python -m rocmkit`), each with a fresh VLLM_CACHE_ROOT so that neither finds what the
other left in vLLM's cache.

The split comes from the run's own log: the certificate's `timeline` (the watchdog's phases, each with its start,
rocmkit/certify/watchdog.py), or where a certificate has none, the time each line of run.log appeared, read by
this script every 0.1 s while certify runs, matched against the lines verl 0.9.1, Ray 2.60 and vLLM 0.24 print at
each milestone. Each worker's first line comes from that reading too. A milestone not seen leaves its time in the
next phase. Baselines measured in the same script: the steps of the same run (whole ÷ steps), and the import
floor, the seconds a fresh process of the target's Python takes to import torch, Ray, verl and the rollout
engine (the run starts about five such processes); start-up ÷ import floor says how much is left above it.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

# (phase ending at the milestone, the line that marks it), in the order a verl 0.9.1 run reaches them
MILESTONES = [
    ("Ray start", re.compile(r"Started a local Ray instance")),
    ("trainer start (task runner, data)", re.compile(r"create worker group")),
    ("actor and reference workers", re.compile(r"actor and ref model engine initialized")),
    ("rollout server start (process, imports)", re.compile(r"Initializing a V1 LLM engine")),
    ("rollout engine init (load, KV cache, compile, graphs)",
     re.compile(r"init engine \(profile, create kv cache, warmup model\) took")),
    ("agent loop, reward and weight-sync start", re.compile(r"all initialize finished, ready to fit")),
    ("first step", re.compile(r"(?:^|\s)step:1 - ")),
]
STEP_RE = re.compile(r"(?:^|\s)step:(\d+) - ")
# Ray prefixes each worker's lines with `(Name pid=N)`: the first one says when that process was up and printing
WORKER_RE = re.compile(r"^\((\w+?)(?:V\d+|TQ)? pid=\d+\)")
ANSI_RE = re.compile(r"\x1b\[[0-9;]*m")


class Tail(threading.Thread):
    """Timestamps the lines of a file as they appear (rocmkit appends run.log while the run goes)."""

    def __init__(self, path: Path, t0: float):
        super().__init__(daemon=True)
        self.path, self.t0, self.lines, self.created = path, t0, [], None
        self.stop = threading.Event()

    def run(self) -> None:
        pos, rest = 0, ""
        while not self.stop.is_set():
            if self.path.exists():
                if self.created is None:
                    self.created = time.perf_counter() - self.t0
                with open(self.path, encoding="utf-8", errors="replace") as f:
                    f.seek(pos)
                    chunk = f.read()
                    pos = f.tell()
                if chunk:
                    now = time.perf_counter() - self.t0
                    *done, rest = (rest + chunk).split("\n")
                    self.lines += [(now, ANSI_RE.sub("", line)) for line in done]
            self.stop.wait(0.1)


def certify(python: str, args: list[str], out: Path) -> tuple[float, dict, Tail]:
    env = {**os.environ, "CI": "true"}
    start = time.perf_counter()
    tail = Tail(out / "run.log", start)
    tail.start()
    r = subprocess.run([python, "-m", "rocmkit", "certify", *args, "--out", str(out), "--json"], capture_output=True,
                       text=True, env=env, timeout=3600)
    whole = time.perf_counter() - start
    time.sleep(0.3)
    tail.stop.set()
    tail.join()
    if not r.stdout.strip():
        sys.exit(f"certify produced no certificate (exit {r.returncode}):\n{r.stderr[-3000:]}")
    return whole, json.loads(r.stdout), tail


def import_floor(python: str, modules: list[str]) -> dict[str, float]:
    """Seconds a fresh process takes to import each module group (second of two tries: bytecode cached)."""
    out = {}
    for name in modules:
        times = []
        for _ in range(2):
            start = time.perf_counter()
            r = subprocess.run([python, "-c", f"import {name}"], capture_output=True, text=True, timeout=600)
            times.append(time.perf_counter() - start)
            if r.returncode:
                break
        out[name] = round(times[-1], 2) if r.returncode == 0 else None
    return out


def container_start(image: str, runs: int = 3) -> float:
    """`docker run --rm IMAGE true`: what any container costs before the first command runs."""
    docker = os.environ.get("ROCMKIT_DOCKER", "docker")
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([docker, "run", "--rm", "--network", "none", image, "true"], check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def milestones(lines: list[tuple[float, str]], steps: int) -> list[tuple[str, float]]:
    """(phase, seconds since launch at its end) for each milestone seen, in order, with the last step's line."""
    out, i = [], 0
    for at, line in lines:
        for j in range(i, len(MILESTONES)):  # one not seen (another rollout engine's words) is passed over
            if MILESTONES[j][1].search(line):
                out.append((MILESTONES[j][0], at))
                i = j + 1
                break
        m = STEP_RE.search(line)
        if m and int(m.group(1)) == steps and steps > 1:
            out.append((f"steps 2-{steps}", at))
            break
    return out


def workers(lines: list[tuple[float, str]]) -> dict[str, float]:
    """Each worker kind's first line (seconds since launch); when it was ready is the milestone table's."""
    out: dict[str, float] = {}
    for at, line in lines:
        m = WORKER_RE.match(line)
        if m:
            out.setdefault(m.group(1), at)
    return out


STEP_DETAIL_RE = re.compile(r"^step (\d+)")


def from_timeline(timeline: list[dict], run_s: float, steps: int) -> list[tuple[str, float]]:
    """The watchdog's phase starts as consecutive parts (name, seconds): start-up phases by what they did, then the
    first step (its weight sync, rollout, update), the other steps, and what followed the last."""
    parts: dict[str, float] = {}
    ends = [e["at_s"] for e in timeline[1:]] + [run_s]
    for entry, end in zip(timeline, ends):
        if entry["phase"] == "start-up":
            name = entry["detail"]
        elif entry["detail"] == "finishing":
            name = "after the last step (shutdown)"
        else:
            m = STEP_DETAIL_RE.match(entry["detail"])
            name = "first step" if m and int(m.group(1)) == 1 else f"steps 2-{steps}"
        parts[name] = parts.get(name, 0.0) + max(0.0, end - entry["at_s"])
    return list(parts.items())


def split(whole: float, cert: dict, tail: Tail, start_s: float) -> dict:
    """The whole command in consecutive phases that add up to it."""
    t, st = cert["timings"], (cert.get("setup") or {}).get("timings", {})
    steps_n = cert["settings"]["steps"]
    steps = sum(r.get("timing_s/step", 0.0) for r in cert["metrics"]["per_step"])
    parts = {"setup (resolve, imports, model, data, config check)": t.get("resolve_s", 0) + t.get("setup_s", 0)
             + t.get("probes_s", 0)}
    run_start = tail.created if tail.created is not None else whole - t.get("judge_s", 0) - t["run_s"]
    marks = milestones(tail.lines, steps_n)
    if cert.get("timeline"):
        parts.update(from_timeline(cert["timeline"], t["run_s"], steps_n))
    else:
        last = run_start
        for name, at in marks:
            parts[name] = max(0.0, at - last)
            last = max(last, at)
        parts["after the last milestone (shutdown)"] = max(0.0, run_start + t["run_s"] - last)
    parts["judging"] = t.get("judge_s", 0)
    parts["rocmkit CLI and the rest"] = whole - sum(parts.values())
    return {"whole": whole, "parts": {k: round(v, 2) for k, v in parts.items()}, "steps_s": round(steps, 2),
            "split_from": "timeline" if cert.get("timeline") else "run.log as it grew",
            "milestones_s": {n: round(at - run_start, 1) for n, at in marks},
            "first_step_line_s": next((round(at - run_start, 1) for n, at in marks if n == "first step"), None),
            "workers_first_line_s": {k: round(a - run_start, 1) for k, a in workers(tail.lines).items()},
            "container_start_s": start_s, "setup": st}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--steps", type=int, default=16)
    ap.add_argument("--trl", action="store_true")
    ap.add_argument("--verl-python")
    ap.add_argument("--image")
    ap.add_argument("--gpus", type=int, default=0, help="for --verl-python: GPUs to train on (0: the CPU)")
    ap.add_argument("--size", default="tiny", choices=("tiny", "0.5b"))
    ap.add_argument("--certify-arg", action="append", default=[], help="passed on to certify (repeat)")
    ap.add_argument("--no-floor", action="store_true", help="skip the import floor (measured in an earlier run)")
    ap.add_argument("--with-probes", action="store_true",
                    help="with --gpus: keep certify's GPU probes on, as the default command runs them")
    ap.add_argument("--keep", help="copy each run's certificate.json and run.log into this folder")
    ap.add_argument("--json", dest="json_out", help="write the results here")
    a = ap.parse_args()
    common = ["--steps", str(a.steps), "--size", a.size, "--progress", "plain", *a.certify_arg]
    cases = []
    if a.trl:
        cases.append(("TRL, host CPU", sys.executable, ["--host", "--engine", "trl", "--gpus", "0"], 0.0))
    if a.verl_python:
        where = f"{a.gpus} GPU" if a.gpus else "host CPU"
        cases.append((f"verl {a.size}, {where}", a.verl_python,
                      ["--host", "--engine", "verl", "--gpus", str(a.gpus)]
                      + (["--no-probes"] if a.gpus and not a.with_probes else []),
                      0.0))
    if a.image:
        cases.append(("verl, image (CPU)", sys.executable, ["--image", a.image, "--engine", "verl", "--gpus", "0"],
                      container_start(a.image)))
    if not cases:
        ap.error("name at least one of --trl, --verl-python, --image")
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, python, args, start_s in cases:
            modules = ["torch", "ray", "verl.trainer.main_ppo", "vllm"] if "verl" in name and not a.image else \
                ["torch", "trl"] if "TRL" in name else []
            floor = import_floor(python, modules) if modules and not a.no_floor else {}
            for i in range(a.runs):
                out = Path(tmp) / f"{len(results)}"
                whole, cert, tail = certify(python, [*args, *common], out)
                row = {"case": name, "run": i + 1, "verdict": cert["verdict"], "reward": cert["metrics"]["reward"],
                       "import_floor_s": floor, **split(whole, cert, tail, start_s), "engine_run": cert.get("engine_run")}
                results.append(row)
                print(f"{name} run {i + 1}: {cert['verdict']}, {whole:.1f} s", file=sys.stderr)
                if a.keep:
                    keep = Path(a.keep)
                    keep.mkdir(parents=True, exist_ok=True)
                    stem = re.sub(r"[^A-Za-z0-9.-]+", "-", name).strip("-") + f"-{i + 1}"
                    shutil.copyfile(out / "certificate.json", keep / f"{stem}.json")
                    if (out / "run.log").exists():
                        shutil.copyfile(out / "run.log", keep / f"{stem}.log")
    if a.json_out:
        Path(a.json_out).write_text(json.dumps(results, indent=1) + "\n")
    table(results)


def table(results: list[dict]) -> None:
    for r in results:
        p, steps = r["parts"], r["steps_s"]
        floor = sum(v for v in r["import_floor_s"].values() if v)
        startup = r["whole"] - steps - p.get("judging", 0)
        print(f"\n{r['case']} (run {r['run']}): {r['verdict']}, reward {r['reward']['first']} → {r['reward']['last']}, "
              f"whole {r['whole']:.1f} s = {r['whole'] / steps if steps else float('nan'):.1f}× the steps' {steps:.1f} s"
              + (f"; start-up {startup:.0f} s = {startup / floor:.1f}× the import floor {floor:.1f} s "
                 f"({', '.join(f'{k} {v}' for k, v in r['import_floor_s'].items())})" if floor else ""))
        print(f"split from: {r['split_from']}; vLLM engine init (its own figure): "
              f"{(r.get('verl') or {}).get('engine_init_s')} s\n| phase | s | share |\n|---|---:|---:|")
        for k, v in p.items():
            print(f"| {k} | {v:.1f} | {v / r['whole']:.0%} |")
        if r["milestones_s"]:
            print("run.log milestones, s after launch: " + ", ".join(f"{k} {v}" for k, v in r["milestones_s"].items()))
        if r["workers_first_line_s"]:
            print("each worker's first line, s after launch: "
                  + ", ".join(f"{k} {a}" for k, a in r["workers_first_line_s"].items()))


if __name__ == "__main__":
    main()
