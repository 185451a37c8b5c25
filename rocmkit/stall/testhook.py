"""A test-only hook that makes a verl run hang in a known place, so the stall report can be checked against the
truth: `ROCMKIT_TEST_STALL=WHERE:RANK:CALL` in rocmkit's environment, and the process of that rank stops itself
with SIGSTOP on its CALL-th entry into WHERE:

- `weight-sync`: verl's weight receiver in the rollout (BucketedWeightReceiver.receive_weights, in vLLM's worker;
  CALL 2 is the sync after the first step), so the trainer's sender waits for it;
- `rollout`: vLLM's model runner (GPUModelRunner.execute_model, the CPU runner's too), RANK being the rank in
  the rollout's tensor-parallel group, so its peers wait in the forward pass's collective.

certify's verl engine then adds this module to VERL_USE_EXTERNAL_MODULES, which verl imports in every process
(Ray's workers and vLLM's included). Nothing else reads the variable; a run without it is unchanged.
Used by tests/test_stall_runs.py and `benchmarks/gpu_check.py --only verl-2gpu-stall`."""

from __future__ import annotations

import os
import signal
import sys

from ..verl.import_hooks import after_import

VAR = "ROCMKIT_TEST_STALL"
# where -> (the module to patch once it is imported, the class, the method)
POINTS = {"weight-sync": ("verl.workers.rollout.vllm_rollout.bucketed_weight_transfer", "BucketedWeightReceiver",
                         "receive_weights"),
          "rollout": ("vllm.v1.worker.gpu_model_runner", "GPUModelRunner", "execute_model")}


def parse(value: str) -> tuple[str, int, int]:
    where, rank, call = value.split(":")
    if where not in POINTS or not rank.isdigit() or not call.isdigit() or int(call) < 1:
        raise ValueError(f"{VAR}={value!r}: expected WHERE:RANK:CALL, WHERE one of {', '.join(POINTS)}")
    return where, int(rank), int(call)


def _rank() -> int:
    """The rank in the rollout's tensor-parallel group (vLLM's), else torch.distributed's, else 0."""
    try:
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
    where, rank, call = parse(value)
    module_name, class_name, method = POINTS[where]
    calls = [0]

    def patch(module) -> None:
        cls = getattr(module, class_name)
        original = getattr(cls, method)

        def stopping(self, *args, **kwargs):
            calls[0] += 1
            if calls[0] == call and _rank() == rank:
                print(f"rocmkit test hook: pid {os.getpid()} stops itself in {where} (rank {rank}, call {call})",
                      file=sys.stderr, flush=True)
                os.kill(os.getpid(), signal.SIGSTOP)
            return original(self, *args, **kwargs)

        setattr(cls, method, stopping)

    after_import(module_name, patch)


if os.environ.get(VAR) and __name__ in os.environ.get("VERL_USE_EXTERNAL_MODULES", "").split(","):
    install(os.environ[VAR])  # imported by verl in a process of the run, not by rocmkit's own
