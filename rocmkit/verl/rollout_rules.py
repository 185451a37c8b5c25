"""verl-check's rules for the rollout engine's own settings, which verl hands on and the engine checks only as it
starts, minutes into the job (after Ray, the actor and the reference model):

- the model's attention heads split over the rollout's tensor-parallel ranks (SGLang's model classes assert it,
  sglang/srt/models/qwen2.py; vLLM's ModelConfig.verify_with_parallel_config);
- with SGLang, what `actor_rollout_ref.rollout.engine_kwargs.sglang` overrides: verl 0.9.1 builds SGLang's server
  arguments from its own config and adds engine_kwargs last (verl/workers/rollout/sglang_rollout/
  async_sglang_server.py, launch_server), so `mem_fraction_static` there wins over `gpu_memory_utilization`, and
  `tp_size` there starts an engine on a different number of GPUs than verl placed;
- SGLang's attention and sampling backends on the target's platform: its NVIDIA kernels (fa3, flashinfer, ...)
  do not exist on ROCm (gfx942, gfx950), where verl picks `aiter` (sglang/srt/server_args.py lists the backends
  by platform: ATTENTION_BACKEND_CHOICES, SAMPLING_BACKEND_CHOICES);
- a LoRA job's weight sync with FSDP1 (`actor_rollout_ref.actor.strategy=fsdp`): verl 0.9.1's
  collect_lora_params (verl/utils/fsdp_utils.py) finds no LoRA tensors under FSDP1, on one rank or two. With
  `layered_summon` it falls back to `summon_full_params(offload_to_cpu=True)`, which FSDP refuses on one GPU
  (NO_SHARD); without it the rollout is sent an empty adapter, and vLLM's `add_lora` raises StopIteration in its
  engine while verl waits. verl's examples/tuning/lora/run_qwen3_8b_fsdp.sh on one H200 met both, at its first
  weight sync. Under FSDP2 the same function returns every LoRA tensor.

Pure and stdlib only, like batch_rules: config_check.py imports it beside itself in the target Python.
"""

from __future__ import annotations

import json
import os

if __package__:
    from .batch_rules import Problem
else:  # beside config_check.py in the target's Python
    from batch_rules import Problem  # type: ignore[no-redef]

R = "actor_rollout_ref.rollout"
KW = f"{R}.engine_kwargs.sglang"
_VERL = "verl/workers/rollout/sglang_rollout/async_sglang_server.py, launch_server"
_SGLANG = "sglang/srt/server_args.py"

# SGLang 0.5.12's server arguments verl sets from its own config, and the key it reads each from
# (tp_size is TP x DP)
SET_BY_VERL = {
    "model_path": "actor_rollout_ref.model.path",
    "dtype": f"{R}.dtype",
    "mem_fraction_static": f"{R}.gpu_memory_utilization",
    "disable_cuda_graph": f"{R}.enforce_eager",
    "tp_size": f"{R}.tensor_model_parallel_size",
    "dp_size": f"{R}.data_parallel_size",
    "ep_size": f"{R}.expert_parallel_size",
    "load_format": f"{R}.load_format",
    "trust_remote_code": "actor_rollout_ref.model.trust_remote_code",
    "max_running_requests": f"{R}.max_num_seqs",
    "skip_tokenizer_init": f"{R}.skip_tokenizer_init",
    "quantization": f"{R}.quantization",
}
# ... and those that place the engine on the GPUs verl gave it, or let verl put it to sleep between rollouts:
# another value breaks the job rather than tuning it
VERL_OWNS = ("model_path", "tp_size", "dp_size", "ep_size", "base_gpu_id", "gpu_id_step", "node_rank", "nnodes",
             "dist_init_addr", "enable_memory_saver")

