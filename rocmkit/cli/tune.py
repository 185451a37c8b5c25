"""`rocmkit tune`: verl settings for this model on these GPUs, with the reason for each."""

from __future__ import annotations

import shlex

import click

from ..errors import UsageError
from ..output import document
from ..tune import host
from .common import echo_json, json_option, warn


def gpu_memory(name: str, root: str = "/") -> tuple[str, int]:
    """(product name, bytes a job may count on per visible GPU) for --gpu NAME or auto."""
    from .. import archs
    from ..tune.memory import GIB

    if name != "auto":
        product = archs.product_named(name) or archs.product_named(f"{name} SXM")
        if product is None or not product.memory_gib:
            known = sorted(p.name for a in archs.all_archs().values() for p in a.products if p.memory_gib)
            raise UsageError(f"--gpu {name}: not in rocmkit's arch table", hint="one of: " + ", ".join(known) + ", or auto")
        return product.name, product.memory_gib * GIB
    from ..host.facts import collect

    devices = [d for d in collect(root).devices if d.product and d.product.memory_gib]
    if not devices:
        where = "this host" if root == "/" else root
        raise UsageError(f"--gpu auto: no GPU of rocmkit's arch table on {where} (the doctor's reader found none)",
                         hint="name it: --gpu MI300X")
    d = devices[0]
    # Partitions of one GPU share its HBM: a job on all of them gets memory / partitions each.
    return f"{d.product.name} ({d.partition_mode or 'SPX'})", d.product.memory_gib * GIB // max(1, d.mode_partitions)


@click.command("tune")
@click.option("--model", required=False, metavar="M",
              help="A directory holding config.json, the file itself, or a model of rocmkit's table (Hugging Face id "
                   "or its last part, e.g. Qwen2-7B-Instruct).")
@click.option("--gpu", default=None, metavar="G", help="MI300X, MI325X, MI350X, MI355X, H100, H200, ... or auto "
              "(this host's, through the doctor's reader; CPX/DPX partitions divide the memory).")
@click.option("--root", type=click.Path(file_okay=False, exists=True), default="/", show_default=True,
              help="With --gpu auto, and for the host memory: read the GPUs and /proc/meminfo from this captured tree "
                   "(rocmkit doctor --capture) instead.")
@click.option("--host-memory-gib", type=click.IntRange(1), default=None, metavar="N",
              help="Check the host memory the offloads need against nodes of N GiB (planning for another machine); "
                   "a plan that does not fit them is exit 2. Default: this host's MemTotal, and a plan that does not "
                   "fit it is a warning.")
@click.option("--gpus-per-node", type=click.IntRange(1, 64), default=8, show_default=True,
              help="GPUs each node gives the job (trainer.n_gpus_per_node); the rollout's TP stays within one node.")
@click.option("--nodes", type=click.IntRange(1, 4096), default=1, show_default=True, help="Nodes in the job (trainer.nnodes).")
@click.option("--prompt-len", type=click.IntRange(1), default=1024, show_default=True,
              help="Longest prompt, in tokens (verl's data.max_prompt_length).")
@click.option("--response-len", type=click.IntRange(1), default=1024, show_default=True,
              help="Longest response, in tokens (verl's data.max_response_length).")
@click.option("--n", "rollouts", type=click.IntRange(1), default=5, show_default=True, help="Responses per prompt.")
@click.option("--train-batch", type=click.IntRange(1), default=1024, show_default=True, help="Prompts per step.")
@click.option("--rollout", type=click.Choice(["vllm", "sglang"]), default="vllm", show_default=True,
              help="The inference engine that generates the responses (actor_rollout_ref.rollout.name).")
@click.option("--backend", type=click.Choice(["fsdp", "megatron"]), default="fsdp", show_default=True,
              help="The actor's training backend: FSDP, or Megatron (verl 0.9's model_engine=megatron).")
@click.option("--lora-rank", type=click.IntRange(0), default=0, show_default=True,
              help="LoRA adapters of this rank (actor_rollout_ref.model.lora_rank; 0: full-parameter training).")
