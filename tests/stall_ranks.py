"""Two torch.distributed (gloo) ranks on this host for the stall report's tests: both join, then rank 0 enters
an all_reduce and rank 1 does what argv[3] says: `stop` (SIGSTOP itself) or `sleep` (a straggler elsewhere).
Each prints "joined RANK" once the group is made. Usage: python stall_ranks.py RANK PORT stop|sleep"""

import os
import signal
import sys
import time

import torch
import torch.distributed as dist

rank, port, mode = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
print(f"joined {rank}", flush=True)
if rank == 1:
    if mode == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)
    else:
        time.sleep(600)
dist.all_reduce(torch.ones(4))
