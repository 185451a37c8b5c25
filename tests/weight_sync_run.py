"""Runs verl's real weight sync into vLLM's CPU build, for tests/test_cpu_weight_sync.py, in the verl-cpu venv.
Prints one JSON document. With --unfixed, rocmkit's CPU platform is used without its weight-sync fixes
(weight_sync_unfixed.py), to show what the tests would have seen before them.

  receiver: verl's BucketedWeightSender and BucketedWeightReceiver over shared memory (the CPU path), in two
            threads; the consumer first keeps what it got (as vLLM's loader may), then fails as vLLM's loader
            did on AVX-512 CPUs.
  vllm:     vLLM's CPU engine with verl's worker extension: whether the linear layers keep a loadable weight after
            start-up, then (fixed only) two real syncs through update_weights_from_ipc and the loaded values.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
os.environ.update({
    "VERL_PLATFORM": "cpu", "VERL_ENGINE_DEVICE": "cuda", "VLLM_CPU_KVCACHE_SPACE": "1", "TORCHDYNAMO_DISABLE": "1",
    "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
    "VLLM_ALLOW_INSECURE_SERIALIZATION": "1",  # collective_rpc with a function, to read the loaded weights
    "VERL_USE_EXTERNAL_MODULES": "weight_sync_unfixed" if "--unfixed" in sys.argv else "rocmkit.verl.cpu_platform",
    "PYTHONPATH": os.pathsep.join([str(HERE), os.environ.get("PYTHONPATH", "")]),
})
sys.path.insert(0, str(HERE))


def _sender(weights, handle: str, done: dict, bucket_mb: int = 1) -> threading.Thread:
    from verl.workers.rollout.vllm_rollout.bucketed_weight_transfer import BucketedWeightSender

    def send():
        try:
            asyncio.run(BucketedWeightSender(handle, bucket_size_mb=bucket_mb, use_shm=True).async_send_weights(iter(weights)))
            done["finished"] = True
        except Exception as exc:
            done["error"] = f"{type(exc).__name__}: {exc}"

    t = threading.Thread(target=send, daemon=True)  # a sender left waiting for its acknowledgement must not block exit
    t.start()
    return t


def receiver() -> dict:
    import torch
    import verl  # noqa: F401  (imports the CPU platform, as every verl process does)
    from verl.workers.rollout.vllm_rollout.bucketed_weight_transfer import BucketedWeightReceiver

    torch.manual_seed(0)
    # three buckets of 1 MiB: 96 tensors of 24 KiB (fp32 64 x 96)
    weights = [(f"w{i}", torch.randn(64, 96)) for i in range(96)]
    out = {}
    for case in ("keep", "fail"):
        handle = f"ipc:///tmp/rocmkit-test-{uuid.uuid4().hex[:12]}.sock"
        done: dict = {}
        kept: dict = {}

        def consume(bucket, is_last):
            if case == "fail":
                raise AttributeError("'Parameter' object has no attribute 'weight_loader'")  # vLLM's, on AVX-512
            kept.update(bucket)

        t = _sender(weights, handle, done)
        try:
            BucketedWeightReceiver(handle, torch.device("cpu"), use_shm=True).receive_weights(consume)
            raised = None
        except Exception as exc:
            raised = f"{type(exc).__name__}: {exc}"
        t.join(timeout=10)
        out[case] = {"raised": raised, "sender_finished": done.get("finished", False), "sender_error": done.get("error"),
                     "kept": len(kept), "kept_equal": all(torch.equal(kept[n], w) for n, w in weights if n in kept)}
    return out


def vllm_engine(model_dir: str, unfixed: bool) -> dict:
    from vllm import LLM

    llm = LLM(model=model_dir, dtype="bfloat16", enforce_eager=True, max_model_len=256, max_num_seqs=8,
              load_format="dummy", seed=0,
              worker_extension_cls="verl.workers.rollout.vllm_rollout.utils.vLLMColocateWorkerExtension")

    def linear(worker):
        layer = worker.model_runner.model.model.layers[0].mlp.down_proj
        return {"numel": layer.weight.numel(), "loadable": hasattr(layer.weight, "weight_loader"),
                "sum": float(layer.weight.float().sum()) if layer.weight.numel() else None}

    try:
        return _syncs(llm, linear, model_dir, unfixed)
    finally:
        llm.llm_engine.engine_core.shutdown()  # vLLM's engine process, which os._exit below would orphan


def _syncs(llm, linear, model_dir: str, unfixed: bool) -> dict:
    import torch
    from transformers import AutoModelForCausalLM

    out = {"after_start": llm.collective_rpc(linear)[0], "syncs": []}
    if unfixed:
        return out  # a sync would fail as in the hang; what failed it is shown above
    hf = AutoModelForCausalLM.from_pretrained(model_dir, torch_dtype=torch.float32)
    for scale in (1.0, 0.5):  # the second sync loads into weights vLLM packed again after the first
        # named_parameters: a tied lm_head once, as verl sends it; one bucket of 64 MiB, as certify's CPU run
        weights = [(n, p.detach() * scale) for n, p in hf.named_parameters()]
        handle = "ipc:///tmp/rl-colocate-zmq-0-replica-0-rank-0.sock"  # verl's name for this engine's rank 0
        done: dict = {}
        t = _sender(weights, handle, done, bucket_mb=64)
        try:
            llm.collective_rpc("update_weights_from_ipc", timeout=120, kwargs={"use_shm": True})
            error = None
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"[:500]
        t.join(timeout=30)
        expected = float((hf.state_dict()["model.layers.0.mlp.down_proj.weight"] * scale).to(torch.bfloat16).float().sum())
        out["syncs"].append({"error": error, "sender_finished": done.get("finished", False),
                             "loaded": llm.collective_rpc(linear)[0], "expected_sum": expected,
                             "generates": bool(llm.generate(["1 2 3"], use_tqdm=False)[0].outputs)})
    return out


def main() -> None:
    mode = sys.argv[1]
    if mode == "receiver":
        doc = receiver()
    else:
        doc = vllm_engine(sys.argv[2], "--unfixed" in sys.argv)
    print("RESULT " + json.dumps(doc), flush=True)
    os._exit(0)  # a sender thread still waiting (the unfixed case) must not keep the process alive


if __name__ == "__main__":
    main()
