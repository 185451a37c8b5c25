"""Two torch.distributed (gloo) ranks on this host for the stall report's tests: both join and complete one
all_reduce (#1), then rank 0 enters all_reduce #2 (and all_gather #3 after it) and rank 1 hangs as argv[3] says:

- `stop`: SIGSTOP itself (the kernel marks it: state T);
- `sleep`: a straggler elsewhere, in time.sleep;
- `block`: waits forever in Python (a threading.Event no one sets), not stopped;
- `skip`: skips all_reduce #2 and enters all_gather as its #2 (a rank that took another branch);
- `native`: blocks in a native call that holds the GIL (pause(2) through ctypes.PyDLL), as a C extension's
  call that never returns does.

With ROCMKIT_FR_DIR set, the flight recorder's dumper (rocmkit/stall/frdump.py) runs in each rank; set
TORCH_FR_BUFFER_SIZE for gloo to keep a record. Each rank prints "joined RANK" once #1 is done.
Usage: python stall_ranks.py RANK PORT stop|sleep|block|skip|native"""

import ctypes
import os
import signal
import sys
import threading
import time
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import rocmkit.stall.frdump  # noqa: E402,F401 - starts its thread where ROCMKIT_FR_DIR is set

rank, port, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
dist.all_reduce(torch.ones(4))
print(f"joined {rank}", flush=True)
if rank == 1:
    if mode == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)
    elif mode == "sleep":
        time.sleep(600)
    elif mode == "block":
        threading.Event().wait()
    elif mode == "native":
        ctypes.PyDLL(None).pause()
    elif mode == "skip":
        dist.all_gather([torch.zeros(2) for _ in range(2)], torch.ones(2))
dist.all_reduce(torch.ones(4))
dist.all_gather([torch.zeros(2) for _ in range(2)], torch.ones(2))
