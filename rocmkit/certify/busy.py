"""A GPU that another process holds, refused before any engine starts. The most common "it worked yesterday" on a
shared node is a dead job's leftover vLLM engine or a notebook holding most of a GPU: vLLM finds out only after
minutes of Ray, trainer and worker start-up ("Free memory on device cuda:0 (8.91/139.8 GiB) on startup is less
than desired GPU memory utilization"). certify's setup reads each GPU's free memory as the driver sees it
(setup.gpu_memory) and stops when it is below what the engine says the run needs there (the engine's
gpu_need); this module words the refusal, naming the processes that hold the memory (host/facts/gpu_holders.py:
the KFD, DRM fdinfo or nvidia-smi). Pure but for `read_holders`."""

from __future__ import annotations

GIB = 1 << 30


def _gib(n: float) -> str:
    return f"{n / GIB:.1f} GiB"


def problem(memory: list[dict], need: list[dict], holders: list, exclude_pids=()) -> tuple[str, str] | None:
    """(message, hint) when a GPU has less free memory than the run needs on it, else None. `holders`:
    gpu_holders.Holder of this host, keyed by PCI address in their `memory`."""
    from ..host.facts.gpu_holders import describe

    from .intarget.setup import short_of_memory

    low = set(short_of_memory(memory, need))
    short = [(m, n) for m, n in zip(memory, need) if m["index"] in low]
    if not short:
        return None
    parts, pids = [], []
    for m, n in short:
        wanted = n["share"] * m["total"] + n["bytes"]
        on_it = [h for h in holders if h.pid not in exclude_pids and (m.get("pci") in h.memory or not m.get("pci"))]
        pids += [h.pid for h in on_it]
        held = ("; held by " + "; ".join(describe(h, m.get("pci")) for h in on_it[:4])) if on_it else (
            "; no process holding it could be read here (in a container, or another user's: `amd-smi process` or "
            "`nvidia-smi` on the host names them)")
        parts.append(f"GPU {m['index']} ({m['name']}): {_gib(m['free'])} free of {_gib(m['total'])}, this run needs "
                     f"{_gib(wanted)} there ({n['who']}){held}")
    stop = f"stop it if it is a leftover (`kill {' '.join(map(str, sorted(set(pids))))}`), or " if pids else ""
    return ("a GPU this run needs is busy: " + " | ".join(parts),
            f"nothing was started; {stop}give the run free GPUs (HIP_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES); "
            "`rocmkit doctor --only gpu.busy` lists every process holding GPU memory")


def read_holders() -> list:
    """The processes holding GPU memory on this host, read live (never raises: a host where nothing is readable
    has none to name)."""
    from ..host.facts.gpu_holders import holders
    from ..host.facts.reader import Reader

    try:
        found, _ = holders(Reader("/", live=True))
        return found
    except Exception:  # noqa: BLE001 - naming the holders is extra; the refusal stands without it
        return []
