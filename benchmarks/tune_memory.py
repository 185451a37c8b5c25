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

    python benchmarks/tune_memory.py --certificates [--json FILE]

No GPU: for each verl certificate kept from real GPUs (GPU_CHECK's, and the older H100 ones in
tests/data/certify), the job's shape as `rocmkit tune`'s memory model takes it (read from the certificate's
settings and verl overrides), the model's per-GPU peak for it, the peak verl measured and their ratio, as the
markdown table of docs/guides/tuning.md. rocmkit/tune/measured.py says what verl's figure is: the actor
process's running peak, so the prediction it is compared with is the larger of the training step and the
weight syncs before it.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))  # this checkout's rocmkit

from rocmkit.tune.measured import Comparison, NotComparable, compare  # noqa: E402
from rocmkit.tune.memory import GIB, actor_step  # noqa: E402
from rocmkit.tune.models import lookup  # noqa: E402

STEPS = 3
GPU_CHECK = REPO / "tests" / "data" / "certify" / "gpu-check"  # the certificates from lent GPUs (their README says how)
KEPT = ((GPU_CHECK, "*.json"), (REPO / "tests" / "data" / "certify", "verl-h100-*.json"))


def build(spec):
    import torch
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
    import torch

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
    import torch

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


def certificates() -> tuple[list[Comparison], list[tuple[str, str]]]:
    """Every kept certificate compared with the model, and those that cannot be, with the reason."""
    compared, skipped = [], []
    for folder, pattern in KEPT:
        for path in sorted(folder.glob(pattern)):
            try:
                doc = json.loads(path.read_text())
            except ValueError as exc:
                skipped.append((path.stem, f"not JSON ({exc})"))
                continue
            if not isinstance(doc, dict) or not str(doc.get("schema", "")).startswith("rocmkit.certificate/"):
                continue  # the doctor's document and the run summary beside the certificates
            try:
                compared.append(compare(path.stem, doc))
            except NotComparable as exc:
                skipped.append((path.stem, str(exc)))
    return compared, skipped


def _gib(n: int) -> str:
    return f"{n / GIB:.3f}"


def _row(c: Comparison) -> str:
    s = c.shape
    names = [d.strip().removeprefix("NVIDIA ") for d in c.device.split(",")]
    gpus = f"{len(names)} × {names[0]}" if names[0] else str(s.gpus)
    actor = (f"Megatron TP {s.tp} × PP {s.pp} × DP {s.dp}" if s.backend == "megatron" else
             f"{'FSDP1' if s.fsdp1 else 'FSDP2'} over {s.gpus}")
    layout = f"{actor}; vLLM: {s.gpus // s.rollout_tp} × TP {s.rollout_tp}"
    batch = f"{s.micro_batch} × {s.tokens // s.micro_batch}" if s.micro_batch else f"≤ {s.tokens} tokens"
    return " | ".join([
        "", c.name, gpus, layout, f"{s.model_name} ({s.model.params / 1e6:.2f} M)",
        batch + (", ckpt" if s.grad_ckpt else ""), f"{_gib(c.step.peak)} ({c.step.phase})",
        f"{_gib(c.first_sync.peak)} / {_gib(c.sync.peak)}",
        f"{_gib(c.predicted_first.peak)} / {_gib(c.measured_first)} ({c.ratio_first:.3f})",
        f"{_gib(c.predicted_last.peak)} / {_gib(c.measured_last)} ({c.ratio_last:.3f}) at {c.last_step}", ""]).strip()


def certificate_table(compared: list[Comparison], skipped: list[tuple[str, str]]) -> str:
    """The markdown that docs/guides/tuning.md shows (tests/test_tune_certified.py holds them equal)."""
    lines = ["| certificate | GPUs | layout: actor; rollout replicas × TP | model (parameters) "
             "| micro batch × sequence, at most | training step GiB (its peak) "
             "| weight sync GiB: first / after an update | step 1 GiB: predicted / measured (ratio) "
             "| last step GiB: predicted / measured (ratio) |",
             "| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: |"]
    lines += [_row(c) for c in compared]
    lines += [""] + [f"- `{name}`: not compared: {why}" for name, why in skipped]
    worst = max((abs(r - 1) for c in compared for r in (c.ratio_first, c.ratio_last)), default=0.0)
    lines += ["", f"Largest deviation: {worst:.1%}."]
    return "\n".join(lines)


def certificates_main(json_out: str | None) -> int:
    compared, skipped = certificates()
    if not compared:
        where = ", ".join(str((folder / pattern).relative_to(REPO)) for folder, pattern in KEPT)
        print(f"error: no certificate in {where} could be compared", file=sys.stderr)
        for name, why in skipped:
            print(f"  {name}: {why}", file=sys.stderr)
        return 2
    print(certificate_table(compared, skipped))
    if json_out:
        rows = [{"certificate": c.name, "device": c.device, "model": c.shape.model_name, "params": c.shape.model.params,
                 "gpus": c.shape.gpus, "backend": c.shape.backend, "megatron_tp": c.shape.tp,
                 "megatron_pp": c.shape.pp, "rollout_tp": c.shape.rollout_tp, "micro_batch": c.shape.micro_batch,
                 "tokens": c.shape.tokens, "grad_ckpt": c.shape.grad_ckpt,
                 "predicted": {"step": c.step.parts, "first_sync": c.first_sync.parts, "sync": c.sync.parts},
                 "step_1": {"predicted_bytes": c.predicted_first.peak, "measured_bytes": c.measured_first},
                 "last_step": {"step": c.last_step, "predicted_bytes": c.predicted_last.peak,
                               "measured_bytes": c.measured_last}} for c in compared]
        with open(json_out, "w") as f:
            json.dump({"rows": rows, "not_compared": dict(skipped)}, f, indent=1)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", default="Qwen/Qwen2-0.5B-Instruct,Qwen/Qwen2-1.5B-Instruct")
    ap.add_argument("--cases", default="4x1024,8x1024,4x2048", help="micro batch x sequence length, comma separated")
    ap.add_argument("--certificates", action="store_true",
                    help="no GPU: the model against the verl certificates kept from real GPUs")
    ap.add_argument("--json", dest="json_out")
    args = ap.parse_args()
    if args.certificates:
        return certificates_main(args.json_out)
    import torch

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
