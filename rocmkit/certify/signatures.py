"""The failure signatures users meet, each named, each with what to do: one log line in, a Signature out.

A run that dies prints many lines that only repeat the failure (Hydra's "Error executing job", Ray's RayTaskError,
vLLM's "Engine core initialization failed") and one line that says what happened. A wrapper signature names the
first kind so the caller can look past it (`wrapper=True`); the others name a cause and say what to do. Each one's
`source` is a public page that shows its exact text (an upstream issue or the engine's source file at a tag);
tests/test_certify_signatures.py holds, for every signature, a real line from that source or from a run here.

Order matters: `match` returns the first signature that matches. Wrappers whose line embeds the wrapped error's
name come first (RayTaskError(OutOfDiskError) is Ray's wrapper, not the disk); then causes, the most specific
first (NCCL's "/dev/shm ... No space left on device" is /dev/shm, not a full disk). Pure: no I/O.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Signature:
    id: str  # stable dotted id, e.g. "gpu.oom"
    pattern: re.Pattern  # searched in one log line (Ray/vLLM prefixes such as "(WorkerDict pid=123) " may precede it)
    title: str  # what happened, for a person
    hint: str  # what to do, concrete
    source: str  # public URL where this exact text is shown
    wrapper: bool = False  # True: a line that only wraps a cause (never the cause itself)
    signal: str | None = None  # the signal it implies ("SIGKILL" for the kernel's OOM killer)


def _sig(id: str, pattern: str, title: str, hint: str, source: str, *, wrapper: bool = False,
         signal: str | None = None) -> Signature:
    return Signature(id, re.compile(pattern), title, hint, source, wrapper, signal)


_GH = "https://github.com/"
# What to do about host memory, shared by Ray's monitor, the kernel's OOM killer and a worker that vanished.
_HOST_MEMORY = ("lower data.train_batch_size or actor_rollout_ref.rollout.n, turn CPU offload off "
                "(actor_rollout_ref.actor.fsdp_config.param_offload / optimizer_offload), or give the node (or the "
                "container: docker --memory) more memory")
_SHM = "give the container more /dev/shm (docker run --shm-size=16g, or --ipc=host)"
_WEIGHTS = ("the download or copy stopped early, or the file is not what its name says: delete it (or its Hugging "
            "Face cache entry) and fetch it again, then compare its size with the source")
_DEBUG_KERNEL = ("rerun with AMD_SERIALIZE_KERNEL=3 (CUDA_LAUNCH_BLOCKING=1 on NVIDIA) so the error names the kernel "
                 "that faulted")

SIGNATURES: tuple[Signature, ...] = (
    # Wrappers whose line carries the wrapped error's name or a pid that is not the dead process's.
    _sig("hydra.job_failed", r"\bError executing job with overrides: \[",
         "the verl job failed (Hydra's closing line: the cause is above it)",
         "read the last exception before this line; HYDRA_FULL_ERROR=1 prints Hydra's full stack",
         _GH + "verl-project/verl/issues/1013", wrapper=True),
    # the pid is the process of the task that raised (verl's driver), not the worker that died; Ray colours the
    # task's name on a terminal and in its log monitor's copy (ESC[36m ray::Actor.method() ESC[39m)
    _sig("ray.task_error",
         r"(?:\bray\.exceptions\.RayTaskError(?:\((?P<cause>\w+)\))?|\bUnhandled error \(suppress with "
         r"'RAY_IGNORE_UNHANDLED_ERRORS=1'\)): (?:\x1b\[[0-9;]*m)?ray::(?P<task>[^\s\x1b(]+)(?:\(\))?"
         r"(?:\x1b\[[0-9;]*m)? \(pid=(?P<pid>\d+)",
         "a Ray task raised an exception (the cause is the last exception of the traceback that follows)",
         "read the last exception after this line (its name is in `cause`); it names what happened",
         _GH + "Jiayi-Pan/TinyZero/issues/58", wrapper=True),

    # Ray: a worker gone without a word. Its "Worker exit detail" lists the OOM killer and SIGSEGV as possible
    # causes, so it comes before the signatures that name those.
    _sig("ray.worker_died",
         r"(?:\bWorker PID: (?P<pid>\d+) )?Worker exit type: SYSTEM_ERROR Worker exit detail: Worker "
         r"(?:unexpectedly exits with a connection error code \d+\. End of file"
         r"|exits unexpectedly\. Worker exits with an exit code None)",
         "a Ray worker process ended without a word: killed by a signal (SIGKILL from the kernel's OOM killer, "
         "most often) or crashed (SIGSEGV)",
         "look for the worker's pid in the kernel log (dmesg | grep -i 'killed process'): found, the host ran out of "
         "memory: " + _HOST_MEMORY + "; not found, read the worker's own log "
         "(/tmp/ray/session_latest/logs/worker-*-<pid>.err) for a segfault or abort",
         _GH + "verl-project/verl/issues/4921"),
    # Ray's memory monitor: the exception (before 2.56 "Task was killed", the node's usage on the next line; since,
    # "worker(s) were killed" and the usage on the same line, "used / limit"), and the raylet's summary. The pid is
    # the worker Ray killed.
    _sig("ray.oom",
         r"(?:(?:Task was|worker\(s\) were) killed due to the node running low on memory\. )?Memory on the node "
         r"\(IP: (?P<ip>[^,]+), ID: \w+\)(?:.*?\bpid=(?P<pid>\d+))?.*? was (?P<used>[\d.]+) ?GB(?: used)? / "
         r"(?P<total>[\d.]+) ?GB(?: limit)? \([\d.]+\)(?:, which exceeds the memory usage threshold of "
         r"(?P<threshold>\d+(?:\.\d+)?))?"
         r"|(?:Task was|worker\(s\) were) killed due to the node running low on memory"
         r"|Workers \(tasks / actors\) killed due to memory pressure \(OOM\)",
         "Ray's memory monitor killed a worker: the node's host memory passed Ray's threshold (0.95 by default)",
         _HOST_MEMORY + "; RAY_memory_usage_threshold moves the threshold",
         _GH + "real-stanford/flingbot/issues/11"),
    # The kernel's OOM killer (dmesg): "Out of memory: Killed process", its cgroup form, and the victim on a line of
    # its own (4.x kernels); total-vm: keeps other tools' "Killed process" lines out.
    _sig("host.oom_kill", r"\bKilled process (?P<pid>\d+) \((?P<process>.*?)\),? (?:UID \d+, )?total-vm:",
         "the kernel's OOM killer killed a process: host memory (or the container's limit) ran out",
         _HOST_MEMORY + "; `pid` names the victim: match it against the Ray worker or rank that died",
         _GH + "0jc1/py-autovod/issues/7", signal="SIGKILL"),
    _sig("host.oom_kill_task", r"\boom-kill:.*?\btask=(?P<process>[^,]*),pid=(?P<pid>\d+)",
         "the kernel's OOM killer chose a process to kill (its oom-kill record): host memory ran out",
         _HOST_MEMORY + "; `pid` names the victim",
         _GH + "0jc1/py-autovod/issues/7", signal="SIGKILL"),

    # GPU memory
    _sig("vllm.free_memory_at_start",
         r"Free memory on device (?:(?P<device>\S+) )?\((?P<free>[\d.]+)/(?P<total>[\d.]+) GiB\) on startup is less "
         r"than desired GPU memory utilization \((?P<utilization>[\d.]+), (?P<wanted>[\d.]+) GiB\)",
         "vLLM found less free GPU memory at start-up than it was told to take: another process holds the GPU",
         "find the holder (amd-smi process, or rocm-smi --showpids; nvidia-smi on NVIDIA), often an orphaned "
         "VLLM::EngineCore of an earlier run, and stop it; or lower actor_rollout_ref.rollout.gpu_memory_utilization "
         "below the free share",
         _GH + "vllm-project/vllm/issues/20305"),
    # vLLM's sleep-mode pool (cumem allocator) re-mapping its memory at wake-up while the trainer still holds some
    # SGLang 0.5.12's watchdog of its own processes (python/sglang/srt/utils/watchdog.py, SubprocessWatchdog): the
    # exit code of a process a signal ended is minus the signal's number
    # torch.distributed's gloo transport when the process at the other end of a collective is gone
    # (third_party/gloo/gloo/transport/tcp/pair.cc): the peer died first, and says nothing if it was killed
    _sig("dist.peer_lost", r"gloo/transport/tcp/pair\.cc:\d+\] (?:(?:Read|Write) error \[[^\]]*\]:\d+: Connection reset "
         r"by peer|Connection closed by peer)",
         "a process lost the peer of its collective (the other end's process ended)",
         "the process that ended first is the cause: a rank killed with SIGKILL says nothing (the kernel's OOM killer "
         "or someone outside the job: `dmesg | grep -i 'killed process'`)",
         _GH + "pytorch/pytorch/issues/149292"),
    _sig("sglang.subprocess_crashed",
         r"\bSubprocess (?P<proc>\S+) \(pid=(?P<pid>\d+)\) crashed with exit code (?P<code>-?\d+)",
         "an SGLang process ended",
         "a negative exit code is the signal that ended it (-9: SIGKILL, by the kernel's OOM killer or someone "
         "outside the job: `dmesg | grep -i 'killed process'`); otherwise its own last lines above say why",
         _GH + "sgl-project/sglang/blob/v0.5.12/python/sglang/srt/utils/watchdog.py"),
    # ... and of its scheduler's forward passes (watchdog.py, WatchdogRaw): no progress for --watchdog-timeout
    _sig("sglang.watchdog_timeout", r"\b(?P<proc>\w+) watchdog timeout \(self\.watchdog_timeout=(?P<timeout>[\d.]+)",
         "SGLang's own watchdog saw its scheduler make no progress",
         "a forward pass or collective of the rollout hung: the stall report's stacks name the process it waits in; "
         "raise engine_kwargs.sglang.watchdog_timeout only for a model that is slow to step",
         _GH + "sgl-project/sglang/blob/v0.5.12/python/sglang/srt/utils/watchdog.py"),
    _sig("vllm.pool_oom", r"\b(?:CUDA|HIP) Error: out of memory at (?P<where>\S*cumem_allocator\.cpp:\d+)",
         "vLLM could not take its GPU memory back when it woke from sleep mode",
         "lower actor_rollout_ref.rollout.gpu_memory_utilization so the weights and KV cache fit beside what the "
         "trainer keeps, or raise actor_rollout_ref.rollout.tensor_model_parallel_size to spread them",
         _GH + "vllm-project/vllm/issues/13941"),
    _sig("gpu.oom",
         r"\b(?P<api>CUDA|HIP) out of memory\. Tried to allocate (?P<wanted>[\d.]+ [KMGT]?i?B)(?:\. GPU (?P<gpu>\d+) "
         r"has a total capaci?ty of (?P<total>[\d.]+ [KMGT]?i?B) of which (?P<free>[\d.]+ (?:[KMGT]i)?B|\d+ bytes) "
         r"is free)?|\b(?:CUDA|HIP) error: out of memory\b",
         "the GPU ran out of memory",
         "lower actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu (or ppo_max_token_len_per_gpu with dynamic "
         "batch size), lower actor_rollout_ref.rollout.gpu_memory_utilization to leave the trainer more, or turn on "
         "enable_gradient_checkpointing / param_offload; in TRL lower per_device_train_batch_size or "
         "vllm_gpu_memory_utilization",
         _GH + "lemonade-sdk/vllm-rocm/issues/5"),

    # /dev/shm: NCCL's buffers (before the full disk: NCCL adds "No space left on device (28)") and data loaders
    _sig("shm.nccl",
         r"NCCL WARN (?:Error: failed to extend (?P<path>/dev/shm/\S+) to (?P<bytes>\d+) bytes|Call to posix_fallocate "
         r"failed ?: No space left on device)",
         "/dev/shm is too small for NCCL/RCCL's shared-memory buffers",
         _SHM + "; remove stale /dev/shm/nccl-* files of dead runs; NCCL_SHM_DISABLE=1 avoids it at some speed",
         _GH + "pytorch/ci-infra/pull/490"),
    _sig("shm.dataloader",
         r"Unexpected bus error encountered in worker\. This might be caused by insufficient shared memory"
         r"|DataLoader worker \(pid (?P<pid>\d+)\) is killed by signal: Bus error",
         "a data-loader worker died of a bus error: /dev/shm is too small for the batches it shares",
         _SHM + ", or lower the loader's workers (data.dataloader_num_workers in verl, dataloader_num_workers in TRL)",
         _GH + "DengpanFu/LUPerson/issues/20", signal="SIGBUS"),

    # Collectives
    _sig("nccl.timeout",
         r"(?:\[Rank (?P<rank>\d+)\] )?Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=\d+, "
         r"OpType=(?P<op>\w+)(?:, \w+=\d+)*(?:, Timeout\(ms\)=(?P<timeout_ms>\d+))?.*?\) ran for (?P<ran_ms>\d+) "
         r"milliseconds before timing out",
         "a collective (NCCL/RCCL) waited past its timeout: another rank stopped or hung",
         "look at the other ranks for the first error (this rank only waited): one that died of OOM or crashed "
         "leaves the rest waiting; if all were alive, rerun with NCCL_DEBUG=INFO to see the link, or raise "
         "actor_rollout_ref.nccl_timeout (seconds) for a slow weight sync",
         _GH + "huggingface/open-r1/issues/620"),
    _sig("nccl.error",
         r"\bNCCL error(?: in: (?P<where>[^,]+),)?:? (?P<reason>unhandled cuda error|unhandled system error|internal "
         r"error|invalid usage|remote process exited or there was a network error)"
         r"|\b(?P<code>nccl(?:UnhandledCuda|System|Internal|Remote)Error)\b",
         "NCCL/RCCL failed: a GPU call inside it, the network or shared memory, or a peer",
         "rerun with NCCL_DEBUG=INFO to see the failing call: 'unhandled cuda error' is usually a GPU fault or out "
         "of memory on a rank (read that rank's log), 'unhandled system error' a network interface "
         "(NCCL_SOCKET_IFNAME) or /dev/shm, 'remote process exited' a peer that died first",
         _GH + "huggingface/trl/issues/3408"),

    # GPU faults. ROCm's runtime aborts the process after the first two (ROCm issues end in "Aborted (core dumped)").
    _sig("gpu.memory_fault",
         r"Memory access fault by GPU node-(?P<node>\d+) \(Agent handle: 0x[0-9a-f]+\) on address "
         r"(?P<address>0x[0-9a-f]+|\(nil\))\. Reason: (?P<reason>[^.]+)",
         "the GPU faulted on an address its kernel may not touch (HIP memory access fault)",
         _DEBUG_KERNEL + "; the kernel log shows the fault (dmesg | grep -i amdgpu: VM_L2_PROTECTION_FAULT); a kernel "
         "built for another gfx target or a ROCm/driver mismatch are the common causes; `node` is the KFD node",
         _GH + "ROCm/tensorflow-upstream/issues/1959", signal="SIGABRT"),
    _sig("gpu.hsa_exception",
         r"HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted in a hardware exception\.(?: code: "
         r"(?P<code>0x[0-9a-f]+))?",
         "the GPU raised a hardware exception and ROCm aborted its queue",
         _DEBUG_KERNEL + "; check the kernel log for amdgpu errors and GPU resets (dmesg | grep -i amdgpu) and that "
         "the kernels were built for this GPU's gfx target",
         _GH + "iree-org/iree/issues/17872", signal="SIGABRT"),
    _sig("gpu.illegal_address",
         r"\ban illegal memory access was encountered|\b(?:hip|cuda)ErrorIllegalAddress\b",
         "a GPU kernel accessed memory it does not own (illegal memory access)",
         _DEBUG_KERNEL + "; try another attention backend (VLLM_ATTENTION_BACKEND) or eager mode "
         "(actor_rollout_ref.rollout.enforce_eager=True) to rule out a kernel or graph-capture bug",
         _GH + "vllm-project/vllm/issues/36180"),
    _sig("gpu.wrong_arch",
         r"\binvalid device function\b|\b(?:hip|cuda)ErrorInvalidDeviceFunction\b"
         r"|\bno kernel image is available for execution on the device|\bHSA_STATUS_ERROR_INVALID_ISA\b",
         "a GPU kernel was not built for this GPU's architecture",
         "rebuild the image or extension for this GPU's target (PYTORCH_ROCM_ARCH=gfx942 for MI300X/MI325X, gfx950 "
         "for MI350X/MI355X; rocminfo | grep gfx names it; TORCH_CUDA_ARCH_LIST on NVIDIA), or install a wheel "
         "built for it",
         _GH + "pytorch/pytorch/issues/164346"),

    # Software that does not fit together
    _sig("ext.undefined_symbol", r"(?P<library>[^\s:]+\.so(?:\.\d+)*): undefined symbol: (?P<symbol>\S+)",
         "a compiled extension was built against another torch (or another C++ ABI) than the one installed",
         "reinstall the package of `library` for the installed torch (a wheel built for this torch and ROCm/CUDA, or "
         "pip install --no-build-isolation --force-reinstall from source); rocmkit's image build pins them together",
         _GH + "Dao-AILab/flash-attention/issues/1691"),
    # safetensors 0.4 said "MetadataIncompleteBuffer"/"HeaderTooLarge"; 0.7 and later spell them out
    # ("incomplete metadata, file not fully covered", "header too large"): any header error, whatever the spelling.
    _sig("weights.safetensors", r"SafetensorError: Error while deserializing header: (?P<reason>.+)",
         "a safetensors weights file is truncated or not a safetensors file", _WEIGHTS,
         _GH + "huggingface/safetensors/blob/v0.7.0/safetensors/src/tensor.rs"),
    _sig("weights.torch_zip", r"PytorchStreamReader failed reading (?:zip archive|file \S+): (?P<reason>[^.]+)",
         "a torch checkpoint (.pt, .bin) is truncated or corrupt", _WEIGHTS,
         _GH + "pytorch/pytorch/pull/170244"),

    # Storage and descriptors
    _sig("ray.object_store_full", r"\bObjectStoreFullError\b",
         "Ray's object store is full",
         "move less data through Ray objects (smaller batches), give Ray more object store memory "
         "(ray start --object-store-memory; it lives in /dev/shm, so " + _SHM + ")",
         _GH + "ray-project/ray/issues/15016"),
    _sig("disk.full", r"No space left on device|\[Errno 28\]|\bOutOfDiskError\b|\bStorageFull\b",
         "a disk is full",
         "free space where the run writes: checkpoints (trainer.default_local_dir, TRL's output_dir), Ray's spill "
         "files and logs (/tmp/ray, or ray start --temp-dir elsewhere), the Hugging Face cache (HF_HOME); Ray fails "
         "tasks above 95 % disk use",
         _GH + "ray-project/ray/issues/49173"),
    _sig("host.open_files", r"\[Errno 24\] Too many open files",
         "a process ran out of file descriptors",
         "raise the limit (ulimit -n 65536 in the job's shell, docker run --ulimit nofile=65536:65536), or lower "
         "the data-loader workers",
         _GH + "verl-project/verl/issues/3642"),

    # The data file. A KeyError only for 'prompt', the key both verl (data.prompt_key's default) and TRL read: any
    # other KeyError says nothing about the data. datasets' own messages name the column, whichever it is.
    _sig("data.no_prompt", r"\bKeyError: '(?P<column>prompt)'",
         "the data file has no 'prompt' column, the one the trainer reads its prompts from",
         "verl reads data.prompt_key (default 'prompt', a list of chat messages) and TRL's GRPOTrainer reads "
         "'prompt': rename the column in the parquet file or dataset, or point data.prompt_key at the column you have",
         _GH + "verl-project/verl/blob/v0.9.0/verl/utils/dataset/rl_dataset.py"),
    _sig("data.missing_column",
         r"\b[Cc]olumns?(?: name| to remove)? \[?'?(?P<column>[^'\]\s,]+)'?(?:,[^\]]*)?\]? (?:not in the dataset"
         r"|doesn't exist)",
         "the data file lacks a column the trainer or its data preparation reads",
         "rename the column in the parquet file or dataset to the name the trainer expects, or configure the name "
         "you have (verl: data.prompt_key; TRL: the dataset's 'prompt' column)",
         _GH + "huggingface/datasets/blob/5.0.1/src/datasets/arrow_dataset.py"),
    # verl counts a sample it cannot tokenize as too long, so a missing column also empties the data
    _sig("data.all_filtered", r"\bfilter dataset len: 0$",
         "verl filtered out every prompt: none was both readable and short enough",
         "raise data.max_prompt_length, or fix the data: the traceback after 'Error processing one of the samples' "
         "says why a sample could not be read (a missing data.prompt_key column, a prompt that is not a list of "
         "chat messages)",
         _GH + "verl-project/verl/blob/v0.9.0/verl/utils/dataset/rl_dataset.py"),

    # Processes that died of a signal: Python's faulthandler, Ray's signal handler, the shell's job report
    # ("bash: line 1: 28707 Segmentation fault      cmd", the signal's name padded to a column).
    _sig("process.segfault", r"(?:\b(?P<pid>\d+) )?Segmentation fault\b|\*\*\* SIGSEGV received at time=",
         "a process crashed with a segmentation fault",
         "the stack printed after the line names the library: a compiled extension built for another torch or "
         "ROCm/CUDA version (rebuild it) or a driver/runtime mismatch are the usual causes; ulimit -c unlimited "
         "keeps a core dump for the full stack",
         _GH + "vllm-project/vllm/issues/6783", signal="SIGSEGV"),
    _sig("process.abort", r"Fatal Python error: Aborted|\bAborted +\(core dumped\)|\b(?P<pid>\d+) Aborted {2,}",
         "a process aborted (SIGABRT)",
         "read the lines before it for why: an uncaught C++ exception ('terminate called after throwing'), a failed "
         "assertion, or a HIP/CUDA runtime abort; fix that cause",
         _GH + "tenstorrent/tt-forge-onnx/issues/2940", signal="SIGABRT"),
    _sig("process.bus_error",
         r"Fatal Python error: Bus error|\b(?P<pid>\d+) Bus error {2,}|\bBus error \(core dumped\)",
         "a process died of a bus error (SIGBUS), most often /dev/shm too small for the shared memory it mapped",
         _SHM + "; a bus error on a mapped file can also mean the file shrank or its disk is full",
         _GH + "python/cpython/issues/114389", signal="SIGBUS"),
    _sig("process.killed", r"^Killed$|\b(?P<pid>\d+) Killed {2,}",
         "a process was killed with SIGKILL (the kernel's OOM killer, most often)",
         "look for the pid in the kernel log (dmesg | grep -i 'killed process'): found, " + _HOST_MEMORY + "; not "
         "found, a scheduler's limit stopped it (Slurm's time or memory limit, a Kubernetes pod limit)",
         _GH + "xk-huang/yet-another-vectornet/issues/37", signal="SIGKILL"),

    # Wrappers that name no cause. Ray prints ActorDiedError's fields one to a line, so the dead actor's class and pid
    # come on the lines after the exception (only indented, and only whole, to keep other "pid: " text out).
    _sig("ray.actor_died",
         r"\b(?:ActorDiedError|RayActorError)\b|The actor died unexpectedly before finishing this task",
         "a Ray actor died (a wrapper: its class and pid follow, the cause is in its worker's log)",
         "read the exit detail a few lines below and the worker's log (/tmp/ray/session_latest/logs/worker-*-<pid>.*)",
         _GH + "verl-project/verl/issues/4921", wrapper=True),
    _sig("ray.actor_died_detail",
         r"^(?:\([^()]*pid=\d+[^()]*\) )?\s+(?:class_name: (?P<actor>\S+)|pid: (?P<pid>\d+))\s*$",
         "the dead Ray actor's class or pid (a line of ActorDiedError)",
         "match `pid` against the kernel log's 'Killed process <pid>' and the worker's log",
         _GH + "verl-project/verl/issues/4921", wrapper=True),
    # An empty "Failed core proc(s): {}" means the engine process left no exit code: it died of a signal.
    _sig("vllm.engine_start_failed",
         r"Engine core initialization failed\. See root cause above\.(?: Failed core proc\(s\): "
         r"(?P<failed>\{[^}]*\}))?|\bEngineCore failed to start\.",
         "vLLM's engine failed to start (the cause is the exception above)",
         "read the last exception of the EngineCore before this line; an empty 'Failed core proc(s): {}' means the "
         "engine process was killed by a signal: check the kernel log",
         _GH + "vllm-project/vllm/issues/23176", wrapper=True),
    _sig("vllm.engine_dead", r"\bEngineDeadError\b",
         "vLLM's engine died (the cause is in the EngineCore's stack trace above)",
         "read the EngineCore's last exception before this line",
         _GH + "vllm-project/vllm/issues/42362", wrapper=True),
    # SGLang 0.5.12's own words (python/sglang/srt/managers/tokenizer_manager.py, SignalHandler; entrypoints/engine.py):
    # a child told its parent it failed; the cause is the child's line before it
    _sig("sglang.child_failed", r"SIGQUIT received\. .*It usually means one child failed|Received sigquit from a "
         r"child process\. It usually means the child failed",
         "SGLang's server was told that one of its processes failed (the cause is that process's line above)",
         "read the scheduler's or detokenizer's last lines above this one",
         _GH + "sgl-project/sglang/blob/v0.5.12/python/sglang/srt/managers/tokenizer_manager.py", wrapper=True),
    _sig("vllm.engine_core_died", r"\bEngine core proc (?P<proc>\S+) died unexpectedly",
         "vLLM's engine process died (the cause is above, or it was killed)",
         "read the engine process's last lines above; without an exception there, look for its pid in the kernel "
         "log (OOM killer)",
         _GH + "vllm-project/vllm/issues/32468", wrapper=True),
)


# ---- the fatal lines ----
# The watchdog's stop rule (watchdog.py) asks a coarser question than the signatures above: not what happened and
# what to do, but whether a line is one only a dead run prints. Both lists describe how runs fail, so they live in
# this one catalogue.
# Fatal lines, each with a stable id. A Python traceback alone is not one (Ray and vLLM log handled ones); the
# exception line a dead process ends with is.
FATAL = tuple((name, re.compile(rx)) for name, rx in (
    ("vllm.worker_failed", r"Worker failed with error|EngineDeadError|EngineCore encountered a fatal error"
                           r"|Engine core initialization failed"),
    ("ray.task_error", r"\bRayTaskError\b|\bRayActorError\b|ActorDiedError|The actor died|"
                       r"actor died unexpectedly|Worker exit type: (?:SYSTEM_ERROR|INTENDED_SYSTEM_EXIT)"),
    ("gpu.error", r"\b(?:CUDA|HIP|hip) error\b|\bhipError\w+|\bcudaError\w+|invalid device function|"
                  r"torch\.(?:cuda\.)?OutOfMemoryError|CUDA out of memory|HIP out of memory|NCCL error|RCCL error"),
    ("process.crash", r"Fatal Python error|Segmentation fault|\bSIGSEGV\b|\bSIGBUS\b|core dumped"),
    # Ray's autoscaler monitor, every 35 s, for a task or actor no node of the cluster can ever hold: certify's
    # Ray is a local instance of fixed size, so the request never runs and the job waits for it forever
    ("ray.infeasible", r"No available node types can fulfill resource request"),
    # the last line of an unhandled exception's traceback (counted only after a traceback, see Watch.line); the
    # builtins not named *Error: StopIteration is what vLLM's engine raised for verl's empty LoRA adapter
    ("python.exception", r"(?:^|[\])] )(?:[\w.]+\.)?(?:[A-Z]\w*(?:Error|Exception)|StopIteration|StopAsyncIteration)"
                         r"(?::|$)"),
))


def fatal_pattern(line: str) -> str | None:
    for name, rx in FATAL:
        if rx.search(line):
            return name
    return None


def match(line: str, extra: tuple[Signature, ...] = ()) -> Signature | None:
    """The first signature of `extra` + SIGNATURES found in `line` (wrappers included: the caller checks
    .wrapper), or None."""
    for sig in (*extra, *SIGNATURES):
        if sig.pattern.search(line):
            return sig
    return None


def field(line: str, sig: Signature) -> dict[str, str]:
    """The named groups `sig` captured in `line` (pid, gpu, free, wanted, ...); {} when it does not match."""
    m = sig.pattern.search(line)
    return {k: v for k, v in m.groupdict().items() if v is not None} if m else {}
