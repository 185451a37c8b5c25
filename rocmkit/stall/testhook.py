"""A test-only hook that makes a verl run hang in a known place, so the stall report can be checked against the
truth: `ROCMKIT_TEST_STALL=WHERE:RANK:CALL[:KIND]` in rocmkit's environment, and the process of that rank hangs
on its CALL-th entry into WHERE, the way KIND says:

- `stop` (the default): SIGSTOP itself, the one hang the kernel marks (state T);
- `block`: wait forever in Python (a threading.Event no one sets), not stopped: state S like its waiting peers;
- `native`: block in a native call that holds the GIL (pause(2) through ctypes.PyDLL), as a C extension's call
  that never returns does (its Python frames alone mislead; it cannot answer the flight recorder's dump);
- `freeze`: move itself into a new child of its cgroup (v2) and freeze that with `cgroup.freeze`, as an operator
  or a node agent freezes a process from outside: the kernel leaves it sleeping (state S), not stopped, and it
  cannot answer the flight recorder's dump. Needs a writable cgroup v2 hierarchy (a container may not have one:
  the hook then raises, so the run fails instead of hanging some other way);
- `skip`: skip the first torch.distributed collective it issues inside WHERE (the call returns at once, nothing
  sent), so it enters its next collective where its peers wait in the skipped one: a rank that took another
  branch. Only collectives called through torch.distributed's functions (FSDP2's all-gathers and
  reduce-scatters, verl's own) can be skipped; the hook says so when it found none.

WHERE:

- `weight-sync`: verl's weight receiver in the rollout (BucketedWeightReceiver.receive_weights, in vLLM's worker;
  CALL 2 is the sync after the first step), so the trainer's sender waits for it;
- `rollout`: vLLM's model runner (GPUModelRunner.execute_model, the CPU runner's too), RANK being the rank in
  the rollout's tensor-parallel group, so its peers wait in the forward pass's collective;
- `update`: the training engine's step (verl's FSDPEngine.forward_backward_batch), RANK being the trainer's
  torch.distributed rank, so the other ranks of the actor wait in FSDP's all-gather.

certify's verl engine then adds this module to VERL_USE_EXTERNAL_MODULES, which verl imports in every process
(Ray's workers and vLLM's included). Nothing else reads the variable; a run without it is unchanged.
Used by tests/test_stall_runs.py and `benchmarks/gpu_check.py --only verl-2gpu-stall`."""

from __future__ import annotations

import os
import signal
import sys
import threading

from ..verl.import_hooks import after_import

VAR = "ROCMKIT_TEST_STALL"
# where -> (the module to patch once it is imported, the class, the method)
POINTS = {"weight-sync": ("verl.workers.rollout.vllm_rollout.bucketed_weight_transfer", "BucketedWeightReceiver",
                         "receive_weights"),
          "rollout": ("vllm.v1.worker.gpu_model_runner", "GPUModelRunner", "execute_model"),
          "update": ("verl.workers.engine.fsdp.transformer_impl", "FSDPEngine", "forward_backward_batch")}
KINDS = ("stop", "block", "native", "freeze", "skip")
# torch.distributed's collectives a `skip` may skip (looked up on the module at call time by FSDP2 and verl)
COLLECTIVES = ("all_reduce", "all_gather", "all_gather_into_tensor", "reduce_scatter", "reduce_scatter_tensor",
               "broadcast", "barrier", "all_to_all", "all_to_all_single", "reduce", "all_gather_object")


def parse(value: str) -> tuple[str, int, int, str]:
    parts = value.split(":")
    where, rank, call, kind = (parts + ["stop"])[:4] if len(parts) in (3, 4) else ("", "", "", "")
    if where not in POINTS or not rank.isdigit() or not call.isdigit() or int(call) < 1 or kind not in KINDS:
        raise ValueError(f"{VAR}={value!r}: expected WHERE:RANK:CALL[:KIND], WHERE one of {', '.join(POINTS)}, "
                         f"KIND one of {', '.join(KINDS)}")
    return where, int(rank), int(call), kind


