"""What a verl certification chose and what its rollout did, for the host: the attention the setup picked (and
the overrides it adds), a refusal or failed check from the setup, and from run.log whether vLLM compiled and
captured graphs, what its sleep mode freed, and which layers a Megatron actor was built with. Pure: takes the setup's report and log text, returns data."""

from __future__ import annotations

import re
import statistics

from . import attention
from . import sleep_pool
from ...judge import check
from ...loglines import source

# vLLM 0.24.0's own lines (vllm/v1/worker/gpu_model_runner.py:6657, vllm/compilation/monitor.py:20 and 53,
# vllm/v1/engine/core.py:328-346, vllm/v1/worker/gpu_worker.py:182)
GRAPHS_RE = re.compile(r"Graph capturing finished in (\d+(?:\.\d+)?) secs?, took (-?\d+(?:\.\d+)?) GiB")
# 0.24.0 says "torch.compile and initial profiling/warmup run together took N s in total" (monitor.py:53)
COMPILE_RE = re.compile(r"torch\.compile (?:and initial profiling/warmup run together )?took (\d+(?:\.\d+)?) s in total")
ENGINE_INIT_RE = re.compile(r"init engine \(profile, create kv cache, warmup model\) took (\d+(?:\.\d+)?) s")
SLEEP_RE = re.compile(r"Sleep mode freed (\d+(?:\.\d+)?) GiB memory, (\d+(?:\.\d+)?) GiB memory is still in use")
WAKE_WEIGHTS_RE = re.compile(r"to wake up tags \['weights'\]")  # vllm/v1/.../abstract.py: the weight sync's start
# SGLang 0.5.12's own lines (python/sglang/srt/model_executor/model_runner.py, load_model; mem_cache/memory_pool.py),
# one per tensor-parallel rank: what its memory saver releases at each sleep and takes back at each wake
SGLANG_WEIGHTS_RE = re.compile(r"Load weight end\. elapsed=(\d+(?:\.\d+)?) s, .*?mem usage=(\d+(?:\.\d+)?) GB")
SGLANG_KV_RE = re.compile(r"KV Cache is allocated\. #tokens: (\d+), (?:K size: (\d+(?:\.\d+)?) GB, V size: "
                          r"(\d+(?:\.\d+)?) GB|KV size: (\d+(?:\.\d+)?) GB)")
# Ray prefixes a worker's line with its actor and pid, "(vLLMHttpServer pid=9553)", one per rollout replica. Its
# driver folds lines that repeat across processes into one "[repeated Nx across cluster]" line (numbers ignored),
# so with dedup on, replicas' sleeps merge; certify runs verl with RAY_DEDUP_LOGS=0 (overrides.environment), and
# a folded line still counts N times in the totals.
FOLDED_RE = re.compile(r"\[repeated (\d+)x across cluster\]")
# verl's Megatron workers print the model's TransformerConfig once each ("TF config: TransformerConfig(...)",
# verl/models/mcore/config_converter.py): its layer implementation says whether TransformerEngine ran
TF_CONFIG_RE = re.compile(r"TF config: TransformerConfig\(.*")
TF_IMPL_RE = re.compile(r"\btransformer_impl='(\w+)'")
TF_ATTENTION_RE = re.compile(r"\battention_backend=<AttnBackend\.(\w+)")
TF_SEQUENCE_PARALLEL_RE = re.compile(r"\bsequence_parallel=(True|False)")


def refusal(report: dict) -> tuple[str, str] | None:
    """The setup stopped because the implementation asked for by name cannot run in the target (exit 3)."""
    doc = report.get("attention")
    return attention.refusal(doc, doc.get("found")) if doc else None


def sleep_pool_check(report: dict) -> dict | None:
    doc = report.get("sleep_pool")
    if doc is None:
        return None
    passed, detail, hint = sleep_pool.judge(doc)
    return check("vLLM sleep-mode pool", passed, detail + (f" (hint: {hint})" if hint and not passed else ""))


def per_source(text: str, rx: re.Pattern) -> tuple[dict[str, int], bool]:
    """How many times each source printed a line matching rx, Ray's folded lines counted N times; and whether a
    folded line was among them (then the per-source split is Ray's, not the replicas')."""
    counts: dict[str, int] = {}
    folded = False
    for line in text.splitlines():
        if rx.search(line):
            m = FOLDED_RE.search(line)
            folded = folded or m is not None
            who = source(line)
            counts[who] = counts.get(who, 0) + (int(m.group(1)) if m else 1)
    return counts, folded


