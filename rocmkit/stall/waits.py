"""What a thread waits in, read from its stack (py-spy's frames, innermost first), and what a process does: the
role its command line names. Pure: tested on stacks py-spy took of real hung processes.

A stack often matches several kinds (an all_reduce ends in pthread_cond_wait): the most specific kind wins,
in the order of WAITS, and `at` is the frame that matched it."""

from __future__ import annotations

import re
from typing import NamedTuple

# (kind, what a reader is told, regex over "name (file)" of a frame). The order is the priority.
WAITS = tuple((kind, text, re.compile(rx)) for kind, text, rx in (
    ("stream sync", "a GPU stream/device synchronize",
     # a device-to-host copy (.item(), .tolist(), .cpu()) waits for the stream as a synchronize does
     r"(?:cuda|hip|cu)(?:Stream|Device|Event|Ctx)Synchronize|^synchronize \(.*torch/cuda/|_local_scalar_dense|"
     r"^(?:cuda|hip|cu)Memcpy(?:DtoH|Async)?\w* \("),
    ("collective", "a collective (torch.distributed / NCCL / RCCL / gloo)",
     r"^(?:c10d::|gloo::|nccl|rccl)|ProcessGroup|torch/distributed/distributed_c10d\.py|"
     r"^(?:all_reduce|all_gather\w*|reduce_scatter\w*|all_to_all\w*|broadcast|barrier|monitored_barrier) \("),
    ("ray get", "ray.get: a Ray task or actor's result",
     r"^(?:get|get_objects|wait) \(.*ray/_private/worker\.py"),
    ("queue get", "a queue get (a message from another process)",
     r"^get \(.*(?:queue|queues)\.py|shm_broadcast\.py|^dequeue \(|^acquire_read \("),
    ("socket read", "a socket read (an HTTP/ZMQ/TCP peer's answer)",
     r"^(?:recv|recv_into|recvfrom|recv_multipart|readinto|_read_status|getresponse) \(|zmq/|"
     r"^(?:__libc_recv|recv|recvfrom|recvmsg) \(libc"),
    ("lock", "a lock or condition",
     r"^(?:\w+\.)?(?:acquire|wait|_wait_for_tstate_lock) \(.*threading\.py|^(?:pthread_cond_\w*wait|sem_wait|"
     r"__lll_lock_wait|futex_wait\w*|__futex_abstimed_wait\w*) \("),
    ("subprocess", "a child process's exit", r"^(?:wait|_wait|communicate) \(.*subprocess\.py|^waitpid \("),
    ("poll", "an idle event loop (select/poll)",
     r"^(?:select|poll|epoll_wait|_run_once) \(|selectors\.py|select_poll_poll"),
    ("sleep", "a sleep", r"^(?:sleep|time_sleep|clock_nanosleep|nanosleep) \("),
))
KIND_TEXT = {kind: text for kind, text, _ in WAITS}
# What a process waiting in these says about someone else: it waits for another process's answer.
BLOCKED = {"stream sync", "collective", "ray get", "queue get", "socket read", "lock"}


OWN_THREAD = "rocmkit-fr-dump"
# the frames of Ray's function manager that run a task or an actor method (ray/_private/function_manager.py)
RAY_TASK = ("actor_method_executor", "function_executor")


class Wait(NamedTuple):
    kind: str  # one of WAITS' kinds, "running" or "unknown"
    at: str  # the frame that says so ("all_reduce (torch/distributed/distributed_c10d.py:3252)")
    caller: str  # the innermost frame of the program's own code, outside Python's and the libraries' files


def frame_text(f: dict) -> str:
    """A py-spy frame as "name (file:line)"; native frames have no line."""
    where = f.get("short_filename") or f.get("filename") or "?"
    return f"{f.get('name', '?')} ({where}:{f['line']})" if f.get("line") else f"{f.get('name', '?')} ({where})"


_LIBRARY = re.compile(r"site-packages/|dist-packages/|/lib/python3\.\d+/|^<|\.so(?:\.[\d.]+)?\)?$|libc|libpython")


def _own_code(frames: list[dict]) -> str:
    for f in frames:
        path = f.get("filename") or ""  # a Python file: native frames can have lines too (callproc.c:943)
        if f.get("line") and path.endswith(".py") and not _LIBRARY.search(path):
            return frame_text(f)
    return ""


def thread_wait(frames: list[dict], active: bool) -> Wait:
    """What one thread waits in (frames innermost first, as py-spy gives them)."""
    texts = [frame_text(f) for f in frames]
    match_texts = [f"{f.get('name', '')} ({f.get('filename') or ''})" for f in frames]
    best: tuple[int, str, str] | None = None
    for i, (kind, _, rx) in enumerate(WAITS):
        hits = [(f, shown) for f, text, shown in zip(frames, match_texts, texts) if rx.search(text)]
        if hits:  # the innermost Python frame of that kind reads best ("all_reduce (…distributed_c10d.py:3252)")
            best = (i, kind, next((shown for f, shown in hits if f.get("line")), hits[0][1]))
            break
    caller = _own_code(frames)
    if best:  # py-spy may call a thread in epoll_wait active: the frame says more than the flag
        return Wait(best[1], best[2], caller)
    if active:
        return Wait("running", texts[0] if texts else "", caller)
    return Wait("unknown", texts[0] if texts else "", caller)