def freeze_self() -> None:
    """Freeze this process with the cgroup v2 freezer (never returns while frozen)."""
    from pathlib import Path

    own = Path(f"/proc/{os.getpid()}/cgroup").read_text().splitlines()
    path = next((line[3:] for line in own if line.startswith("0::")), None)
    if path is None:
        raise RuntimeError("rocmkit test hook: `freeze` needs cgroup v2 (no 0:: line in /proc/self/cgroup)")
    group = Path("/sys/fs/cgroup") / path.lstrip("/") / f"rocmkit-freeze-{os.getpid()}"
    try:
        group.mkdir(exist_ok=True)
        if not (group / "cgroup.freeze").exists():  # a plain folder: /sys/fs/cgroup is no cgroup v2 hierarchy
            group.rmdir()
            raise OSError("not a cgroup v2 hierarchy (no cgroup.freeze)")
        (group / "cgroup.procs").write_text(str(os.getpid()))
        (group / "cgroup.freeze").write_text("1")
    except OSError as exc:
        raise RuntimeError(f"rocmkit test hook: `freeze` could not use {group}: {exc}") from exc
    while True:  # the freeze takes effect as this thread returns to user space
        threading.Event().wait()


def hang(kind: str) -> None:
    """Hang this process the way `kind` says (never returns), for stop, block, native and freeze."""
    if kind == "freeze":
        freeze_self()
    if kind == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)
    elif kind == "block":
        while True:
            threading.Event().wait()
    elif kind == "native":
        import ctypes

        while True:
            ctypes.PyDLL(None).pause()  # PyDLL keeps the GIL through the call


def skipping_one(run):
    """run() with the first torch.distributed collective it issues skipped; whether one was."""
    import torch.distributed as dist

    skipped: list[str] = []
    originals = {n: getattr(dist, n) for n in COLLECTIVES if hasattr(dist, n)}

    class Done:  # what an async_op=True caller waits on
        def wait(self, *a, **k):
            return True

        def is_completed(self):
            return True

    def make(name):
        def skip(*args, **kwargs):
            if skipped:
                return originals[name](*args, **kwargs)
            skipped.append(name)
            for n, f in originals.items():  # once: the rest go through
                setattr(dist, n, f)
            print(f"rocmkit test hook: pid {os.getpid()} skips {name}", file=sys.stderr, flush=True)
            return Done() if kwargs.get("async_op") else None
        return skip

    for n in originals:
        setattr(dist, n, make(n))
    try:
        return run(), bool(skipped)
    finally:
        for n, f in originals.items():
            setattr(dist, n, f)


VERBS = {"stop": "stops itself", "block": "blocks in Python", "native": "blocks in a native call",
         "freeze": "freezes itself (cgroup v2 freezer)", "skip": "skips a collective"}


def _rank(where: str) -> int:
    """The rank in the rollout's tensor-parallel group (vLLM's), else torch.distributed's, else 0; the trainer's
    torch.distributed rank for `update`."""
    try:
        if where == "update":
            raise LookupError
        from vllm.distributed import parallel_state

        return parallel_state.get_tensor_model_parallel_rank()
    except Exception:  # noqa: BLE001 - vLLM's groups not made (yet) in this process
        pass
    try:
        import torch.distributed as dist

        return dist.get_rank() if dist.is_initialized() else 0
    except Exception:  # noqa: BLE001
        return 0


def install(value: str) -> None:
    where, rank, call, kind = parse(value)
    module_name, class_name, method = POINTS[where]
    calls = [0]

    def patch(module) -> None:
        cls = getattr(module, class_name)
        original = getattr(cls, method)

        def stopping(self, *args, **kwargs):
            calls[0] += 1
            if calls[0] == call and _rank(where) == rank:
                print(f"rocmkit test hook: pid {os.getpid()} {VERBS[kind]} in {where} (rank {rank}, call {call})",
                      file=sys.stderr, flush=True)
                if kind == "skip":
                    result, skipped = skipping_one(lambda: original(self, *args, **kwargs))
                    if not skipped:
                        print(f"rocmkit test hook: pid {os.getpid()} found no torch.distributed collective to skip "
                              f"in {where}", file=sys.stderr, flush=True)
                    return result
                hang(kind)
            return original(self, *args, **kwargs)

        setattr(cls, method, stopping)

    after_import(module_name, patch)


if os.environ.get(VAR) and __name__ in os.environ.get("VERL_USE_EXTERNAL_MODULES", "").split(","):
    install(os.environ[VAR])  # imported by verl in a process of the run, not by rocmkit's own
