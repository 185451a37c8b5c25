"""vLLM's model inspection, done during certify's setup instead of on the rollout's path to its first step.

Before vLLM builds an engine it inspects the model's class (does it take multimodal input, pooling, LoRA...). It
does that in a fresh Python process, which imports torch and vLLM again (`_run_in_subprocess` in
vllm/model_executor/models/registry.py, "to avoid initializing CUDA"), and caches the answer in
`VLLM_CACHE_ROOT/modelinfos/<module>-<class>.json`, keyed by a hash of the model's source file. On a host whose
cache lacks the model that process took 22 s of the verl run's start-up on an H100 (docs/architecture.md,
"certify, measured"); a second run on the same host reads the file.

The setup starts `python -m rocmkit.certify.intarget.vllm_modelinfo ARCH` as its first step, beside its own
imports, with the run's environment (so the same VLLM_CACHE_ROOT), and waits for it at its end. That process runs
vLLM's own inspection of ARCH (vLLM's registry, hash and cache writer; only the subprocess it would start is run
in this process instead, which is already a process of its own), so the rollout finds the file and skips its
subprocess. What is computed and cached is what vLLM computes and caches: the run is the same, earlier. A vLLM
without these names is left to inspect the model itself, as it always did.
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import time
from pathlib import Path

MARK = "ROCMKIT-MODELINFO "
WAIT_S = 120.0  # the setup's wait for it at its end; past that the rollout inspects the model itself


def cache_dir(env: dict[str, str]) -> Path:
    """vLLM's cache folder (vllm/envs.py: VLLM_CACHE_ROOT, else $XDG_CACHE_HOME/vllm, else ~/.cache/vllm)."""
    if env.get("VLLM_CACHE_ROOT"):
        return Path(os.path.expanduser(env["VLLM_CACHE_ROOT"]))
    return Path(os.path.expanduser(env.get("XDG_CACHE_HOME") or "~/.cache")) / "vllm"


def cached(arch: str, env: dict[str, str]) -> str | None:
    """The cache file vLLM keeps for `arch`, if there is one (vLLM checks its hash when it reads it)."""
    hits = sorted(glob.glob(str(cache_dir(env) / "modelinfos" / f"*-{glob.escape(arch)}.json")))
    return hits[0] if hits else None


class Warm:
    """The inspection started in the background; `finish()` waits for it and says what happened."""

    def __init__(self, arch: str):
        self.arch, self.started = arch, time.perf_counter()
        self.hit = cached(arch, dict(os.environ))
        self.proc = None if self.hit else subprocess.Popen(
            [sys.executable, "-m", __name__, arch], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, text=True)

    def finish(self, wait_s: float = WAIT_S) -> dict:
        out = {"architecture": self.arch}
        if self.proc is None:
            return {**out, "status": "cached", "file": self.hit}
        waited = time.perf_counter()
        try:
            text, _ = self.proc.communicate(timeout=wait_s)
        except subprocess.TimeoutExpired:
            self.stop()
            return {**out, "status": "stopped", "detail": f"still running after {wait_s:.0f} s at the setup's end; "
                    "the rollout inspects the model itself", "wait_s": round(time.perf_counter() - waited, 3)}
        lines = [line[len(MARK):] for line in text.splitlines() if line.startswith(MARK)]
        try:
            doc = json.loads(lines[-1])
        except (IndexError, ValueError):  # it died before its answer: vLLM inspects the model itself, as before
            doc = {"status": "failed", "detail": f"exit {self.proc.returncode}: "
                   + " | ".join(text.splitlines()[-3:])}
        return {**out, **doc, "wall_s": round(time.perf_counter() - self.started, 3),
                "wait_s": round(time.perf_counter() - waited, 3)}

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def inspect(arch: str) -> dict:
    """vLLM's inspection of `arch`, written to vLLM's cache by vLLM's own code."""
    try:
        from vllm.model_executor.models import registry
        from vllm.plugins import load_general_plugins
    except Exception as exc:  # noqa: BLE001 - no vLLM here: the run's own checks say so
        return {"status": "skipped", "detail": f"vLLM's registry does not import: {type(exc).__name__}: {exc}"}
    model = registry.ModelRegistry.models.get(arch)
    if model is None or not hasattr(registry, "_run_in_subprocess") or not hasattr(model, "inspect_model_cls"):
        return {"status": "skipped", "detail": f"this vLLM has no registered {arch} or no cached inspection"}
    load_general_plugins()  # what vLLM's inspection process does first (registry._run)
    registry._run_in_subprocess = lambda fn: fn()  # this process is the separate one
    t = time.perf_counter()
    model.inspect_model_cls()
    return {"status": "inspected", "inspect_s": round(time.perf_counter() - t, 3),
            "file": cached(arch, dict(os.environ))}


if __name__ == "__main__":
    try:
        result = inspect(sys.argv[1])
    except Exception as exc:  # noqa: BLE001 - reported, never fatal: vLLM inspects the model itself later
        result = {"status": "failed", "detail": f"{type(exc).__name__}: {exc}"}
    print(MARK + json.dumps(result), flush=True)
