"""Time to a verdict: how long `rocmkit certify` takes from the command to its exit for a healthy stack and for
each failure a user meets, and what the certificate names as the cause. The healthy run is the baseline in the
same script, so each failure's time is also a ratio of it.

    python benchmarks/failure_verdicts.py --gpus 2 [--cases healthy,busy,rank,vllm] [--out DIR]   # a GPU host
    python benchmarks/failure_verdicts.py --gpus 0 --python .ci-work/venv-verl-cpu/bin/python      # the CPU

Cases (each one `rocmkit certify --host --engine verl` with the defaults a user types, plus what the case adds):
- healthy: nothing added (on the built-in task the run stops once learning is proven);
- fixed: --steps 16, the healthy run with every step the default allows (what the healthy run took before it
  stopped once learning was proven);
- busy: a process of this script holds BUSY_SHARE of GPU 0's memory (a dead job's leftover engine), then the
  default one-GPU command; refused at the setup, before Ray starts;
- rank: the training rank (Ray actor WorkerDict with RANK = --rank) killed with SIGKILL once step 1 is logged;
- vllm: the rollout's vLLM engine process (VLLM::EngineCore, else the vLLMHttpServer actor) killed with SIGKILL
  once step 1 is logged;
- weights: --model, a copy of the built-in model whose safetensors file is cut to half (CPU or GPU);
- data: --data, a parquet file whose prompt column is named otherwise;
- stall: the training rank stopped with SIGSTOP once step 1 is logged (a frozen trainer: alive, silent, idle),
  under --stall-timeout STALL_TIMEOUT_S.
Writes DIR/results.json and prints a table; each case's run folder (certificate, run.log) is kept under DIR.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil

BUSY_SHARE = 0.9  # of GPU 0: what an orphaned vLLM engine at its default gpu_memory_utilization holds
STEP_RE = re.compile(r"\bstep:(\d+)\b")
CASE_TIMEOUT_S = 900
# The stall case's --stall-timeout: long enough that no healthy CPU step trips it (steps take seconds), short
# enough that the case's time is mostly the timeout itself, which the table reports beside it.
STALL_TIMEOUT_S = 60


def certify_argv(python: str, out: Path, gpus: int, extra: list[str]) -> list[str]:
    return [python, "-m", "rocmkit", "certify", "--host", "--engine", "verl", "--gpus", str(gpus), "--out", str(out),
            *extra]


def find(pred) -> psutil.Process | None:
    for p in psutil.process_iter(["cmdline"]):
        try:
            if pred(p):
                return p
        except psutil.Error:
            continue
    return None


def rank_process(rank: int):
    def pred(p):
        cmd = " ".join(p.info["cmdline"] or [])
        return cmd.startswith("ray::WorkerDict") and p.environ().get("RANK") == str(rank)
    return pred


def vllm_process(p) -> bool:
    return " ".join(p.info["cmdline"] or []).startswith(("VLLM::EngineCore", "VLLM::Worker"))


def vllm_server(p) -> bool:
    return " ".join(p.info["cmdline"] or []).startswith("ray::vLLMHttpServer")


def kill_at_step(log: Path, step: int, choose, deadline: float, said: dict, sig=signal.SIGKILL) -> None:
    """Once the log shows `step` done, send `sig` to the process `choose` picks (a list of predicates, first
    found): SIGKILL kills it, SIGSTOP freezes it (the watchdog's stall, then proc.run ends it)."""
    while time.monotonic() < deadline:
        text = log.read_text(errors="replace") if log.exists() else ""
        if any(int(n) >= step for n in STEP_RE.findall(text)):
            for pred in choose:
                p = find(pred)
                if p:
                    said.update(pid=p.pid, cmdline=" ".join(p.cmdline())[:120], at=time.time())
                    p.send_signal(sig)
                    return
            said["error"] = "no process to kill was found"
            return
        time.sleep(0.5)


def hold_gpu(share: float) -> subprocess.Popen:
    """A process holding `share` of GPU 0's memory until killed (prints READY once it holds it)."""
    code = ("import torch, sys, time\nfree, total = torch.cuda.mem_get_info(0)\n"
            f"x = torch.empty(int(min(free - (2 << 30), {share} * total)), dtype=torch.uint8, device='cuda:0')\n"
            "print('READY', x.numel(), flush=True)\ntime.sleep(3600)\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    line = p.stdout.readline()
    if not line.startswith("READY"):
        p.kill()
        raise SystemExit(f"the GPU holder did not start: {line!r}")
    return p


def capture_holder(pid: int, dest: Path) -> None:
    """What this host says of the process holding the GPU, for the doctor's tests on real data: its /proc files,
    the fdinfo of its GPU device files, and nvidia-smi's view (where there is one)."""
    proc = dest / "proc" / str(pid)
    (proc / "fdinfo").mkdir(parents=True, exist_ok=True)
    for name in ("comm", "cmdline", "stat", "status"):
        try:
            (proc / name).write_bytes(Path(f"/proc/{pid}/{name}").read_bytes())
        except OSError:
            pass
    links = []
    for fd in sorted(os.listdir(f"/proc/{pid}/fd"), key=int):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        links.append(f"{fd} -> {target}")
        if target.startswith(("/dev/dri", "/dev/kfd", "/dev/nvidia")):
            try:
                (proc / "fdinfo" / fd).write_bytes(Path(f"/proc/{pid}/fdinfo/{fd}").read_bytes())
            except OSError:
                pass
    (proc / "fd.txt").write_text("\n".join(links) + "\n")
    (dest / "proc" / "stat").write_bytes(Path("/proc/stat").read_bytes())
    smi = shutil.which("nvidia-smi")
    if smi:
        for name, query in (("compute-apps", "--query-compute-apps=pid,used_memory,gpu_bus_id"),
                            ("gpus", "--query-gpu=pci.bus_id,memory.total,memory.used")):
            r = subprocess.run([smi, query, "--format=csv,noheader,nounits"], capture_output=True, text=True,
                               timeout=30)
            (dest / f"nvidia-smi-{name}.csv").write_text(r.stdout)


def cut_weights(python: str, folder: Path) -> Path:
    """The built-in tiny model with its safetensors file cut to half its size."""
    subprocess.run([python, "-c", "import sys; from pathlib import Path; from rocmkit import tinymodel; "
                    "tinymodel.build(Path(sys.argv[1]), size='tiny', seed=0)", str(folder)], check=True)
    for f in folder.glob("*.safetensors"):
        data = f.read_bytes()
        f.write_bytes(data[: len(data) // 2])
    return folder


def wrong_data(python: str, path: Path) -> Path:
    """The built-in task's parquet with its prompt column renamed."""
    subprocess.run([python, "-c", "import sys, pyarrow.parquet as pq; from pathlib import Path; "
                    "from rocmkit.certify import task; d = Path(sys.argv[1]).parent / 'builtin'; "
                    "task.write_dataset(d, train_rows=64, seed=0); f = next(d.glob('train*.parquet')); "
                    "t = pq.read_table(f); pq.write_table(t.rename_columns(['question' if c == 'prompt' else c "
                    "for c in t.column_names]), sys.argv[1])", str(path)], check=True)
    return path


def run_case(name: str, args, out: Path) -> dict:
    folder = out / name
    shutil.rmtree(folder, ignore_errors=True)
    extra = list(args.extra)
    gpus = args.gpus
    holder, said = None, {}
    if name == "busy":  # the default one-GPU command, as a user types it
        gpus, extra = 1, []
        holder = hold_gpu(BUSY_SHARE)
        said["holder_pid"] = holder.pid
        capture_holder(holder.pid, out / "busy-holder")
    if name == "weights":
        extra += ["--model", str(cut_weights(args.python, out / "inputs" / "cut-model"))]
    if name == "data":
        extra += ["--data", str(wrong_data(args.python, out / "inputs" / "wrong.parquet"))]
    if name == "fixed":
        extra += ["--steps", "16"]
    if name == "stall":
        extra += ["--stall-timeout", str(STALL_TIMEOUT_S)]
    argv = certify_argv(args.python, folder, gpus, extra)
    start = time.monotonic()
    deadline = start + CASE_TIMEOUT_S
    killer = None
    if name in ("rank", "vllm", "stall"):
        choose = [vllm_process, vllm_server] if name == "vllm" else [rank_process(args.rank)]
        sig = signal.SIGSTOP if name == "stall" else signal.SIGKILL
        killer = threading.Thread(target=kill_at_step, args=(folder / "run.log", 1, choose, deadline, said, sig),
                                  daemon=True)
        killer.start()
    try:
        r = subprocess.run(argv, capture_output=True, text=True, timeout=CASE_TIMEOUT_S)
        code, stderr = r.returncode, r.stderr
    except subprocess.TimeoutExpired as exc:
        code, stderr = 124, (exc.stderr or b"").decode(errors="replace") if isinstance(exc.stderr, bytes) else ""
    wall = time.monotonic() - start
    if holder:
        holder.kill()
        holder.wait()
    cert = {}
    try:
        cert = json.loads((folder / "certificate.json").read_text())
    except (OSError, ValueError):
        pass
    cause = cert.get("cause") or {}
    said_error = [x[len("error: "):] for x in stderr.splitlines() if x.startswith("error: ")]
    killed_after = round(said["at"] - (time.time() - wall), 1) if "at" in said else None
    return {"case": name, "command": " ".join(argv), "exit": code, "wall_s": round(wall, 1),
            "verdict": cert.get("verdict"), "cause": cause.get("summary") or (said_error or [None])[-1],
            "steps": (cert.get("metrics") or {}).get("steps"), "ended_by": (cert.get("run") or {}).get("ended_by"),
            "hint": cause.get("hint"),
            "killed": said, "killed_after_s": killed_after,
            "terminal": [x for x in stderr.splitlines() if x.startswith(("error:", "hint:"))][-2:]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gpus", type=int, default=1)
    ap.add_argument("--cases", default="healthy,busy,rank,vllm")
    ap.add_argument("--rank", type=int, default=1, help="the training rank the rank case kills")
    ap.add_argument("--python", default=sys.executable, help="the Python whose rocmkit and verl run the cases")
    ap.add_argument("--out", default="bench-failures")
    ap.add_argument("extra", nargs="*", help="more certify options, after --")
    args = ap.parse_args()
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    results = []
    for name in args.cases.split(","):
        results.append(run_case(name, args, out))
        print(json.dumps(results[-1], indent=1), flush=True)
        (out / "results.json").write_text(json.dumps(results, indent=1))
    base = next((r["wall_s"] for r in results if r["case"] == "healthy"), None)
    print(f"\n{'case':<9}{'exit':>5}{'to verdict s':>14}{'÷ healthy':>11}  cause")
    for r in results:
        ratio = f"{r['wall_s'] / base:.2f}" if base else "-"
        print(f"{r['case']:<9}{r['exit']:>5}{r['wall_s']:>14}{ratio:>11}  {(r['cause'] or '-')[:150]}")
    os.sync()


if __name__ == "__main__":
    main()
