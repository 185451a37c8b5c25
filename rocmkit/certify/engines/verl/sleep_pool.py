"""vLLM's sleep-mode memory pool against PyTorch's allocator settings: what rocmkit sets, and the check that a
target's environment does not break the pool.

How the pieces meet (read in vLLM 0.24.0, verl 0.9.1, PyTorch's c10 allocator config):
- vLLM's sleep mode allocates weights and KV cache through a pluggable allocator in a torch MemPool
  (vllm/device_allocator/cumem.py:67-77) and unmaps them at sleep (cumem.py:167-216). Expandable segments
  bypass that pool (pytorch/pytorch#147851), so vLLM switches them off while its pool is in use and back on
  after, but only when it finds `expandable_segments:True` in PYTORCH_CUDA_ALLOC_CONF (cumem.py:259-267 and
  300-301); it reads no other variable (the same name in vllm/v1/worker/gpu_worker.py:234 and
  vllm/config/vllm.py:834). vLLM before vllm-project/vllm#40812 asserted instead that the variable lacks them.
- PyTorch reads PYTORCH_ALLOC_CONF, PYTORCH_CUDA_ALLOC_CONF and, on ROCm, PYTORCH_HIP_ALLOC_CONF, and which
  wins when several are set differs between releases (2.13 takes the CUDA one first). Releases with
  pytorch/pytorch#169491 keep a pool that has its own allocator off expandable segments by themselves;
  earlier ones bypass the pool or refuse (pytorch/pytorch#148378).
- verl 0.9.1 turns expandable segments off and on around its weight sync in the trainer
  (verl/workers/engine_workers.py:768 and 827) and, only with sleep mode off, on in vLLM's server process
  (verl/workers/rollout/vllm_rollout/vllm_async_server.py:300-303).
So rocmkit puts `expandable_segments:True` (the trainer's fragmentation guard, as verl's ROCm recipes run it)
in PYTORCH_CUDA_ALLOC_CONF, the one variable both PyTorch and vLLM read, and sets no other: then vLLM knows
to keep its pool off expandable segments on every PyTorch release. The SGLang rollout gets none: its
torch_memory_saver refuses to run beside expandable segments (rocmkit/host/probes/vram.py).

The check runs in the setup, in the target, with the run's own environment: what PyTorch will use, what vLLM
will see, and a real allocation through vLLM's own pool that must land in it and come back at sleep.
"""

from __future__ import annotations

import os
import re

VLLM_VAR = "PYTORCH_CUDA_ALLOC_CONF"
VARIABLES = ("PYTORCH_ALLOC_CONF", VLLM_VAR, "PYTORCH_HIP_ALLOC_CONF")
EXPANDABLE = "expandable_segments:True"
TEST_MIB = 64  # allocated in the pool by the check: small, a multiple of the 2 MiB mapping granularity
RETURNED_AT = 0.9  # of it must come back at sleep (other processes on the GPU move free memory a little)


def environment(rollout: str, on_cpu: bool) -> dict[str, str]:
    """The allocator variables rocmkit sets for the run (the module's docstring says why these)."""
    return {VLLM_VAR: EXPANDABLE} if rollout == "vllm" and not on_cpu else {}


# ---- pure: reading vLLM's source and judging ----

def vllm_policy(source: str) -> dict:
    """What a vLLM's cumem.py does about expandable segments: where it looks (variables by name, or PyTorch's
    live settings, as later vLLM does through vllm/device_allocator/alloc_conf.py), and whether it switches them
    off around its pool ("toggles"), refuses them ("refuses") or neither ("unaware")."""
    reads = sorted(set(re.findall(r"""environ\.get\(\s*["'](PYTORCH_\w*ALLOC_CONF)["']""", source)))
    live = bool(re.search(r"current_alloc_conf\(|getAllocatorSettings", source))
    if re.search(r"""assert\s+["']expandable_segments:True["']\s+not\s+in""", source):
        policy = "refuses"
    elif "expandable_segments:False" in source or re.search(r"EXPANDABLE_SEGMENTS,\s*False", source):
        policy = "toggles"
    else:
        policy = "unaware"
    return {"reads": reads, "live": live, "policy": policy}