def from_log(text: str) -> dict:
    """vLLM's compile, graph capture, engine start and sleep-mode figures, as its log lines say them."""
    graphs = [(float(a), float(b)) for a, b in GRAPHS_RE.findall(text)]
    sleeps = [(float(a), float(b)) for a, b in SLEEP_RE.findall(text)]
    sleeps_by, folded_sleeps = per_source(text, SLEEP_RE)
    wakes_by, folded_wakes = per_source(text, WAKE_WEIGHTS_RE)
    compiled = [float(x) for x in COMPILE_RE.findall(text)]
    init = [float(x) for x in ENGINE_INIT_RE.findall(text)]
    return {
        "graphs_captured": bool(graphs), "graph_capture_s": graphs[0][0] if graphs else None,
        "graph_gib": graphs[0][1] if graphs else None,
        "compile_s": compiled[0] if compiled else None, "engine_init_s": init[0] if init else None,
        "sleeps": sum(sleeps_by.values()), "sleeps_per_replica": sleeps_by,
        "weight_syncs": sum(wakes_by.values()), "weight_syncs_per_replica": wakes_by,
        "folded": folded_sleeps or folded_wakes,
        "sleep_freed_gib": [min(f for f, _ in sleeps), max(f for f, _ in sleeps)] if sleeps else None,
        "sleep_still_in_use_gib": [min(u for _, u in sleeps), max(u for _, u in sleeps)] if sleeps else None,
    }


def megatron_model(text: str) -> dict | None:
    """The layers verl's Megatron actor was built with, from its TransformerConfig line: transformer_engine or
    local (megatron-core's own layers, without TransformerEngine), the attention backend, sequence parallelism.
    None when no Megatron worker printed one (an FSDP run)."""
    m = TF_CONFIG_RE.search(text)
    if not m:
        return None

    def field(rx: re.Pattern) -> str | None:
        found = rx.search(m.group(0))
        return found.group(1) if found else None

    impl, parallel = field(TF_IMPL_RE), field(TF_SEQUENCE_PARALLEL_RE)
    return {"transformer_impl": impl, "attention_backend": field(TF_ATTENTION_RE),
            "sequence_parallel": None if parallel is None else parallel == "True",
            "transformer_engine": impl == "transformer_engine"}


def sglang_memory(log_text: str) -> dict | None:
    """What each SGLang rank allocated for the weights and the KV cache, as its log says (GB, per rank)."""
    weights = [float(m.group(2)) for m in SGLANG_WEIGHTS_RE.finditer(log_text)]
    kv = [(int(m.group(1)), float(m.group(4)) if m.group(4) else float(m.group(2)) + float(m.group(3)))
          for m in SGLANG_KV_RE.finditer(log_text)]
    if not weights and not kv:
        return None
    return {"ranks": max(len(weights), len(kv)), "weights_gb": max(weights, default=None),
            "kv_cache_gb": max((g for _, g in kv), default=None), "kv_tokens": max((t for t, _ in kv), default=None)}


def record(report: dict, log_text: str, rollout_graphs: bool) -> dict:
    """The certificate's "verl" section: what was chosen, and what the rollout was seen doing."""
    seen = from_log(log_text)
    att = report.get("attention")
    return {
        "attention": {k: att[k] for k in ("asked", "chosen", "why")} if att else None,
        "sglang": ({**report["sglang"], "memory": sglang_memory(log_text)} if report.get("sglang") else None),
        "rollout_graphs": {"asked": rollout_graphs, "exercised": seen["graphs_captured"],
                           "capture_s": seen["graph_capture_s"], "compile_s": seen["compile_s"]},
        "engine_init_s": seen["engine_init_s"],
        # vLLM's model inspection, done beside the setup (rocmkit/certify/intarget/vllm_modelinfo.py)
        "model_inspection": report.get("modelinfo"),
        "megatron_model": megatron_model(log_text),
        "sleep_mode": ({"sleeps": seen["sleeps"], "per_replica": seen["sleeps_per_replica"],
                        "weight_syncs": seen["weight_syncs"], "weight_syncs_per_replica": seen["weight_syncs_per_replica"],
                        "folded_by_ray": seen["folded"], "freed_gib": seen["sleep_freed_gib"],
                        "still_in_use_gib": seen["sleep_still_in_use_gib"], "allocator": report.get("sleep_pool")}
                       if seen["sleeps"] or report.get("sleep_pool") else None),
    }


def sglang_line(doc: dict) -> str:
    line = (f"SGLang {doc.get('version') or '?'}: {doc['attention_backend']} attention, {doc['sampling_backend']} "
            f"sampler ({doc['why']})")
    if doc.get("mem_fraction_static") is not None:
        line += f"; mem_fraction_static {doc['mem_fraction_static']:g} (verl's gpu_memory_utilization)"
    mem = doc.get("memory")
    if mem and mem.get("kv_cache_gb") is not None:
        line += (f"; per GPU: weights {mem['weights_gb']:g} GB, KV cache {mem['kv_cache_gb']:g} GB "
                 f"({mem['kv_tokens']} tokens), released at each sleep and taken back at each wake by its memory "
                 "saver (torch_memory_saver)")
    return line


def span(pair: list[float]) -> str:
    return f"{pair[0]}" if pair[0] == pair[1] else f"{pair[0]}–{pair[1]}"


def mfu(series) -> dict | None:
    """verl's own MFU of the update (perf/mfu/actor) over the steps after the first; verl says 0 where it knows no
    peak, and then there is none."""
    values = [v for v in series("perf/mfu/actor") if v > 0]
    if not values:
        return None
    return {"update": round(statistics.fmean(values[1:] or values), 4), "source": "verl perf/mfu/actor"}