@click.option("--micro-batch", type=click.IntRange(1), default=None, help="Ask about one step: sequences per micro batch.")
@click.option("--seq-len", type=click.IntRange(1), default=None, help="Ask about one step: tokens per sequence.")
@click.option("--grad-ckpt/--no-grad-ckpt", default=None, help="Ask about one step: with or without checkpointing.")
@click.option("--verl-python", default=None, metavar="PATH",
              help="A Python with verl installed, to compose the overrides with verl's own config before they are "
                   "printed (default: this Python, when it has verl; otherwise the composition is skipped and said).")
@click.option("--list-models", is_flag=True, help="List rocmkit's model table and exit.")
# certify's and slurm's counts are --gpus/--gpus-per-node; here --gpu is the model: a --gpus given out of habit is
# answered with what it means here, not click's "did you mean --gpu"
@click.option("--gpus", "gpus_count", type=int, default=None, hidden=True)
@json_option
def tune(model, gpu, root, gpus_per_node, nodes, prompt_len, response_len, rollouts, train_batch, rollout, backend,
         lora_rank, micro_batch, seq_len, grad_ckpt, host_memory_gib, verl_python, list_models, gpus_count,
         as_json) -> None:
    """Compute verl settings for a model on a set of GPUs, each with its reason and source.

    From the model's config (parameters, layers, hidden size, KV heads, vocabulary) and the GPU's memory, a
    memory model (docs/guides/tuning.md, "The memory model") decides the rollout TP (the smallest that holds the weights and a
    useful KV cache), gpu_memory_utilization by the engine's meaning, the training token budget, dynamic
    batching, checkpointing, offload, Megatron TP/PP, and the batch sizes verl's divisibility rules accept.
    Prints the overrides to paste after `python3 -m verl.trainer.main_ppo`, then why each was chosen;
    --json gives the same with the memory breakdown (memory.actor_step_peak_gib, and
    memory.weight_sync_peak_gib: the actor's weights going to the rollout engine). A model or batch that
    cannot fit is exit 2, saying what does not fit by how much and what would.

    It also states the host memory per node that verl's offloads take (the actor's weights and AdamW's
    moments, pinned) and checks it against this host's memory, or --host-memory-gib's.
    """
    from ..tune import models, plan

    if gpus_count is not None:
        raise UsageError(f"--gpus {gpus_count}: tune plans per node, so the count is --gpus-per-node (and --nodes); "
                         "--gpu names the GPU model", hint=f"--gpus-per-node {gpus_count} --gpu MI300X (or auto)")
    if list_models:
        for key, entry in models.table().items():
            spec = models.from_config(entry, key, entry.get("source", ""))
            click.echo(f"{key:<44} {spec.params / 1e9:7.2f}B  {spec.model_type}")
        return
    if not model or not gpu:
        raise UsageError("--model and --gpu are required", hint="e.g. rocmkit tune --model Qwen2-7B-Instruct --gpu MI300X")
    spec = models.lookup(model)
    gpu_name, gpu_bytes = gpu_memory(gpu, root)
    host_bytes, host_source, host_declared = host.memory(host_memory_gib, root)
    job = plan.Job(spec, gpu_name, gpu_bytes, gpus_per_node=gpus_per_node, nodes=nodes, prompt_len=prompt_len,
                   response_len=response_len, n=rollouts, train_batch=train_batch, rollout=rollout, backend=backend,
                   micro_batch=micro_batch, seq_len=seq_len, grad_ckpt=grad_ckpt, lora_rank=lora_rank,
                   host_bytes=host_bytes, host_source=host_source, host_declared=host_declared)
    result = plan.make(job)
    misfit = result.notes[0] if result.host["fits"] is False else None
    if misfit:  # loud on a terminal and in a log, whatever goes to stdout; said in full once
        warn("the plan does not fit the host's memory: host_memory and notes in the JSON say by how much; "
             + plan.OTHER_NODES if as_json else misfit)
    composed = compose_with_verl(result.overrides(), verl_python)
    if as_json:
        echo_json(document("tune", {
            "model": {"name": spec.name, "source": spec.source, "params": spec.params, "layers": spec.layers,
                      "hidden": spec.hidden, "kv_heads": spec.kv_heads, "vocab": spec.vocab},
            "gpu": {"name": gpu_name, "memory_gib": round(gpu_bytes / 2**30, 2), "per_node": gpus_per_node,
                    "nodes": nodes},
            "overrides": result.overrides(),
            "settings": [{"key": s.key, "value": s.value, "reason": s.reason, "source": s.source}
                         for s in result.settings],
            "memory": result.memory, "host_memory": result.host, "notes": result.notes, "verl_check": composed}))
        return
    click.echo(f"# {spec.name} ({spec.params / 1e9:.2f}B) on {nodes} x {gpus_per_node} {gpu_name}")
    click.echo("python3 -m verl.trainer.main_ppo \\")
    lines = [shlex.quote(o) for o in result.overrides()]
    for i, line in enumerate(lines):
        click.echo(f"    {line}" + (" \\" if i < len(lines) - 1 else ""))
    click.echo("\n# why")
    for s in result.settings:
        if s.source != "user":
            click.echo(f"#  {s.override()}: {s.reason} [{s.source}]")
    if "actor_step_peak_gib" in result.memory:
        click.echo(f"# actor step peak {result.memory['actor_step_peak_gib']} GiB per GPU ({result.memory['actor_step_phase']})")
    if "weight_sync_peak_gib" in result.memory:
        parts = ", ".join(f"{k.replace('_', ' ')} {v} GiB"
                          for k, v in result.memory["weight_sync_breakdown_gib"].items() if v)
        click.echo(f"# actor weight sync peak {result.memory['weight_sync_peak_gib']} GiB per GPU ({parts})")
    h = result.host
    parts = ", ".join(f"{plan.HOST_PARTS[k]} {v} GiB" for k, v in h["breakdown_gib"].items())
    click.echo(f"# host memory per node for the offloads ({h['when']}): {h['need_gib']} GiB ({parts})"
               + ("" if h["fits"] is None else f"; {h['source']}: {h['have_gib']} GiB, {h['usable_gib']} usable: "
                  + ("fits" if h["fits"] else "does not fit (the warning says by how much)")))
    for note in result.notes:
        if note is not misfit:  # on stderr above
            click.echo(f"# note: {note}")
    click.echo(f"# verl {composed['verl']}'s config accepts these overrides" if composed["ok"] else
               f"# not composed with verl's config: {composed['skipped']}")