def judge(doc: dict) -> tuple[bool, str, str | None]:
    """(passed, detail, hint) for the check's document. Pure."""
    env, torch_conf = doc.get("variables") or {}, doc.get("torch_settings")
    vllm = doc.get("vllm") or {}
    reads = vllm.get("reads") or []
    on = EXPANDABLE in (torch_conf or "")
    seen = vllm.get("live") or any(EXPANDABLE in (env.get(v) or "") for v in reads)
    where = ", ".join(f"{k}={v}" for k, v in env.items() if v) or "no allocator variable"
    hint = (f"leave expandable segments to rocmkit ({VLLM_VAR}={EXPANDABLE}): unset "
            + " and ".join(k for k in VARIABLES if k != VLLM_VAR and env.get(k)) + " in the target's environment")
    pool = doc.get("pool") or {}
    if vllm.get("policy") == "refuses" and seen:
        return False, f"this vLLM refuses expandable segments with sleep mode, and the run sets them ({where})", \
            ("unset expandable_segments in the target's environment, or take a vLLM that switches them off around its "
             "pool itself (vllm-project/vllm#40812; 0.24.0 does)")
    if pool.get("error"):
        return False, f"vLLM's sleep-mode pool failed in the target ({where}): {pool['error']}", hint
    risk = (f"; expandable segments are on where vLLM does not look ({where}; it reads "
            f"{', '.join(reads) or 'none'}), so only PyTorch keeps its pool off them") if on and not seen else ""
    if not pool:
        return (not risk), "not measured" + risk, hint if risk else None
    took, inside, back = pool["allocated_mib"], pool["in_pool_mib"], pool["returned_mib"]
    if inside < took:
        return False, (f"of {took} MiB allocated inside vLLM's sleep-mode pool, {inside} MiB went through it: "
                       f"the rest would survive sleep ({where})") + risk, hint
    if back < RETURNED_AT * took:
        return False, (f"sleep returned {back} of {took} MiB: the driver kept the pages, so the trainer would run "
                       f"out of memory at the next wake ({where})"), \
            "run `rocmkit doctor --level 2` (probe.vram_release) and see its fix"
    return True, (f"{took} MiB through vLLM's pool, {back} MiB returned at sleep; PyTorch's settings "
                  f"{torch_conf or '(default)'}") + risk, None


# ---- in the target ----

def inspect(vllm_dir: str | None, test: bool) -> dict:
    """In the setup, after torch is imported: the variables, what PyTorch will use, vLLM's policy read from its
    source (without importing it), and with `test` an allocation through vLLM's own pool on GPU 0."""
    import torch

    doc: dict = {"variables": {k: os.environ.get(k) for k in VARIABLES}, "torch_settings": None, "vllm": None,
                 "pool": None}
    getter = getattr(torch._C, "_accelerator_getAllocatorSettings", None)  # PyTorch 2.9 and later
    doc["torch_settings"] = getter() if getter else None
    cumem = os.path.join(vllm_dir, "device_allocator", "cumem.py") if vllm_dir else None
    if cumem and os.path.exists(cumem):
        with open(cumem, encoding="utf-8", errors="replace") as f:
            doc["vllm"] = vllm_policy(f.read())
    if test:
        doc["pool"] = pool_test()
    return doc


def pool_test(mib: int = TEST_MIB) -> dict:
    """Allocate inside vLLM's sleep-mode pool as its worker does, then sleep and see the memory come back."""
    import gc

    import torch

    try:
        from vllm.device_allocator.cumem import CuMemAllocator, cumem_available

        if not cumem_available:
            return {"error": "this vLLM has no cumem allocator (vllm.cumem_allocator did not import)"}
        pool = CuMemAllocator.get_instance()
        with pool.use_memory_pool(tag="rocmkit-check"):
            x = torch.ones(mib << 20, dtype=torch.uint8, device="cuda")
        torch.cuda.synchronize()
        inside = pool.get_current_usage() >> 20
        before = torch.cuda.mem_get_info()[0]
        pool.sleep(offload_tags=())  # discard, as the KV cache is
        returned = (torch.cuda.mem_get_info()[0] - before) >> 20
        pool.wake_up()
        del x
        gc.collect()
        return {"allocated_mib": mib, "in_pool_mib": int(inside), "returned_mib": int(returned)}
    except Exception as exc:  # noqa: BLE001 - the failure is the finding
        return {"error": f"{type(exc).__name__}: {exc}"[:400]}
