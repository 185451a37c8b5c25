"""`rocmkit tune`'s memory model against the peak memory of real training steps, in the same run.

    python benchmarks/tune_memory.py [--models Qwen/Qwen2-0.5B-Instruct,Qwen/Qwen2-1.5B-Instruct]
                                     [--cases 4x1024,8x1024,4x2048] [--json FILE]

For each model of rocmkit's table and each micro batch × sequence length, with gradient checkpointing off and
on: a randomly initialised transformers model built from the table's config (fp32 master weights, sdpa
attention), steps of bf16 autocast forward, the log-softmax and entropy of the logits in fp32, a GRPO-shaped
loss (log-prob × advantage, an entropy bonus), backward and AdamW. The first step allocates the optimizer
states; the peak of the steps after it (torch.cuda.max_memory_allocated) is compared with
`rocmkit.tune.memory.actor_step(..., plain=True)`, which is what `rocmkit tune --gpus 1 --json` prints as
memory.actor_step_peak_gib. Prints predicted, measured and their ratio; --json writes every row.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from rocmkit.tune.memory import GIB, actor_step
from rocmkit.tune.models import lookup

STEPS = 3


def build(spec):
    import transformers

    kinds = {"qwen2": "Qwen2Config", "llama": "LlamaConfig", "qwen3": "Qwen3Config", "mistral": "MistralConfig"}
    cfg = getattr(transformers, kinds[spec.model_type])(
        hidden_size=spec.hidden, intermediate_size=spec.intermediate, num_hidden_layers=spec.layers,
        num_attention_heads=spec.heads, num_key_value_heads=spec.kv_heads, vocab_size=spec.vocab,
        tie_word_embeddings=spec.tied, head_dim=spec.head_dim, max_position_embeddings=32768)
    cfg._attn_implementation = "sdpa"
    with torch.device("cuda"):
        return transformers.AutoModelForCausalLM.from_config(cfg, torch_dtype=torch.float32)


def step(model, opt, ids, adv) -> None:
    with torch.autocast("cuda", dtype=torch.bfloat16):
        logits = model(input_ids=ids, use_cache=False).logits
    logp = torch.log_softmax(logits.float(), dim=-1)
    token_logp = logp[:, :-1].gather(-1, ids[:, 1:, None]).squeeze(-1)
    entropy = -(logp.exp() * logp).sum(-1)
    loss = -(token_logp * adv[:, None]).mean() - 1e-3 * entropy.mean()
    loss.backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def measure(spec, batch: int, seq: int, ckpt: bool) -> int:
    model = build(spec)
    if ckpt:
        model.gradient_checkpointing_enable()
    model.config.use_cache = False
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6)
    ids = torch.randint(0, spec.vocab, (batch, seq), device="cuda")
    adv = torch.randn(batch, device="cuda")
    step(model, opt, ids, adv)
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    for _ in range(STEPS - 1):
        step(model, opt, ids, adv)
    torch.cuda.synchronize()
    peak = torch.cuda.max_memory_allocated()
    del model, opt, ids, adv
    torch.cuda.empty_cache()
    return peak


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="Qwen/Qwen2-0.5B-Instruct,Qwen/Qwen2-1.5B-Instruct")
    ap.add_argument("--cases", default="4x1024,8x1024,4x2048", help="micro batch x sequence length, comma separated")
    ap.add_argument("--json", dest="json_out")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("no GPU visible to torch.cuda", file=sys.stderr)
        return 3
    rows = []
    print(f"{torch.cuda.get_device_name(0)}, torch {torch.__version__}")
    print(f"{'model':<28} {'batch':>5} {'seq':>5} {'ckpt':>4} {'predicted':>10} {'measured':>10} {'ratio':>6}")
    for name in args.models.split(","):
        spec = lookup(name)
        for case in args.cases.split(","):
            batch, seq = (int(x) for x in case.split("x"))
            for ckpt in (False, True):
                t0 = time.perf_counter()
                try:
                    measured = measure(spec, batch, seq, ckpt)
                except torch.OutOfMemoryError:
                    torch.cuda.empty_cache()
                    measured = None
                predicted = actor_step(spec, tokens=batch * seq, grad_ckpt=ckpt, plain=True)
                row = {"model": name, "params": spec.params, "batch": batch, "seq": seq, "grad_ckpt": ckpt,
                       "predicted_bytes": predicted.peak, "breakdown": predicted.parts, "measured_bytes": measured,
                       "ratio": round(predicted.peak / measured, 3) if measured else None,
                       "seconds": round(time.perf_counter() - t0, 1)}
                rows.append(row)
                shown = f"{measured / GIB:10.2f}" if measured else f"{'OOM':>10}"
                print(f"{name:<28} {batch:>5} {seq:>5} {'on' if ckpt else 'off':>4} {predicted.peak / GIB:10.2f} "
                      f"{shown} {row['ratio'] or '-':>6}", flush=True)
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "rows": rows}, f, indent=1)
    worst = max(abs(r["ratio"] - 1) for r in rows if r["ratio"])
    print(f"largest deviation: {worst:.1%}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