# sglang/srt/server_args.py 0.5.12, ATTENTION_BACKEND_CHOICES by its own comments
ATTENTION = {
    "common": ("triton", "torch_native", "flex_attention", "nsa", "dsv4", "compressed"),
    "nvidia": ("cutlass_mla", "fa3", "fa4", "flashinfer", "flashmla", "trtllm_mla", "tokenspeed_mla", "trtllm_mha",
               "dual_chunk_flash_attn"),
    "amd": ("aiter", "wave"),
    "other": ("intel_amx", "ascend", "intel_xpu"),
}
SAMPLING = {"common": ("pytorch",), "nvidia": ("flashinfer",), "other": ("ascend",)}
_PLATFORM = {"rocm": "ROCm (gfx942, gfx950)", "cuda": "NVIDIA's CUDA"}
# what to use instead, on each platform, for a dense model (nsa and dsv4 are DeepSeek's)
_INSTEAD = {("rocm", "attention"): "aiter (verl's choice on ROCm), triton, wave or torch_native",
            ("cuda", "attention"): "flashinfer (verl's choice from SGLang 0.5.12), fa3, triton or torch_native",
            ("rocm", "sampling"): "pytorch (SGLang's choice on ROCm)",
            ("cuda", "sampling"): "flashinfer (SGLang's choice where it is installed) or pytorch"}


def platform() -> str:
    """The target's GPU platform by its torch: "cuda" for a CUDA build, else "rocm" (a ROCm build, or a CPU build
    checking a job meant for AMD's GPUs, which rocmkit's stacks are)."""
    try:
        import torch
    except ImportError:
        return "rocm"
    return "cuda" if getattr(torch.version, "cuda", None) and not getattr(torch.version, "hip", None) else "rocm"


def problems(get, on: str | None = None) -> list[dict]:
    """Every rule on one composed config; get(key) returns the resolved value or None; on: "rocm" or "cuda"
    (default: the target's, platform())."""
    found = _heads(get) + _lora_fsdp1(get)
    if get(f"{R}.name") == "sglang":
        kwargs = get(KW) or {}
        found += _overrides(get, dict(kwargs)) + _backends(dict(kwargs), on or platform())
    return [p.to_json() for p in found]


def _heads(get) -> list[Problem]:
    """The model's attention heads (config.json where the model path is a local folder) split over the rollout's
    TP ranks: every head to one rank, and the KV heads either split too or copied whole onto each rank."""
    path, tp = get("actor_rollout_ref.model.path"), get(f"{R}.tensor_model_parallel_size")
    if not isinstance(path, str) or not isinstance(tp, int) or tp < 2:
        return []
    try:
        with open(os.path.join(os.path.expanduser(path), "config.json")) as f:
            cfg = json.load(f)
    except (OSError, ValueError):
        return []  # a hub name, or a folder verl's own model check reports
    cfg = cfg.get("text_config") or cfg
    heads, kv = cfg.get("num_attention_heads"), cfg.get("num_key_value_heads") or cfg.get("num_attention_heads")
    if not isinstance(heads, int) or not isinstance(kv, int):
        return []
    ok = [n for n in range(1, heads + 1) if heads % n == 0 and (kv % n == 0 or n % kv == 0)]
    engine = "SGLang" if get(f"{R}.name") == "sglang" else "vLLM"
    if heads % tp:
        why = f"the model's {heads} attention heads do not split over {tp} ranks"
    elif kv % tp and tp % kv:
        why = f"the model's {kv} KV heads neither split over {tp} ranks nor copy whole onto each"
    else:
        return []
    source = ("sglang/srt/models/qwen2.py, Qwen2Attention" if engine == "SGLang" else
              "vllm/config/model.py, ModelConfig.verify_with_parallel_config")
    return [Problem("rollout-tp-heads", (f"{R}.tensor_model_parallel_size",),
                    f"{R}.tensor_model_parallel_size={tp}: {why} ({path}/config.json); {engine} stops at its "
                    f"start with an assertion", fix=f"a TP of {', '.join(str(n) for n in ok if n <= 16)}", source=source)]