def process_wait(threads: list[dict]) -> tuple[Wait, str]:
    """The process's most telling wait over its threads (py-spy's thread dicts), and that thread's name: a
    blocked wait of any thread before the main thread's idle loop (Ray runs actor methods in threads of its own)."""
    # rocmkit's own flight-recorder dumper (frdump.py) waits by design: it says nothing of the process
    threads = [t for t in threads if t.get("thread_name") != OWN_THREAD] or threads
    if not threads:
        return Wait("unknown", "", ""), ""
    order = {kind: i for i, (kind, _, _) in enumerate(WAITS)}
    scored = []
    for t in threads:
        w = thread_wait(t.get("frames") or [], bool(t.get("active")))
        # The thread running a Ray task first, whatever it waits in: an actor method runs in a thread of Ray's own,
        # beside Ray's C++ threads and monitor threads that wait in the same condition by design, and it is where
        # the job is (also when it sits in a native call the kinds do not name). Then, among equal waits, the main
        # thread, then the deepest Python stack.
        frames = t.get("frames") or []
        task = any((f.get("name") or "").rsplit(".", 1)[-1] in RAY_TASK for f in frames)
        depth = sum(1 for f in frames if (f.get("filename") or "").endswith(".py"))
        rank = (0 if task else 1, 0 if w.kind in BLOCKED else 1 if w.kind == "running" else 2,
                order.get(w.kind, len(order)), 0 if t.get("thread_name") == "MainThread" else 1, -depth)
        scored.append((rank, w, t.get("thread_name") or str(t.get("thread_id"))))
    scored.sort(key=lambda x: x[0])
    _, wait, name = scored[0]
    return wait, name


# ---- roles, from a command line (Ray and vLLM rename their processes: "ray::WorkerDict", "VLLM::EngineCore")

ROLES = tuple((re.compile(rx), role) for rx, role in (
    (r"^ray::IDLE", "Ray idle worker"),
    # a named actor's title carries its name first ("ray::sglang_server_0_0:SGLangHttpServer.__init__") until its
    # first method: the class is the role either way
    (r"^ray::(?:\S*:)?(\w+)", r"Ray actor \1"),
    (r"^\S*/raylet(?:\s|$)", "Ray raylet"),  # the program itself, not a worker's --raylet-name=.../raylet
    (r"^\S*/gcs_server(?:\s|$)", "Ray GCS"),
    (r"ray/_private/workers/default_worker\.py", "Ray worker (starting)"),  # before Ray names it ray::...
    (r"ray/dashboard/|ray/_private/(?:log_monitor|monitor)\.py|ray/autoscaler/|runtime_env/agent", "Ray daemon"),
    (r"^VLLM::(\w+)", r"vLLM \1"),
    (r"^sglang::(\w+)", r"SGLang \1"),  # sglang::scheduler_TP1, sglang::detokenizer (SGLang's setproctitle)
    (r"verl\.trainer\.main_ppo|verl/trainer/main_ppo", "verl driver"),
    (r"rocmkit\.certify\.intarget\.trl_run", "TRL trainer"),
    (r"rocmkit\.certify\.intarget\.trl_launch", "TRL launcher"),
    (r"rocmkit\.certify\.intarget\.vllm_cpu_serve|trl(?:\.scripts\.vllm_serve|\.cli\.main vllm-serve| vllm-serve)", "TRL's vLLM server"),
    (r"accelerate(?:\.commands\.launch| launch)", "accelerate launcher"),
    (r"vllm(?:\.entrypoints| serve)", "vLLM server"),
    (r"multiprocessing\.resource_tracker", "resource tracker"),
    (r"multiprocessing\.spawn|multiprocessing-fork", "multiprocessing child"),
    (r"\brocmkit\b", "rocmkit"),
))
# Processes that always wait by design: they are not the job, and their waits say nothing of the hang.
INFRA = ("Ray idle worker", "Ray raylet", "Ray GCS", "Ray daemon", "resource tracker", "rocmkit")


def role(cmdline: list[str], name: str = "") -> str:
    line = " ".join(cmdline) or name
    for rx, r in ROLES:
        m = rx.search(line)
        if m:
            return m.expand(r)
    if not cmdline:
        return name or "?"
    if not re.match(r"python", cmdline[0].rsplit("/", 1)[-1]):
        return cmdline[0].rsplit("/", 1)[-1]
    if "-c" in cmdline[1:2]:
        return "python -c"  # the code itself says nothing short
    prog = next((a for a in cmdline[1:] if not a.startswith("-")), "")  # python's script, or -m's module
    return prog.rsplit("/", 1)[-1] or name or "?"
