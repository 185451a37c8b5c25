"""The GPU check: the commands a GPU user types first, with default options, on whatever GPUs are visible. Run it
on a GPU machine before resolving any change to certify, the probes or the doctor's GPU code (CI has no GPU).

    python benchmarks/gpu_check.py [--out DIR] [--only NAME[,NAME...]] [--deadline S]

The runs, in order (those that need more GPUs than are visible are skipped, and say so):

    doctor       rocmkit doctor --level 2 --json          (every probe on every visible GPU)
    verl-1gpu    rocmkit certify --host --engine verl --gpus 1 --json      (probes on, as a user runs it)
    verl-2gpu    rocmkit certify --host --engine verl --gpus 2 --json      (two or more GPUs)
    trl-1gpu     rocmkit certify --host --engine trl --gpus 1 --json

and by name with --only, verl-1gpu-sglang and verl-2gpu-sglang-tp2 (SGLang's rollout, which needs SGLang beside
verl: benchmarks/gpu_sglang), the shapes of real jobs: verl-2gpu-rollout-tp2, verl-4gpu-rollout-tp2 (`--rollout-tp 2`
on 2 and 4 GPUs), verl-2gpu-megatron-tp2 (`--backend megatron --tp 2`: verl's Megatron actor, which needs
megatron-core, mbridge and TransformerEngine) and trl-server-2gpu (`--vllm-mode server --gpus 2`: the server on one
GPU, the trainer on the other); and verl-2gpu-stall, a hang made on purpose: `--rollout-tp 2` on 2 GPUs with the
test hook ROCMKIT_TEST_STALL=rollout:1:3 (rocmkit/stall/testhook.py: the rollout's TP rank 1 stops itself with
SIGSTOP in its third forward pass) under `--stall-timeout 60`. It passes when certify exits 1 with a stall report
that names the stopped rank as the one waited for and at least one process waiting for it (py-spy must be
installed: `pip install py-spy`, or its wheel). verl-2gpu-block, verl-2gpu-skip and verl-2gpu-freeze hang training
rank 1 of the FSDP actor without stopping it (ROCMKIT_TEST_STALL=update:1:2:block, update:1:2:skip,
update:1:2:freeze: the cgroup v2 freezer, which needs a writable /sys/fs/cgroup): they pass when certify
exits 1 and the verdict's first line names rank 1 from the flight recorder (the collective its peer waits in).
verl and TRL need Pythons of their own (TRL 1.13 or newer beside
verl breaks verl): run the TRL ones with
the Python, or PYTHONPATH, that has TRL.

Each run's document is written to DIR/NAME.json (a certificate, or the doctor's report) with its stderr beside it
(DIR/NAME.stderr), and one line is printed per run: name, exit code, verdict, seconds, and the figures a reader
checks first. DIR/summary.json holds those lines. Exit 0 when every run that ran exited 0.
tests/test_gpu_check.py judges the documents kept from lent GPUs in tests/data/certify/gpu-check/.

--deadline stops a run after S seconds with SIGTERM, so rocmkit stops what it started (SIGKILL 60 s later if it
has not; the machine's own command limit may be shorter than certify's default
--timeout of an hour); a stopped run is a failure, exit 124 in its line.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROCMKIT = [sys.executable, "-m", "rocmkit"]
RUNS = {  # name -> (GPUs it needs, the command after `rocmkit`)
    "doctor": (1, ["doctor", "--level", "2", "--json"]),
    "verl-1gpu": (1, ["certify", "--host", "--engine", "verl", "--gpus", "1", "--json"]),
    "verl-2gpu": (2, ["certify", "--host", "--engine", "verl", "--gpus", "2", "--json"]),
    "trl-1gpu": (1, ["certify", "--host", "--engine", "trl", "--gpus", "1", "--json"]),
    # the shapes of real jobs, asked for by name: rollout replicas of TP 2, TRL's server on one GPU and its
    # trainer on the other
    "verl-2gpu-rollout-tp2": (2, ["certify", "--host", "--engine", "verl", "--gpus", "2", "--rollout-tp", "2",
                                  "--json"]),
    "verl-4gpu-rollout-tp2": (4, ["certify", "--host", "--engine", "verl", "--gpus", "4", "--rollout-tp", "2",
                                  "--json"]),
    # verl's Megatron actor over TP 2 (needs megatron-core, mbridge and TransformerEngine beside verl)
    "verl-2gpu-megatron-tp2": (2, ["certify", "--host", "--engine", "verl", "--gpus", "2", "--backend", "megatron",
                                   "--tp", "2", "--json"]),
    "trl-server-2gpu": (2, ["certify", "--host", "--engine", "trl", "--vllm-mode", "server", "--gpus", "2", "--json"]),
    # verl with an SGLang rollout (needs SGLang beside verl: benchmarks/gpu_sglang)
    "verl-1gpu-sglang": (1, ["certify", "--host", "--engine", "verl", "--rollout", "sglang", "--gpus", "1", "--json"]),
    "verl-2gpu-sglang-tp2": (2, ["certify", "--host", "--engine", "verl", "--rollout", "sglang", "--gpus", "2",
                                 "--rollout-tp", "2", "--json"]),
    # a rollout rank stopped in its forward pass: the stall report must name it and the ranks waiting for it
    "verl-2gpu-stall": (2, ["certify", "--host", "--engine", "verl", "--gpus", "2", "--rollout-tp", "2",
                            "--stall-timeout", "60", "--no-probes", "--json"]),
    # training rank 1 of the FSDP actor hangs without being stopped (waits in Python / skips one all-gather):
    # the verdict's first line must name rank 1, from the flight recorder, with its frame
    "verl-2gpu-block": (2, ["certify", "--host", "--engine", "verl", "--gpus", "2", "--stall-timeout", "60",
                            "--no-probes", "--json"]),
    "verl-2gpu-skip": (2, ["certify", "--host", "--engine", "verl", "--gpus", "2", "--stall-timeout", "60",
                           "--no-probes", "--json"]),
    # training rank 1 frozen by the cgroup v2 freezer (state S like its peers, no flight-recorder dump from it)
    "verl-2gpu-freeze": (2, ["certify", "--host", "--engine", "verl", "--gpus", "2", "--stall-timeout", "60",
                             "--no-probes", "--json"]),
}
ENV = {"verl-2gpu-stall": {"ROCMKIT_TEST_STALL": "rollout:1:3"},  # the runs' extra environment
       "verl-2gpu-block": {"ROCMKIT_TEST_STALL": "update:1:2:block"},
       "verl-2gpu-skip": {"ROCMKIT_TEST_STALL": "update:1:2:skip"},
       "verl-2gpu-freeze": {"ROCMKIT_TEST_STALL": "update:1:2:freeze"}}
STALLS = {"verl-2gpu-stall", "verl-2gpu-block", "verl-2gpu-skip", "verl-2gpu-freeze"}  # runs that must end as a named stall (exit 1)
STOPPED = {"verl-2gpu-stall"}  # the hung process is SIGSTOPped; in the others it sleeps like its peers
STOP_GRACE_S = 60  # after --deadline's SIGTERM, for rocmkit to stop what it started
CORE = ("doctor", "verl-1gpu", "verl-2gpu", "trl-1gpu")  # what a change to the GPU path is checked with


def visible_gpus() -> int:
    try:
        import torch
    except ImportError:
        return 0
    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def headline(name: str, doc: dict) -> str:
    """The figures a reader checks first."""
    if name == "doctor":
        probes = [f for f in doc.get("findings", []) if f["id"].startswith("probe")]
        bad = [f"{f['id']} {f['status']}" for f in probes if f["status"] not in ("pass", "skip")]
        skipped = [f["id"] for f in probes if f["status"] == "skip"]
        return (f"{len(probes)} probe findings, " + (", ".join(bad) if bad else "none failed or warned")
                + (f" ({len(skipped)} skipped: {', '.join(skipped)})" if skipped else ""))
    mt = doc.get("metrics") or {}
    reward = mt.get("reward") or {}
    probes = doc.get("probes") or {}
    figures = probes.get("figures") or {}
    return (f"device {doc.get('device')}; reward {reward.get('first')} -> {reward.get('last')}; "
            f"{mt.get('steps')} steps; probes: " + ("off" if not probes else
                                                     f"{len(figures.get('gpus', []))} GPU(s) measured, "
                                                     f"{sum(f['status'] not in ('pass', 'skip') for f in probes.get('findings', []))}"
                                                     " failed or warned"))


def stall_headline(doc: dict, stopped: bool = True) -> tuple[str, str]:
    """A made stall's verdict and line: pass when the report names the stopped process and who waits for it; for a
    rank hung without being stopped (`stopped` False), when the verdict's first line names training rank 1 (from
    the flight recorder, or frozen by the cgroup freezer) and the flight recorder's dumps say where its peer waits."""
    report = (doc.get("run") or {}).get("stall_report") or {}
    v = report.get("verdict")
    if not v:
        return "fail", "no stall report: " + str(report.get("error") or (doc.get("run") or {}).get("status"))
    waiting = ", ".join(f"{'rank ' + w['rank'] + ' ' if w.get('rank') else ''}pid {w['pid']} {w['role']} in {w['kind']}"
                        for w in v["waiting"])
    named = ", ".join(f"pid {w['pid']} {w['role']} ({w['why'].split(':')[0]})" for w in v["waits_for"])
    if stopped:
        ok = bool(v["waiting"]) and any(p["state"] == "stopped" and p["pid"] in {w["pid"] for w in v["waits_for"]}
                                        for p in report.get("processes", []))
    else:
        first = (v.get("lines") or [""])[0]
        record = report.get("flight_recorder") or {}
        ok = (bool(record.get("groups")) and first.startswith("the job waits for rank 1 ")
              and any(w.get("rank") == "1" and (w.get("source") == "flight recorder" or "frozen" in w["why"])
                      for w in v["waits_for"]))
        named = first or named
    return ("pass" if ok else "fail"), (f"waiting: {waiting or 'none'}; waited for: {named or 'none'}; "
                                        f"report {report.get('took_s')} s")


