"""verl's own LoRA weight-sync collection (verl/utils/fsdp_utils.py collect_lora_params, as its FSDP workers call it
at each weight sync after the first) on a small Qwen2 with LoRA adapters on every linear layer, wrapped the way verl
wraps it: FSDP1 with verl's LoRA wrap policy, or FSDP2 through verl's apply_fsdp2; on one gloo rank and on two, with
and without layered_summon. For tests/test_verl_rollout_rules.py, in the verl-cpu venv. Prints one JSON list of
[strategy, ranks, layered_summon, what came back: the number of LoRA tensors, or the exception]."""

from __future__ import annotations

import json
import os
import warnings

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

PORTS = {"fsdp": 29533, "fsdp2": 29534}


def model():
    from peft import LoraConfig, get_peft_model
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, vocab_size=256)
    return get_peft_model(Qwen2ForCausalLM(cfg), LoraConfig(r=8, lora_alpha=16, target_modules="all-linear"))


def wrapped(strategy: str, ranks: int):
    from verl.utils.fsdp_utils import apply_fsdp2, get_fsdp_wrap_policy

    m = model()
    if strategy == "fsdp":
        from torch.distributed.fsdp import FullyShardedDataParallel as FSDP

        policy = get_fsdp_wrap_policy(m, config={"transformer_layer_cls_to_wrap": ["Qwen2DecoderLayer"]}, is_lora=True)
        return FSDP(m, auto_wrap_policy=policy, device_id=torch.device("cpu"))
    from torch.distributed.device_mesh import init_device_mesh

    apply_fsdp2(m, {"mesh": init_device_mesh("cpu", (ranks,))},
                {"wrap_policy": {"transformer_layer_cls_to_wrap": ["Qwen2DecoderLayer"]}})
    return m


def rank(r: int, ranks: int, strategy: str, out) -> None:
    warnings.filterwarnings("ignore")
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(PORTS[strategy] + 10 * ranks))
    dist.init_process_group("gloo", rank=r, world_size=ranks)
    from verl.utils.fsdp_utils import collect_lora_params

    for layered in (True, False):
        m = wrapped(strategy, ranks)
        try:
            said = len(collect_lora_params(m, layered_summon=layered, base_sync_done=True))
        except Exception as exc:  # noqa: BLE001 - what verl raised is the finding
            said = f"{type(exc).__name__}: {exc}"[:300]
        if r == 0:
            out.put([strategy, ranks, layered, said])
    dist.destroy_process_group()


def main() -> None:
    ctx = mp.get_context("spawn")
    out, rows = ctx.Queue(), []
    for strategy in ("fsdp", "fsdp2"):
        for ranks in (1, 2):
            procs = [ctx.Process(target=rank, args=(r, ranks, strategy, out)) for r in range(ranks)]
            for p in procs:
                p.start()
            for _ in range(2):
                rows.append(out.get(timeout=240))
            for p in procs:
                p.join(60)
    print(json.dumps(rows))


if __name__ == "__main__":
    main()
