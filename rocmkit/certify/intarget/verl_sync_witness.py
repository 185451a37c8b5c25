"""What each of verl's weight syncs carried, seen from both ends, so the certificate can show that the rollout
generates with the weights the trainer trains (certify/syncproof.py reads the records).

With ROCMKIT_SYNC_WITNESS=DIR set, importing this module (certify's verl engine adds it to
VERL_USE_EXTERNAL_MODULES, which verl imports in every process of the run, vLLM's workers included) wraps, once
their modules are imported:

- the trainer's end, `BucketedWeightSender.async_send_weights` (verl 0.9.1's vLLM rollout, CUDA IPC or shared
  memory): every tensor it sends, by name, with its sum in float64;
- the rollout's end, `vLLMColocateWorkerExtension.update_weights_from_ipc` and `_update_weights` (in vLLM's
  worker): every tensor that reached the model's `load_weights` (or the LoRA adapter), by name, with its sum, and
  after the sync the sum of every parameter of the rollout's model, which moves when the sync changed it.

One JSON line per sync and side in DIR/sync-<pid>.jsonl. The sums cost one reduction per tensor on the device
that holds it, the same bytes both ends see, so they agree exactly when the sync carried the trainer's tensors.

ROCMKIT_TEST_SYNC_FAULT (rocmkit's own tests and GPU checks only) breaks the rollout's end on purpose, outside the
witness, so what the witness sees is what the model got: a comma-separated list of FAULT[@N] (only sync N) or
FAULT@N+ (sync N and every later one; no @: every sync), FAULT one of
- `noop`: every bucket is received and acknowledged, nothing is loaded (a sync that does nothing);
- `skip:L`: the tensors of decoder layer L are not loaded (a sync that misses part of the model);
- `cast:DTYPE`: every tensor is rounded to torch.DTYPE and back before loading (a rollout in another dtype).
Sync 1 is the one before the first step: `noop@2+` leaves the rollout on the weights of the first step.
"""

from __future__ import annotations

import os
from pathlib import Path

from ...verl.import_hooks import after_import
from .sync_record import FAULT_VAR, VAR, Record, apply_faults, model_state, parse_fault, tensor_sum

__all__ = ["FAULT_VAR", "VAR", "install", "parse_fault"]

SENDER_MODULE = "verl.workers.rollout.vllm_rollout.bucketed_weight_transfer"
RECEIVER_MODULE = "verl.workers.rollout.vllm_rollout.utils"
_now = {"sync": 0}  # the rollout's sync under way in this process (the witness counts them, a fault reads it)


def watch_sender(module, folder: Path) -> None:
    sender = module.BucketedWeightSender
    send = sender.async_send_weights
    if getattr(send, "_rocmkit_witness", False):
        return
    record = Record(folder, "trainer")

    async def async_send_weights(self, weights):
        from verl.workers.rollout.utils import ensure_async_iterator

        sums: dict[str, float] = {}

        async def counted():
            async for name, weight in ensure_async_iterator(weights):
                sums[name] = tensor_sum(weight)
                yield name, weight

        try:
            return await send(self, counted())
        finally:
            record.write({"tensors": sums})

    async_send_weights._rocmkit_witness = True
    sender.async_send_weights = async_send_weights


def watch_receiver(module, folder: Path) -> None:
    ext = module.vLLMColocateWorkerExtension
    update, load = ext.update_weights_from_ipc, ext._update_weights
    if getattr(update, "_rocmkit_witness", False):
        return
    record = Record(folder, "rollout")
    record.installed()
    loaded: dict[str, float] = {}

    def _update_weights(self, weights, *args, **kwargs):
        weights = list(weights)
        loaded.update((name, tensor_sum(t)) for name, t in weights)
        return load(self, weights, *args, **kwargs)

    def update_weights_from_ipc(self, *args, **kwargs):
        loaded.clear()
        _now["sync"] = record.count + 1
        try:
            return update(self, *args, **kwargs)
        finally:
            lora = bool(kwargs.get("peft_config") and kwargs.get("base_sync_done"))  # verl passes them by name
            record.write({"tensors": dict(loaded), "lora": lora, **model_state(self.model_runner.model),
                          "rank": getattr(self, "rank", None)})

    _update_weights._rocmkit_witness = update_weights_from_ipc._rocmkit_witness = True
    ext._update_weights, ext.update_weights_from_ipc = _update_weights, update_weights_from_ipc


def break_receiver(module, faults: list[tuple[str, str, int, float]]) -> None:
    """The test faults, wrapped around the witness's _update_weights: what they drop never reaches the witness."""
    ext = module.vLLMColocateWorkerExtension
    load = ext._update_weights

    def _update_weights(self, weights, *args, **kwargs):
        weights = apply_faults(list(weights), faults, _now["sync"])
        return None if weights is None else load(self, weights, *args, **kwargs)

    ext._update_weights = _update_weights


def install() -> None:
    folder = os.environ.get(VAR)
    if not folder:
        return
    where = Path(folder)
    after_import(SENDER_MODULE, lambda m: watch_sender(m, where))
    after_import(RECEIVER_MODULE, lambda m: watch_receiver(m, where))
    fault = os.environ.get(FAULT_VAR)
    if fault:
        after_import(RECEIVER_MODULE, lambda m: break_receiver(m, parse_fault(fault)))


install()