def _lora_fsdp1(get) -> list[Problem]:
    if not ((get("actor_rollout_ref.model.lora_rank") or 0) > 0 and get("actor_rollout_ref.actor.strategy") == "fsdp"
            and not get("actor_rollout_ref.model.lora.merge")):
        return []
    gpus = (get("trainer.n_gpus_per_node") or 0) * (get("trainer.nnodes") or 0)
    layered = get(f"{R}.layered_summon") is True
    empty = ("the rollout is sent an empty adapter at the first weight sync (vLLM's add_lora raises StopIteration "
             "in its engine, and verl waits for the sync until the deadline)")
    keys = ("actor_rollout_ref.actor.strategy",)
    if layered and gpus == 1:
        dies = ("its layered summon then falls back to summoning the whole model with offload_to_cpu=True, which "
                "FSDP refuses on one GPU (NO_SHARD): the job dies at its first weight sync with \"NotImplementedError: "
                "offload_to_cpu=True and NO_SHARD is not supported yet\"")
        keys = (f"{R}.layered_summon", *keys)
    elif layered:
        dies = f"its layered summon's fallback failed on two CPU ranks, or {empty}"
    else:
        dies = empty
    return [Problem("lora-fsdp1-weight-sync", keys,
                    "LoRA with FSDP1 (actor_rollout_ref.actor.strategy=fsdp): verl's weight sync collects no LoRA "
                    f"tensors under FSDP1; {dies}",
                    fix="actor_rollout_ref.actor.strategy=fsdp2 (verl's weight sync returns every LoRA tensor under "
                    "FSDP2)",
                    source="verl/utils/fsdp_utils.py, collect_lora_params; torch/distributed/fsdp/"
                    "_unshard_param_utils.py, _validate_unshard_params_args; vllm/lora/model_manager.py, "
                    "_create_merged_loras_inplace")]


def _overrides(get, kwargs: dict) -> list[Problem]:
    out = []
    for key in sorted(kwargs):
        value, own = kwargs[key], SET_BY_VERL.get(key)
        ours = f" over {own}={get(own)!r}" if own else ""
        if key in VERL_OWNS:
            out.append(Problem("sglang-verl-owns", (f"{KW}.{key}",),
                               f"{KW}.{key}={value!r}: verl sets {key} itself" +
                               (f" from {own}={get(own)!r}" if own else "") + ", to place SGLang's engine on the "
                               "GPUs it gave the replica and to put it to sleep between rollouts; the value here "
                               "would replace verl's", fix=f"drop {KW}.{key}" + (f"; set {own}" if own else ""),
                               source=_VERL))
        elif own:
            out.append(Problem("sglang-overrides-verl", (f"{KW}.{key}",),
                               f"{KW}.{key}={value!r} wins{ours}: verl passes engine_kwargs after its own "
                               f"settings, so SGLang takes {value!r} and {own} has no effect on it",
                               fix=f"set {own} alone", severity="warning", source=_VERL))
    fraction = kwargs.get("mem_fraction_static")
    if fraction is not None and not (isinstance(fraction, (int, float)) and 0 < fraction < 1):
        out.append(Problem("sglang-mem-fraction", (f"{KW}.mem_fraction_static",),
                           f"{KW}.mem_fraction_static={fraction!r}: SGLang's share of the GPU memory for the "
                           "weights and the KV cache is a fraction between 0 and 1", fix="e.g. 0.5", source=_SGLANG))
    return out


def _backends(kwargs: dict, on: str) -> list[Problem]:
    out = []
    mine = "amd" if on == "rocm" else "nvidia"
    for key in ("attention_backend", "prefill_attention_backend", "decode_attention_backend", "sampling_backend"):
        value = kwargs.get(key)
        if value is None:
            continue
        kind = "sampling" if key == "sampling_backend" else "attention"
        table = SAMPLING if kind == "sampling" else ATTENTION
        owner = next((k for k, names in table.items() if value in names), None)
        if owner in ("common", mine):
            continue
        said = (f"SGLang has no {kind} backend {value!r}" if owner is None else
                f"{value!r} is one of SGLang's {_OWNERS[owner]} backends, whose kernels do not exist on {_PLATFORM[on]}")
        out.append(Problem("sglang-backend", (f"{KW}.{key}",), f"{KW}.{key}={value}: {said}",
                           fix=f"one of: {_INSTEAD[on, kind]}", source=_SGLANG))
    return out


_OWNERS = {"nvidia": "NVIDIA", "amd": "AMD", "other": "other platforms'"}
