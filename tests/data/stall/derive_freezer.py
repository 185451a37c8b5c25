"""Writes verl-2gpu-freezer.derived.json from the kept SIGSTOP report verl-weight-sync.json (a real CPU run), rewritten
to the states the cgroup v2 freezer left on two H100s (FSDP over 2 ranks, training rank 1 frozen at step 2; the
table of that report, as read from it): every process sleeping (state S, nothing stopped), rank 0 of the
WorkerDict spinning at ~90 % CPU in a GPU stream synchronize inside FSDPEngine.forward_backward_batch (its
collective never ends), rank 1 at 0.0 % CPU in pthread_cond_wait. Derived, not recorded: the processes, pids and
the rest of the tree are the CPU run's. Run: python tests/data/stall/derive_freezer.py"""

import copy
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
kept = json.loads((HERE / "verl-weight-sync.json").read_text())
report = copy.deepcopy(kept["stall_report"])
procs = report["processes"]
for p in procs:
    if p["state"] == "stopped":  # the SIGSTOPped rollout worker: thawed, waiting for its next request like its peers
        p.update(state="sleeping", cpu_pct=0.0, note=None, stack="native + Python",
                 wait={"kind": "queue get", "at": "SpinCondition.wait (vllm/distributed/device_communicators/"
                                                   "shm_broadcast.py:210)", "caller": "", "thread": "MainThread"})
rank0 = next(p for p in procs if p["role"] == "Ray actor WorkerDict")
rank0.update(cpu_pct=90.3, gpu_mib=21344.0, wait={
    "kind": "stream sync", "at": "cudaStreamSynchronize (libcudart.so.13)",
    "caller": "", "thread": "MainThread"})
rank1 = copy.deepcopy(rank0)
rank1.update(pid=rank0["pid"] + 6, rank="1", cpu_pct=0.0, cpu_s=rank0["cpu_s"] - 3.1, wait={
    "kind": "lock", "at": "pthread_cond_wait (libc.so.6)", "caller": "", "thread": "MainThread"})
procs.insert(procs.index(rank0) + 1, rank1)
report["label"] = ("the run stalled in update (step 3: log-probs and update): no new step and no output for 60 s "
                   "(--stall-timeout 60)")
report["verdict"] = None  # judged by the code under test
out = {"derived_from": "verl-weight-sync.json", "exit_code": 1,
       "stop": {"reason": "stalled", "phase": "update", "detail": "step 3: log-probs and update"},
       "stall_report": report}
(HERE / "verl-2gpu-freezer.derived.json").write_text(json.dumps(out, indent=1) + "\n")