def compose_with_verl(overrides: list[str], verl_python: str | None) -> dict:
    """verl's own Hydra config, composed and validated with the overrides (rocmkit.verl.config_check in the
    Python that has verl). A rejection is exit 1 with verl's words; no verl anywhere is said, not failed."""
    import importlib.util
    import json
    import sys
    import tempfile

    from ..errors import Failed
    from ..runtime import host_rocmkit, proc
    from ..verl import config_check

    python = verl_python or (sys.executable if importlib.util.find_spec("verl") else None)
    if python is None:
        return {"ok": False, "verl": None, "skipped": "verl is not installed in this Python (--verl-python names one)"}
    with tempfile.TemporaryDirectory(prefix="rocmkit-tune-") as tmp:
        path = f"{tmp}/overrides.json"
        with open(path, "w") as f:
            json.dump(overrides, f)  # the plan's own, its algorithm among them
        out = proc.capture([python, "-m", config_check.__name__, "--structure", path], timeout=300,
                           env=host_rocmkit.host_env())  # this rocmkit's config check, in the Python that has verl
    text = "\n".join(out.tail)
    try:
        verdict = json.loads(text[text.rindex('{"ok"'):].splitlines()[0])
    except ValueError:
        raise Failed(f"{python} could not check the overrides with verl: {' '.join(out.tail[-3:])[:400]}",
                     hint="its Python needs verl and rocmkit installed") from None
    if not verdict["ok"]:
        raise Failed("verl's config rejects the computed overrides: " + "; ".join(verdict["errors"]),
                     hint="report this as a rocmkit bug with the command line")
    return {**verdict, "skipped": None}