def run_one(name: str, argv: list[str], out: Path, deadline: float | None) -> dict:
    if name != "doctor":
        argv = [*argv, "--out", str(out / f"{name}-run")]
    started = time.monotonic()
    child = subprocess.Popen(ROCMKIT + argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env={**os.environ, **ENV.get(name, {})})
    try:
        stdout, stderr = child.communicate(timeout=deadline)
        code = child.returncode
    except subprocess.TimeoutExpired:
        # SIGTERM, not subprocess.run's SIGKILL: rocmkit then stops its own tree (Ray, vLLM, the workers). Killed
        # outright, those outlived it on two H100s and held the GPUs, and the next run's probes read half speed.
        child.terminate()
        try:
            stdout, stderr = child.communicate(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            child.kill()
            stdout, stderr = child.communicate()
        code = 124
        stderr += f"\ngpu_check: stopped after --deadline {deadline} s (SIGTERM; rocmkit exited {child.returncode})"
    seconds = round(time.monotonic() - started, 1)
    (out / f"{name}.stderr").write_text(stderr)
    line = {"name": name, "command": "rocmkit " + " ".join(argv), "exit": code, "seconds": seconds}
    try:
        doc = json.loads(stdout)
    except ValueError:
        return {**line, "verdict": None, "headline": "no JSON document; stderr: " + " | ".join(stderr.splitlines()[-3:])}
    (out / f"{name}.json").write_text(json.dumps(doc, indent=1) + "\n")
    if name in STALLS:
        verdict, text = stall_headline(doc, stopped=name in STOPPED)
        return {**line, "verdict": verdict if code == 1 else "fail", "headline": text}
    if name == "doctor":  # on a machine that is not AMD's, level 1 fails (no amdgpu, no KFD): level 2 is judged here
        probes = [f for f in doc.get("findings", []) if f["id"].startswith("probe")]
        verdict = "pass" if probes and all(f["status"] in ("pass", "skip") for f in probes) else "fail"
    else:
        verdict = doc.get("verdict") or "fail"
    return {**line, "verdict": verdict, "headline": headline(name, doc)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="gpu-check", help="folder for the documents (default: gpu-check)")
    ap.add_argument("--only", default=",".join(CORE),
                    help=f"runs to make, comma-separated (default: {','.join(CORE)}); all: {', '.join(RUNS)}")
    ap.add_argument("--deadline", type=float, default=None, help="seconds before a run is stopped (default: none)")
    args = ap.parse_args()
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in RUNS]
    if unknown:
        print(f"error: --only {','.join(unknown)}: not a run; the runs are {', '.join(RUNS)}", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    gpus = visible_gpus()
    print(f"gpu_check: {gpus} GPU(s) visible; runs: {', '.join(names)}", flush=True)
    results = []
    for name in names:
        need, argv = RUNS[name]
        if gpus < need:
            results.append({"name": name, "command": "rocmkit " + " ".join(argv), "exit": None, "seconds": 0,
                            "verdict": "skipped", "headline": f"needs {need} GPU(s), {gpus} visible"})
        else:
            results.append(run_one(name, argv, out, args.deadline))
        r = results[-1]
        print(f"{r['name']:<10} exit {r['exit']}  {r['verdict']}  {r['seconds']} s  {r['headline']}", flush=True)
    # runs made by an earlier call into the same folder stay (a machine's command limit can split the check)
    previous = json.loads((out / "summary.json").read_text())["runs"] if (out / "summary.json").exists() else []
    kept = [p for p in previous if p["name"] not in names]
    (out / "summary.json").write_text(json.dumps({"gpus": gpus, "runs": kept + results}, indent=1) + "\n")
    return 0 if all(r["verdict"] in ("pass", "skipped") for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
