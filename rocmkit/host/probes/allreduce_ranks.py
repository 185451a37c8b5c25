"""The all-reduce probe's launcher: `python -m rocmkit.host.probes.allreduce_ranks ARGS.json` spawns one process
per device (torch.multiprocessing), each timing all-reduces through torch.distributed; rank 0 writes the
figures to the result file. It runs under rocmkit's runner, so a deadline or a signal stops every rank."""

from __future__ import annotations

import json
import os
import sys

from .measure import GB, MAX_SAMPLES, busbw_factor, sample, timer


def _allreduce_worker(rank, devices, nbytes, budget_s, warmup_s, stop_early, rendezvous, result, logdir,
                      timeout_s) -> None:
    # NCCL and torch write warnings to the inherited terminal: keep them in a per-rank log, for the error message.
    log = os.open(os.path.join(logdir, f"rank{rank}.log"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    import datetime

    import torch
    import torch.distributed as dist

    device = torch.device(devices[rank])
    if device.type == "cuda":
        torch.cuda.set_device(device)
    backend = "nccl" if device.type == "cuda" else "gloo"
    dist.init_process_group(backend, init_method=f"file://{rendezvous}", rank=rank, world_size=len(devices),
                            timeout=datetime.timedelta(seconds=timeout_s))
    try:
        x = torch.ones(max(1, nbytes // 4), dtype=torch.float32, device=device)
        dist.all_reduce(x)
        correct = bool(torch.all(x == len(devices)).item())
        x.zero_()  # sums of zeros stay finite however many times they run

        def agree(values):
            t = torch.tensor(values, dtype=torch.float64, device=device)
            dist.all_reduce(t, op=dist.ReduceOp.MAX)
            return t.tolist()

        timed = timer(device)
        algbw_work = x.numel() * 4 / GB
        samples, stable, early = sample(lambda reps: timed(lambda: dist.all_reduce(x), reps),
                                        algbw_work * busbw_factor(len(devices)), budget_s=budget_s,
                                        warmup_s=warmup_s, agree=agree, stop_early=stop_early,
                                        max_samples=MAX_SAMPLES if stop_early else 100_000)
        if rank == 0:
            nccl = None
            if backend == "nccl":
                try:
                    v = torch.cuda.nccl.version()
                    nccl = ".".join(map(str, v)) if isinstance(v, tuple) else str(v)
                except Exception:  # noqa: BLE001 - the version is evidence, not a requirement
                    nccl = None
            with open(result + ".tmp", "w") as f:
                json.dump({"samples": samples, "stable": stable, "early": early, "bytes": x.numel() * 4, "backend": backend,
                           "correct": correct, "nccl": nccl}, f)
            os.replace(result + ".tmp", result)
    finally:
        dist.destroy_process_group()


def main(args_path: str) -> int:
    import torch.multiprocessing as mp

    with open(args_path) as f:
        a = json.load(f)
    try:
        mp.start_processes(_allreduce_worker, nprocs=len(a["devices"]), join=True, start_method="spawn",
                           args=(a["devices"], a["nbytes"], a["budget_s"], a["warmup_s"], a["stop_early"],
                                 a["rendezvous"], a["result"], a["logdir"], a["timeout_s"]))
    except Exception as exc:  # noqa: BLE001 - a rank raised or died: say which, in one line
        lines = [ln for ln in str(exc).strip().splitlines() if ln.strip()]
        print(lines[-1].strip() if lines else type(exc).__name__, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
