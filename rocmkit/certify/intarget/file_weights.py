"""The trainer's weights reach a `trl vllm-serve` server through a file, where TRL's own way cannot run.

TRL 1.16 pushes weights to its vLLM server with vLLM's NCCL weight-transfer engine, and refuses any device
but CUDA (trl/generation/vllm_client.py, init_communicator). On the CPU (`--gpus 0`) the trainer instead
writes the weights as one safetensors file beside the run and asks the server, through vLLM's dev-mode
`/collective_rpc` endpoint, to load it with the worker method below (`--worker-extension-cls`). Both
processes share the run folder, on the host or in one container. Generation still goes through TRL's server
client unchanged.
"""

from __future__ import annotations

import os
from pathlib import Path

from .sync_record import FAULT_VAR, VAR, Record, apply_faults, model_state, parse_fault, tensor_sum

METHOD = "rocmkit_load_weights"
WORKER_EXTENSION = "rocmkit.certify.intarget.file_weights.FileWeightsWorker"


def _witness(side: str) -> Record | None:
    """This process's record of the syncs (sync_record.py), where certify asked for one."""
    folder = os.environ.get(VAR)
    return Record(Path(folder), side) if folder else None


class FileWeightsWorker:
    """Mixed into vLLM's worker by `--worker-extension-cls`: load the weights a trainer wrote. Where certify asked,
    it records what each sync loaded and its model's sum after it; a test fault (ROCMKIT_TEST_SYNC_FAULT) breaks
    the load before that record, as it breaks verl's."""

    _record: Record | None = None

    def rocmkit_load_weights(self, path: str) -> int:
        from safetensors.torch import load_file

        sent = load_file(path)
        cls = type(self)
        if cls._record is None and os.environ.get(VAR):
            cls._record = _witness("rollout")
        faults = parse_fault(os.environ[FAULT_VAR]) if os.environ.get(FAULT_VAR) else []
        loaded = apply_faults(list(sent.items()), faults, (cls._record.count if cls._record else 0) + 1)
        weights = dict(loaded or [])
        if weights:
            self._reload(weights)
        if cls._record:
            cls._record.write({"tensors": {n: tensor_sum(t) for n, t in weights.items()},
                               **model_state(self.model_runner.model)})
        return len(sent)

    def _reload(self, weights: dict) -> None:
        # vLLM's in-place reload: on the CPU the linear layers' weights were repacked for oneDNN and their
        # checkpoint-format tensors dropped, so a plain model.load_weights finds empty parameters; the
        # layer-wise reload loads the checkpoint format and repacks (gpu_model_runner.reload_weights)
        self.model_runner.reload_weights(weights_iterator=iter(weights.items()), is_checkpoint_format=True)
        # A tied lm_head receives no tensor of its own, so the reload leaves its CPU GEMM packed from the old
        # embedding; layers that kept their weight (embeddings) are packed again from the weight they share.
        for layer in self.model_runner.model.modules():
            weight, method = getattr(layer, "weight", None), getattr(layer, "quant_method", None)
            if hasattr(layer, "cpu_linear") and weight is not None and weight.numel() > 0 and method is not None:
                method.process_weights_after_loading(layer)


def client_class(folder: Path):
    """TRL's VLLMClient with the weight sync through files in `folder`."""
    from trl.generation.vllm_client import VLLMClient

    class FileWeightsClient(VLLMClient):
        updates = 0
        record = _witness("trainer")

        def init_communicator(self, device=0):
            self.communicator = None  # no NCCL group: update_named_params goes through a file

        def update_named_params(self, metadata, named_params):
            from safetensors.torch import save_file

            folder.mkdir(parents=True, exist_ok=True)
            path = folder / "weights.safetensors"
            tmp = path.with_suffix(".tmp")
            tensors = {name: t.detach().to("cpu").contiguous() for name, t in named_params}
            save_file(tensors, str(tmp))
            os.replace(tmp, path)  # the server never reads a half-written file
            result = self._post(f"{self.base_url}/collective_rpc", json={"method": METHOD, "args": [str(path)]})
            loaded = result.get("results", [None])[0]
            if not isinstance(loaded, (int, str)) or int(loaded) != len(metadata):
                raise RuntimeError(f"the vLLM server loaded {loaded!r} of {len(metadata)} tensors from {path}")
            type(self).updates += 1
            if self.record:
                self.record.write({"tensors": {n: tensor_sum(t) for n, t in tensors.items()}})

    return FileWeightsClient
