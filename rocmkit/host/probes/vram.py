"""`probe.vram_release`: does memory that a rollout engine frees between phases really come back?

Colocated GRPO puts the rollout engine to sleep while the trainer runs (vLLM sleep mode, SGLang through
torch_memory_saver): the engine unmaps its KV cache and weights, keeps the virtual range, and maps fresh
pages at the next wake. On some ROCm releases the unmap keeps the physical pages, so free memory never comes
back and the job dies of OOM at the first (or second) wake (vllm-project/vllm#37533, #46203;
radixark/miles#1474; fzyzcjy/torch_memory_saver#65).

The probe does the same in a fresh process (the allocator reads its config once, at the first allocation):
with PyTorch's expandable segments (PYTORCH_CUDA_ALLOC_CONF, and PYTORCH_HIP_ALLOC_CONF which ROCm builds
read), take SHARE of the free memory in CHUNK-sized tensors the way an engine lays out its KV cache, touch
it, free it, empty the cache and read free memory again; CYCLES times. Then, when torch_memory_saver is
importable, its region()/pause()/resume() (with the default allocator: it refuses expandable segments), memory
taken once and paused/resumed CYCLES times, resume being the engine's wake.

    measure_vram(index) -> plain dict (figures document's "vram_release")
    judge_vram(doc) -> Finding                    pure: tested on recorded documents
    python -m rocmkit.host.probes.vram ARGS.json  the worker (one mode, one GPU)
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from typing import Any

from ..model import Finding, Status
from .verdict import AREA

SHARE = 0.65  # of the free memory: an engine's gpu_memory_utilization share, leaving room for the context
CYCLES = 3  # the bug can show at the second wake
CHUNK = 1 << 30  # bytes per tensor, like one layer's KV cache block
PASS_AT = 0.95  # of what was taken must come back
WARN_AT = 0.80  # between: something else (another process) may have moved free memory
MIN_TAKEN = 1 << 30  # below this the figure says nothing
ALLOC_CONF = "expandable_segments:True"
TIMEOUT_S = 180.0
GiB = 1 << 30

FIX = ("released device memory did not come back: the driver/runtime keeps the physical pages of unmapped "
       "virtual memory, so a colocated rollout engine OOMs at its next wake. Upgrade ROCm and the amdgpu driver "
       "past the affected release (vllm-project/vllm#37533, #46203; fzyzcjy/torch_memory_saver#65); until then "
       "run the rollout engine without sleep mode (vLLM enable_sleep_mode=False; verl "
       "actor_rollout_ref.rollout.free_cache_engine=False) with a gpu_memory_utilization that lets trainer and "
       "engine fit at once, and check that no other process holds the GPU (`amd-smi process`, `nvidia-smi`)")
REFERENCE = ("https://github.com/vllm-project/vllm/issues/37533; https://github.com/vllm-project/vllm/issues/46203; "
             "https://github.com/radixark/miles/issues/1474; https://github.com/fzyzcjy/torch_memory_saver/issues/65")


# --- measuring: a fresh process per mode ----------------------------------------------------------------------

def measure_vram(index: int, *, share: float = SHARE, cycles: int = CYCLES, timeout_s: float = TIMEOUT_S) -> dict[str, Any]:
    """Run the worker for each mode on torch GPU `index`; a mode that cannot run says why."""
    from ...runtime import proc

    conf_vars = ("PYTORCH_CUDA_ALLOC_CONF", "PYTORCH_HIP_ALLOC_CONF")
    doc: dict[str, Any] = {"available": True, "gpu": index, "share": share, "cycles": cycles, "chunk_bytes": CHUNK,
                           "alloc_conf": {k: ALLOC_CONF for k in conf_vars}, "modes": {}}
    started = time.perf_counter()
    for mode in ("torch", "torch_memory_saver"):
        env = {k: v for k, v in os.environ.items() if k not in conf_vars}
        if mode == "torch":
            env.update(doc["alloc_conf"])
        # torch_memory_saver maps its own pages and refuses to run beside expandable segments ("disabled for the
        # current process because expandable_segments is not supported yet", seen with 0.0.10): SGLang runs it
        # with the default allocator, and so does this mode.
        with tempfile.TemporaryDirectory(prefix="rocmkit-vram-") as tmp:
            args, result = os.path.join(tmp, "args.json"), os.path.join(tmp, "result.json")
            with open(args, "w") as f:
                json.dump({"index": index, "share": share, "cycles": cycles, "mode": mode, "result": result}, f)
            run = proc.capture([sys.executable, "-m", "rocmkit.host.probes.vram", args], env=env, timeout=timeout_s)
            if os.path.exists(result):
                with open(result) as f:
                    doc["modes"][mode] = json.load(f)
                doc["modes"][mode]["alloc_conf"] = {k: env[k] for k in conf_vars if k in env}
            else:
                said = [ln.strip() for ln in run.tail if ln.strip()]
                why = (f"did not finish within {timeout_s:.0f} s" if run.timed_out else
                       f"worker exited {run.returncode}: {said[-1][:300] if said else 'no output'}")
                doc["modes"][mode] = {"error": why, "cycles": []}
    doc["seconds"] = round(time.perf_counter() - started, 2)
    return doc


def _worker(args: dict[str, Any]) -> dict[str, Any]:
    import torch

    out: dict[str, Any] = {"mode": args["mode"], "cycles": []}
    if args["mode"] == "torch_memory_saver":
        try:
            import torch_memory_saver
        except ImportError:
            return {**out, "skipped": "torch_memory_saver is not installed"}
        out["version"] = getattr(torch_memory_saver, "__version__", None) or _dist_version("torch-memory-saver")
        saver = torch_memory_saver.TorchMemorySaver()
        saver.hook_mode = "torch"  # a pluggable allocator in-process: no LD_PRELOAD needed
    else:
        saver = None
    index = int(args["index"])
    torch.cuda.set_device(index)
    torch.cuda.init()
    torch.empty(1, device="cuda")  # the context's own memory is taken before the first reading
    total = torch.cuda.mem_get_info()[1]
    out["total"] = total
    if saver is not None:
        _tms_cycles(torch, saver, float(args["share"]), int(args["cycles"]), out)
        return out
    for k in range(int(args["cycles"])):
        try:
            out["cycles"].append(_cycle(torch, float(args["share"])))
        except Exception as exc:  # noqa: BLE001 - an OOM after a release is the finding, not a crash
            out["error"] = f"cycle {k + 1}: {_error(exc)}"
            break
    return out


def _allocate(torch, want: int) -> list:
    """`want` bytes in CHUNK-sized tensors (at most 16 of them for small GPUs), each touched so its pages exist."""
    chunk = max(1 << 20, min(CHUNK, want // 16))
    tensors, left = [], want
    while left > 0:
        n = min(chunk, left)
        tensors.append(torch.empty(n, dtype=torch.uint8, device="cuda").fill_(1))
        left -= n
    torch.cuda.synchronize()
    return tensors


def _free() -> int:
    import torch

    torch.cuda.synchronize()
    return torch.cuda.mem_get_info()[0]


def _row(before: int, held: int, after: int, t0: float, **more) -> dict[str, Any]:
    taken, returned = before - held, after - held
    return {"free_before": before, "free_held": held, "free_after": after, **more, "taken": taken,
            "returned": returned, "ratio": round(returned / taken, 4) if taken > 0 else None,
            "seconds": round(time.perf_counter() - t0, 3)}


def _cycle(torch, share: float) -> dict[str, Any]:
    """Allocate, free, empty the cache: expandable segments unmap and release their physical handles here."""
    t0 = time.perf_counter()
    before = _free()
    tensors = _allocate(torch, int(before * share))
    held = _free()
    tensors.clear()
    torch.cuda.empty_cache()
    return _row(before, held, _free(), t0)


def _tms_cycles(torch, saver, share: float, cycles: int, out: dict[str, Any]) -> None:
    """An engine's life: allocate once inside region(), then sleep (pause: the physical pages go, the virtual
    range stays) and wake (resume: fresh pages behind the same addresses, touched) `cycles` times."""
    before = _free()
    with saver.region():
        tensors = _allocate(torch, int(before * share))
    for k in range(cycles):
        t0 = time.perf_counter()
        try:
            held = _free()
            saver.pause()
            paused = _free()
            saver.resume()
            for t in tensors:
                t.fill_(2)
            out["cycles"].append(_row(before, held, paused, t0, free_woken=_free()))
        except Exception as exc:  # noqa: BLE001 - an OOM at the wake is the finding, not a crash
            out["error"] = f"cycle {k + 1}: {_error(exc)}"
            return


def _error(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300] if text else ''}"


def _dist_version(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


# --- judging: pure ----------------------------------------------------------------------------------------------

LABELS = {"torch": "expandable segments", "torch_memory_saver": "torch_memory_saver pause/resume"}


def _gib(n: float) -> str:
    return f"{n / GiB:.1f} GiB"


def _judge_mode(mode: str, m: dict[str, Any]) -> tuple[Status, str]:
    label = LABELS.get(mode, mode)
    if m.get("skipped"):
        return Status.SKIP, f"{label}: {m['skipped']}"
    cycles = [c for c in m.get("cycles") or [] if isinstance(c, dict)]
    if m.get("error") and not cycles:
        return Status.FAIL, f"{label}: {m['error']}"
    if not cycles:
        return Status.SKIP, f"{label}: not measured"
    small = [c for c in cycles if (c.get("taken") or 0) < MIN_TAKEN or c.get("ratio") is None]
    if small:
        return Status.SKIP, (f"{label}: cycle {cycles.index(small[0]) + 1} took only "
                             f"{_gib(max(small[0].get('taken') or 0, 0))}, too little to judge")
    worst = min(cycles, key=lambda c: c["ratio"])
    k = cycles.index(worst) + 1
    ratio = worst.get("ratio") or 0.0
    if m.get("error"):  # e.g. an OOM at the second wake: the bug itself
        return Status.FAIL, (f"{label}: {m['error']} (after {len(cycles)} cycle(s); worst returned "
                             f"{ratio:.0%} of {_gib(worst['taken'])})")
    status = Status.PASS if ratio >= PASS_AT else Status.WARN if ratio >= WARN_AT else Status.FAIL
    if status is Status.PASS:
        lo = min(c["ratio"] for c in cycles)
        return status, f"{label}: {len(cycles)} cycles of {_gib(worst['taken'])}, ≥ {lo:.0%} came back each time"
    return status, (f"{label}: cycle {k} of {len(cycles)} got {_gib(max(worst.get('returned') or 0, 0))} of "
                    f"{_gib(worst['taken'])} back ({ratio:.0%}, healthy ≥ {PASS_AT:.0%})")


def judge_vram(doc: dict[str, Any] | None, context: dict[str, Any] | None = None) -> Finding:
    fid, label = "probe.vram_release", "VRAM release after free (sleep/wake)"
    if not doc:
        return Finding(fid, AREA, Status.SKIP, f"{label}: not measured")
    if not doc.get("available", True):
        return Finding(fid, AREA, Status.SKIP, f"{label}: {doc.get('reason', 'not measured')}",
                       {"reason": doc.get("reason")})
    modes = doc.get("modes") or {}
    verdicts = {mode: _judge_mode(mode, m if isinstance(m, dict) else {}) for mode, m in modes.items()}
    order = {Status.FAIL: 0, Status.WARN: 1, Status.PASS: 2, Status.SKIP: 3}
    judged = sorted(verdicts.values(), key=lambda v: order[v[0]])
    status = next((s for s, _ in judged if s is not Status.SKIP), Status.SKIP)
    title = f"{label} on GPU {doc.get('gpu')}: " + "; ".join(t for _, t in judged) if judged else f"{label}: no mode ran"
    evidence = {"gpu": doc.get("gpu"), "alloc_conf": doc.get("alloc_conf"), "share": doc.get("share"),
                "pass_at": PASS_AT, "fail_below": WARN_AT, "modes": modes,
                "verdicts": {m: s.value for m, (s, _) in verdicts.items()}, **(context or {})}
    flagged = status in (Status.WARN, Status.FAIL)
    return Finding(fid, AREA, status, title, evidence, FIX if flagged else None, REFERENCE)


def main(argv: list[str]) -> int:
    with open(argv[0]) as f:
        args = json.load(f)
    out = _worker(args)
    with open(args["result"] + ".tmp", "w") as f:
        json.dump(out, f)
    os.replace(args["result"] + ".tmp", args["result"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
