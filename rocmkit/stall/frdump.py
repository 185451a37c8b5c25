"""The flight recorder's dump on request, inside each process of a job: with ROCMKIT_FR_DIR set, importing this
module starts a daemon thread that polls DIR/request (rocmkit/stall/flightrec.py touches it when the stall report
is taken) and, in a process where torch.distributed is initialized, writes torch's own dump of its collectives
to DIR/fr-pid<PID>-rank<RANK>.pkl.

Why a thread and not a signal: a rank waiting in a collective sits in C++ (Work::wait, with the GIL released),
where a Python signal handler would never run, but another Python thread does. A process whose native call
holds the GIL cannot answer, and its missing dump is itself the evidence.

certify's verl engine adds it to VERL_USE_EXTERNAL_MODULES (verl imports those in every process of the run) and
turns the recorder on (TORCH_FR_BUFFER_SIZE, TORCH_NCCL_TRACE_BUFFER_SIZE); tests/stall_ranks.py imports it."""

from __future__ import annotations

import os
import sys
import threading
import time
from pathlib import Path

VAR = "ROCMKIT_FR_DIR"
OWN_THREAD = "rocmkit-fr-dump"  # waits.py leaves this thread out of what a process waits in
POLL_S = 0.5
BUFFER = "2000"  # entries kept per process (torch's default size when on; a few hundred KiB)


def environment(folder: Path, current: dict[str, str], create: bool = True) -> dict[str, str]:
    """What a job's processes need for their records: the recorder on (gloo's and NCCL's/RCCL's names), NCCL's own
    dump when its watchdog times out (into `folder`, named ...-rank<N> by torch), and this module's folder. A value
    the user set already (`current`) is left as it is. Creates `folder` (unless `create` is False: a record of it)."""
    if create:
        folder.mkdir(parents=True, exist_ok=True)
    env = {"TORCH_FR_BUFFER_SIZE": BUFFER, "TORCH_NCCL_TRACE_BUFFER_SIZE": BUFFER, "TORCH_NCCL_DUMP_ON_TIMEOUT": "1",
           "TORCH_FR_DUMP_TEMP_FILE": str(folder / "timeout-rank"),
           "TORCH_NCCL_DEBUG_INFO_TEMP_FILE": str(folder / "timeout-rank")}
    return {**{k: v for k, v in env.items() if k not in current}, VAR: str(folder)}


def dump_now(folder: Path) -> Path | None:
    """This process's record, if it is a rank of an initialized torch.distributed job and its torch keeps one."""
    dist = sys.modules.get("torch.distributed")  # never import torch into a process that has not
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return None
    from torch._C import _distributed_c10d as c10d

    # NCCL's record lives beside the generic one (CUDA builds); gloo's is the generic one
    data = None
    for fn in ("_dump_nccl_trace", "_dump_fr_trace"):
        if hasattr(c10d, fn):
            try:
                data = getattr(c10d, fn)()
            except Exception:  # noqa: BLE001 - no recorder for this backend: try the next
                continue
            if data:
                break
    if not data:
        return None
    path = folder / f"fr-pid{os.getpid()}-rank{dist.get_rank()}.pkl"
    tmp = path.with_suffix(".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return path


def _warm_up() -> bool:
    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return False
    try:
        from torch._C import _distributed_c10d as c10d

        getattr(c10d, "_dump_fr_trace", lambda: None)()
    except Exception:  # noqa: BLE001
        pass
    return True


def _watch(folder: Path) -> None:
    request = folder / "request"
    seen = request.stat().st_mtime if request.exists() else 0.0
    warm = False
    while True:
        time.sleep(POLL_S)
        if not warm:  # the first dump imports much of torch.distributed (seconds on a busy host): not at a stall
            warm = _warm_up()
        try:
            asked = request.stat().st_mtime
        except OSError:
            continue
        if asked > seen:
            seen = asked
            try:
                dump_now(folder)
            except Exception:  # noqa: BLE001 - a failed dump must never hurt the job
                pass


def start(folder: str) -> None:
    threading.Thread(target=_watch, args=(Path(folder),), name=OWN_THREAD, daemon=True).start()


if os.environ.get(VAR) and not globals().get("_started"):
    _started = True
    start(os.environ[VAR])
    # a forked child (vLLM's workers may be) has no thread of its parent's: it gets its own
    os.register_at_fork(after_in_child=lambda: start(os.environ[VAR]) if os.environ.get(VAR) else None)
