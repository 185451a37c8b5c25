"""Whether a certification's setup refuses its target, and why: the one decision that stops a run whose checks
beside its start-up failed and that writes the certificate of a setup that refused (flow.py reads it for both).

- setup_problem: the target cannot run the check (no python3, a missing engine, fewer GPUs than asked, a GPU
  another process holds): NOT CERTIFIED: SETUP;
- setup_checks: a target with everything installed failing the engine's own checks (imports, vLLM's sleep-mode
  pool): FAIL, the stack's;
- refusal: every reason in the order the outcome takes them, first the deadline and the user's own inputs.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from ..runtime.container import DOCKER_ERROR
from . import busy, engines
from .intarget import setup as setup_mod
from .judge import check
from .settings import Settings
from .target import NOT_EXECUTABLE, NOT_FOUND, Target


def setup_problem(s: Settings, target: Target, returncode: int | None, report: dict,
                  tail: list[str], need: list[dict] = ()) -> tuple[str, str] | None:
    """Why the target cannot run the check (message, hint), or None. Pure, but for torch_advice.host() (this
    host's /dev/kfd, KFD topology and ROCm version), read only when torch sees fewer GPUs than asked, and the
    processes holding GPU memory, read only when a GPU is short of it (`need`: certify.json's gpu_need)."""
    where = f"the image {target.image}" if target.image else f"this host's Python ({target.python})"
    said = " | ".join(line for line in tail[-6:] if line.strip())
    if target.image and returncode == DOCKER_ERROR:
        return (f"the Docker engine could not start a container of {target.image}: {said}",
                "check the engine (`docker info`) and the device flags (`rocmkit run IMAGE --print`)")
    if not report:
        if target.image and returncode in (NOT_EXECUTABLE, NOT_FOUND):
            return (f"{where} has no python3 to run", "certify an image built by `rocmkit build`")
        return (f"the setup could not run in {where} (exit {returncode}): {said}",
                "run the setup's command by hand: `rocmkit certify --dry-run` prints it")
    if report.get("missing"):
        missing = ", ".join(report["missing"])
        hint = ("certify an image built by `rocmkit build` from a stack that has the "
                f"{s.engine} engine (`rocmkit stacks`)" if target.image else
                engines.of(s).install_hint(s, target.python))
        return f"{where} lacks {missing}", hint
    dev = report.get("devices")
    if dev and s.gpus > dev["visible"]:
        from ..host import torch_advice

        built = f"HIP {dev['hip']}" if dev.get("hip") else (f"CUDA {dev['cuda']}" if dev.get("cuda") else "the CPU only")
        env = ", ".join(f"{k}={v!r}" for k, v in dev.get("visible_env", {}).items())
        return (f"asked for {s.gpus} GPU(s), but torch {dev['torch']} (built for {built}) in {where} sees "
                f"{dev['visible']}" + (f" ({env})" if env else ""),
                "nothing was trained; " + torch_advice.hint(dev, torch_advice.host(), python=target.python,
                                                            image=target.image, cpu_note=engines.of(s).cpu_hint()))
    memory = report.get("gpu_memory")
    if memory and need and setup_mod.short_of_memory(memory, need):  # the holders are read only then
        return busy.problem(memory, need, busy.read_holders(), exclude_pids=(os.getpid(),))
    return engines.of(s).setup_refusal(report)


def setup_checks(report: dict, extra: list[dict]) -> list[dict]:
    """Failures of a target that has everything installed (the engine's own checks among them, `extra`): these are
    the stack's, so they fail the certificate."""
    out = []
    if report.get("import_errors"):
        out.append(check("engine imports", False, "; ".join(f"{k}: {v}" for k, v in report["import_errors"].items())))
    elif report.get("error"):
        out.append(check("setup ran", False, report["error"]))
    return out + [c for c in extra if not c["passed"]]


@dataclass(frozen=True)
class Refusal:
    """Why a setup (or its part beside the run) refuses the target: the one decision both the stop of a run and
    the certificate read. kind: "timeout", "input" (the user's model or data), "problem" (the target cannot run
    the check), "rejection" (verl rejects the configuration), "checks" (the engine's own checks failed)."""
    kind: str
    message: str
    hint: str | None = None
    failed: tuple = ()


def refusal(s: Settings, engine, target: Target, res, report: dict, lines: list[str], need=(), *,
            judge_checks: bool = True) -> Refusal | None:
    """The refusal of a setup's result, or None. Pure. `judge_checks`: the engine's own checks (vLLM's sleep-mode
    pool) fail it."""
    if res.timed_out:
        return Refusal("timeout", f"setup still running at the --timeout of {s.timeout} s")
    if report.get("input_problems"):
        return Refusal("input", "; ".join(report["input_problems"]))
    problem = setup_problem(s, target, res.returncode, report, lines, need)
    if problem:
        return Refusal("problem", *problem)
    rejection = engine.configuration_rejection(report)
    if rejection:
        return Refusal("rejection", *rejection)
    failed = setup_checks(report, engine.extra_checks(report)) if judge_checks else []
    if failed:
        return Refusal("checks", "; ".join(c["detail"] for c in failed), failed=tuple(failed))
    return None
