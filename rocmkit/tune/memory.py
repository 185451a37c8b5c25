"""The memory model: bytes on one GPU for a training step of the actor and for the rollout engine, and on the
host for what verl offloads there.

Pure arithmetic on a ModelSpec. P = parameters, t = tokens of one micro batch, V = vocabulary, L = layers.
Each estimate keeps its parts by name, so `rocmkit tune --json` shows where the memory goes.

Training step, per GPU, the peak of three moments:
  forward end   states + bf16 working weights + saved activations + bf16 logits
  backward      states + working weights + saved activations + logits' backward + the output layer's gradient
  optimizer     states + gradients + AdamW's temporary (torch's foreach AdamW holds one fp32 copy of the
                parameters, the sqrt of the second moment, while it steps; without foreach it steps one tensor
                at a time and holds two fp32 temporaries of the largest: FSDP1's root unit, which keeps the
                embeddings, the untied output layer and the final norm, or FSDP2's largest parameter)
  states        fp32 master weights 4P + AdamW's two fp32 moments 8P, divided over the FSDP shards
  gradients     fp32, 4P, sharded the same way
Activations saved per token and layer (bf16 compute, flash/sdpa attention, SwiGLU MLP), counted from what
autograd keeps: the two norms' fp32 inputs and normalised outputs, the projections' bf16 inputs (under
autocast each linear casts its own copy), q/k/v after rotary, the attention output twice (kept by the
kernel and by o_proj after the reshape), the MLP's gate, up, activation and product (4 x intermediate).
With gradient checkpointing only each layer's input stays (r x hidden), plus one layer recomputed.
Logits: the plain step keeps bf16 logits (2), fp32 log-softmax (4) and softmax (4) for the entropy, and
its backward adds the gather's zero-filled fp32 gradient (4) and the entropy product's two (8): 22 bytes
per token and vocabulary entry. verl's actor, per verl's performance tuning guide,
uses 4 (fp32) + 2 (autocast) + 1 bytes for the entropy beside its bf16 logits: 9.

Weight sync, per GPU: the actor's process sends its weights to the colocated rollout engine through one
buffer of a fixed size (2 GiB by default) beside what stays resident; for a small model that buffer is most of
the actor's memory (weight_sync below).

verl's Megatron actor (megatron_step, megatron_weight_sync): bf16 weights and fp32 gradients in megatron-core's
buffers over TP x PP, the distributed optimizer's fp32 master weights and Adam's moments further over DP, the
reference model's bf16 weights in the same process, activations and logits split over TP (sequence parallel),
and the same weight-sync buffer.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .models import ModelSpec

GIB = 1 << 30
PLAIN_LOGITS_BYTES = 22
VERL_LOGITS_BYTES = 9  # verl's performance tuning guide, "Memory optimization for entropy calculation from logits", + bf16 logits
# verl 0.9.1's actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes
# (verl/trainer/config/rollout/rollout.yaml): the weight-sync buffer on every GPU of the actor.
VERL_SYNC_BUCKET = 2048 << 20


def sync_staging(rollout: str, bucket_bytes: int = VERL_SYNC_BUCKET) -> int:
    """What verl 0.9.1's weight sync stages on the actor's GPU beside the weights. vLLM's rollout copies every
    tensor into BucketedWeightSender's torch.empty(update_weights_bucket_megabytes) buffer; SGLang's groups the
    tensors as they are into lists up to that size (get_named_tensor_buckets) and hands SGLang their IPC handles:
    no buffer (on one H100 the tiny model's actor peaked at 0.09 GiB with SGLang, 2.08 GiB with vLLM)."""
    return 0 if rollout == "sglang" else bucket_bytes


# What the rollout engine needs beyond weights and KV cache: CUDA/HIP graphs, sampler, activations of one
# batch of max_num_batched_tokens. vLLM profiles this at start; 2 GiB + the prefill activations is typical.
ENGINE_OVERHEAD = 2 * GIB


@dataclass
class Estimate:
    parts: dict[str, int] = field(default_factory=dict)
    phase: str = ""

    @property
    def peak(self) -> int:
        return sum(self.parts.values())

    def gib(self) -> dict[str, float]:
        return {k: round(v / GIB, 2) for k, v in self.parts.items()}


def activation_bytes_per_token_layer(spec: ModelSpec, residual_bytes: int) -> int:
    """Everything autograd keeps for one token in one decoder layer (no checkpointing)."""
    h, q, kv, inter = spec.hidden, spec.q_dim, spec.kv_dim, spec.intermediate or spec.moe_intermediate
    autocast_copies = residual_bytes == 4  # fp32 residual: each linear casts its own bf16 input
    norms = 2 * (4 * h + residual_bytes * h)
    linear_inputs = (3 + 2) * 2 * h if autocast_copies else 2 * 2 * h
    attention = 2 * (q + 2 * kv) + 2 * q + 2 * q
    mlp = 4 * 2 * inter * (spec.experts_per_token if spec.experts else 1)
    return norms + linear_inputs + attention + mlp


def saved_activations(spec: ModelSpec, *, tokens: int, grad_ckpt: bool, residual_bytes: int = 2) -> int:
    per_layer = activation_bytes_per_token_layer(spec, residual_bytes)
    if grad_ckpt:  # each layer's input, and one layer recomputed in the backward
        return tokens * spec.layers * residual_bytes * spec.hidden + tokens * per_layer
    return tokens * spec.layers * per_layer


def largest_step_tensor(spec: ModelSpec, *, fsdp1: bool = False) -> int:
    """Elements of the largest tensor AdamW steps: FSDP1 flattens each unit's parameters into one (verl wraps each
    decoder layer, verl/utils/fsdp_utils.py get_fsdp_wrap_policy; the root unit keeps the rest), FSDP2 and one GPU
    keep every parameter its own."""
    if fsdp1:
        return max(spec.embedding_params + spec.hidden, spec.layer_params)
    return max(spec.vocab * spec.hidden, spec.hidden * max(spec.intermediate, spec.q_dim))


def adamw_temporary(spec: ModelSpec, *, shards: int = 1, foreach: bool = True, fsdp1: bool = False,
                    lora_rank: int = 0) -> int:
    """Bytes AdamW allocates while it steps (torch/optim/adam.py): foreach, the sqrt of every second moment at once
    (_multi_tensor_adam); one tensor at a time, its sqrt and that divided by the bias correction
    (_single_tensor_adam: `denom = (exp_avg_sq.sqrt() / bias_correction2_sqrt).add_(eps)`). With LoRA it steps the
    adapters alone: all of them, or the largest adapter matrix."""
    if foreach:
        return 4 * (spec.lora_params(lora_rank) or spec.params) // shards
    largest = (max(lora_rank * max(a, b) for a, b in spec.lora_linears()) if lora_rank else
               largest_step_tensor(spec, fsdp1=fsdp1))
    return 2 * 4 * largest // shards


def actor_step(spec: ModelSpec, *, tokens: int, grad_ckpt: bool = True, plain: bool = False,
               shards: int = 1, offload: bool = False, foreach: bool = True, fsdp1: bool = False,
               lora_rank: int = 0) -> Estimate:
    """Peak bytes on one GPU of one actor training step on `tokens` tokens.

    plain: one GPU, fp32 weights under bf16 autocast, torch AdamW (what benchmarks/tune_memory.py measures).
    Otherwise verl's FSDP2 actor: fp32 master weights sharded over `shards` GPUs, bf16 compute weights
    gathered a layer at a time (two in flight with prefetch), bf16 activations; `offload` is FSDP2's CPU
    offload policy (states, gradients and the optimizer step live on the host). foreach: torch's AdamW over
    all tensors at once (its default on GPUs), else one at a time (`override_optimizer_config={foreach:False}`);
    fsdp1: which tensors it steps without foreach (largest_step_tensor).
    lora_rank: LoRA (verl's actor_rollout_ref.model.lora_rank, peft's "all-linear" adapters): the base weights
    stay fp32 and frozen (verl casts the adapters to the base's dtype), gradients and AdamW's moments are the
    adapters' alone, and the output layer, frozen, has no weight gradient. The reference is the actor with its
    adapters off (verl's ref_in_actor): no second model.
    """
    p = spec.params
    adapters = spec.lora_params(lora_rank)
    trained = adapters or p  # what has gradients and AdamW moments
    activations = saved_activations(spec, tokens=tokens, grad_ckpt=grad_ckpt, residual_bytes=4 if plain else 2)
    logits_bytes = PLAIN_LOGITS_BYTES if plain else VERL_LOGITS_BYTES
    output_layer = spec.vocab * spec.hidden
    states = 0 if offload else (4 * (p + adapters) + 8 * trained) // shards
    grads = 0 if offload else 4 * trained // shards
    if plain:
        # autocast's cached bf16 casts live until the forward's autocast region ends; without checkpointing
        # autograd keeps them for the backward as well, with it only the recomputed layer's are rebuilt.
        fwd_weights = 2 * p
        bwd_weights = 2 * p if not grad_ckpt else 2 * (spec.layer_params + output_layer)
    else:
        fwd_weights = bwd_weights = 2 * (2 * spec.layer_params + output_layer)
    forward = Estimate({"master_weights_and_adam": states, "working_weights_bf16": fwd_weights,
                        "activations": activations, "logits": tokens * spec.vocab * 2}, "forward end")
    backward = Estimate({"master_weights_and_adam": states, "working_weights_bf16": bwd_weights,
                         "activations": activations, "logits": tokens * spec.vocab * logits_bytes,
                         "output_layer_grad": 0 if lora_rank else 4 * output_layer // (1 if plain else shards)},
                        "backward")
    optimizer = Estimate({"master_weights_and_adam": states, "grads": grads,
                          "adamw_temporary": 0 if offload else adamw_temporary(
                              spec, shards=shards, foreach=foreach, fsdp1=fsdp1, lora_rank=lora_rank)},
                         "optimizer step")
    return max((forward, backward, optimizer), key=lambda e: e.peak)


def weight_sync(spec: ModelSpec, *, shards: int = 1, bucket_bytes: int = VERL_SYNC_BUCKET, fsdp1: bool = True,
                param_offload: bool = False, adam_on_gpu: bool = True, lora_rank: int = 0) -> Estimate:
    """Peak bytes on one GPU of the actor's process while verl 0.9.1 sends its weights to the colocated vLLM
    (ActorRolloutRefWorker.update_weights, naive checkpoint engine): once before the first step, then after
    every update. What its code allocates beside what stays resident:

      bucket       BucketedWeightSender._init_buffer: torch.empty(update_weights_bucket_megabytes) on the GPU,
                   whatever the model's size, freed after the last bucket.
      copies       FSDP1 (verl's default strategy, fsdp) builds the weights' state_dict, and torch clones every
                   parameter into it: _full_post_state_dict_hook on one rank, _create_chunk_dtensor's clone of
                   the local chunk on several. 4P over the shards, held until the last tensor is sent. FSDP2
                   hands out its sharded DTensors as they are (verl skips the staging): no copies.
      gathered     several ranks: each DTensor's full_tensor() is a full fp32 copy of one parameter at a time.
      resident     the fp32 weights (model_dtype fp32) and AdamW's two moments over the shards. The moments exist
                   from the first optimizer step on (adam_on_gpu=False before it, or with optimizer_offload);
                   gradients are gone (verl's train-mode context calls zero_grad, set_to_none, on exit).
    With param_offload, FSDP1 loads the weights for state_dict() and offloads them before sending: the peak is
    the larger of that moment (weights + copies) and the sending one (copies + bucket).
    lora_rank: the adapters' weights beside the base's, and AdamW's moments of the adapters alone (actor_step).
    """
    p = spec.params
    adapters = spec.lora_params(lora_rank)
    weights = 4 * (p + adapters) // shards
    adam = 8 * (adapters or p) // shards if adam_on_gpu else 0
    copies = weights if fsdp1 else 0
    sending = Estimate({"weights_fp32": 0 if param_offload else weights, "adamw_moments": adam,
                        "state_dict_copies": copies, "gathered_param": 4 * spec.largest_tensor if shards > 1 else 0,
                        "bucket": bucket_bytes}, "weight sync")
    if not (param_offload and fsdp1):
        return sending
    staging = Estimate({"weights_fp32": weights, "adamw_moments": adam, "state_dict_copies": copies},
                       "weight sync (state dict)")
    return max((sending, staging), key=lambda e: e.peak)


def forward_only(spec: ModelSpec, *, tokens: int) -> int:
    """Extra bytes of a forward-only pass (old/ref log-probs): one layer's activations and the logits."""
    return tokens * (activation_bytes_per_token_layer(spec, 2) + spec.vocab * (2 + 7))


def rollout_static(spec: ModelSpec, *, tp: int) -> int:
    """The rollout engine's weights on one GPU (bf16, split over tensor parallelism)."""
    return 2 * spec.params // tp


def engine_bytes(rollout: str, fraction: float, *, gpu_bytes: int, free_bytes: int) -> int:
    """What the rollout engine takes for its weights and KV cache at a gpu_memory_utilization of `fraction`.
    vLLM (>= 0.7) reads it as a share of the GPU's total memory. SGLang reads it (as mem_fraction_static) as a share
    of the memory free when its model starts to load: 0.5.12's KV pool is `post_load_free - pre_load_free * (1 -
    fraction)` (sglang/srt/model_executor/model_runner_kv_cache_mixin.py, profile_max_num_token), so weights + KV
    = fraction x pre_load_free; on two H200s, 0.4 of 136.83 GB free gave a 54.74 GB KV cache beside 0 GB weights."""
    return int(fraction * (free_bytes if rollout == "sglang" else gpu_bytes))


def kv_bytes(spec: ModelSpec, *, tokens: int, tp: int) -> int:
    """KV cache for `tokens` tokens on one GPU: K and V heads split over TP (replicated when kv_heads < tp)."""
    shards = min(tp, spec.kv_heads)
    return tokens * spec.kv_bytes_per_token // shards


def megatron_state_parts(spec: ModelSpec, *, tp: int, pp: int, dp: int) -> dict[str, int]:
    """Megatron-core with the distributed optimizer, by part: bf16 weights 2P and fp32 main gradients 4P split
    over TP x PP; fp32 master weights 4P and Adam's two moments 8P further over DP."""
    p, model_parallel = spec.params, tp * pp
    return {"weights_bf16": 2 * p // model_parallel, "main_grads_fp32": 4 * p // model_parallel,
            "master_weights_fp32": 4 * p // (model_parallel * dp), "adam_moments": 8 * p // (model_parallel * dp)}


def megatron_states(spec: ModelSpec, *, tp: int, pp: int, dp: int) -> int:
    """All of megatron_state_parts: what a GPU keeps of the model between phases."""
    return sum(megatron_state_parts(spec, tp=tp, pp=pp, dp=dp).values())


def megatron_step(spec: ModelSpec, *, tokens: int, tp: int, pp: int = 1, dp: int = 1,
                  param_offload: bool = False) -> Estimate:
    """Peak bytes on one GPU of a training step of verl 0.9.1's Megatron actor (model_engine=megatron, the
    distributed optimizer, sequence parallelism and no recomputation: verl/trainer/config/engine/megatron.yaml),
    on a micro batch of `tokens` tokens.

      states       megatron_states: the bf16 weights 2P and the fp32 main gradients 4P over TP x PP, fp32 master
                   weights and Adam's two moments 12P further over DP. megatron-core's DistributedDataParallel
                   allocates the weights' and gradients' contiguous buffers when it wraps the model
                   (distributed/param_and_grad_buffer.py: _ParamAndGradBuffer.__init__, torch.zeros); its
                   zero_grad_buffer zeroes the gradients in place (reset) and never frees them.
      reference    the reference model lives in the same process (verl/workers/engine_workers.py:
                   ActorRolloutRefWorker builds self.ref beside self.actor), forward only, without a gradient
                   buffer (MegatronEngine._build_megatron_module: wrap_with_ddp False), its bf16 weights over
                   TP x PP on the GPU unless param_offload (ref/megatron_ref.yaml takes the actor's).
      activations  saved_activations without checkpointing (override_transformer_config.recompute_granularity
                   null), divided over TP: with sequence parallelism megatron-core splits every saved activation
                   of a layer over the TP ranks, and over PP each stage holds its layers. The count is a Hugging
                   Face layer's; TransformerEngine's fused layers are not counted apart.
      logits       tokens x vocabulary / TP (the output layer is column parallel over the vocabulary; sequence
                   parallelism gathers every token before it), bf16 in the forward and VERL_LOGITS_BYTES in the
                   backward: megatron-core's vocab_parallel_cross_entropy keeps an fp32 copy of its shard
                   (tensor_parallel/cross_entropy.py), beside the bf16 logits and their gradient.
      output_layer_grad  the output layer's bf16 weight gradient over TP, before it is added to the fp32 buffer.
    The optimizer step adds nothing of the model's size: the distributed optimizer's main gradients are views of
    the fp32 buffer, TransformerEngine's FusedAdam steps in place (megatron-core optimizer/distrib_optimizer.py).
    With PP > 1 this is the last stage, whose 1F1B schedule holds one micro batch at a time (the first holds up to
    PP: forward_backward_pipelining_without_interleaving runs PP - rank - 1 warm-up forwards, megatron-core
    pipeline_parallel/schedules.py), and the embedding and output layer are not placed on their stages.
    The moments are counted from step 1's forward on, although FusedAdam makes them at its end.
    """
    model_parallel = tp * pp
    states = megatron_states(spec, tp=tp, pp=pp, dp=dp)
    reference = 0 if param_offload else 2 * spec.params // model_parallel
    activations = saved_activations(spec, tokens=tokens, grad_ckpt=False) // model_parallel
    vocab_shard = spec.vocab * tokens // tp
    forward = Estimate({"states": states, "reference_weights_bf16": reference, "activations": activations,
                        "logits": 2 * vocab_shard}, "forward end")
    backward = Estimate({"states": states, "reference_weights_bf16": reference, "activations": activations,
                         "logits": VERL_LOGITS_BYTES * vocab_shard,
                         "output_layer_grad": 2 * spec.vocab * spec.hidden // tp}, "backward")
    return max((forward, backward), key=lambda e: e.peak)


def megatron_export_bytes(spec: ModelSpec, *, tp: int) -> int:
    """The largest set of temporary bf16 tensors that mbridge's export_weights (mbridge core/bridge.py) holds for
    one weight while verl sends it. With TP > 1 it all-gathers the TP shards of each split weight (the full
    tensor, in TP pieces) and concatenates them (_weight_merge_across_tp: a second full tensor, and for the gated
    MLP's fc1 the gate and up halves apart first: three at the last cat); splitting the fused QKV into q, k and v
    (_weight_to_hf_format) reshapes strided slices, copies beside the fused tensor, at any TP. The vocabulary
    slices of the embedding and output layer are views. A dense SwiGLU model (MoE: one expert's tensors)."""
    h, inter = spec.hidden, spec.intermediate or spec.moe_intermediate
    qkv = (spec.q_dim + 2 * spec.kv_dim) * h
    if tp == 1:  # the parameters themselves are sent; only the QKV split copies
        return 2 * qkv
    return 2 * max(2 * spec.vocab * h, 2 * qkv, 2 * spec.q_dim * h, 2 * inter * h, 3 * 2 * inter * h)


def megatron_weight_sync(spec: ModelSpec, *, tp: int, pp: int = 1, dp: int = 1,
                         bucket_bytes: int = VERL_SYNC_BUCKET, param_offload: bool = False,
                         optimizer_offload: bool = False, adam_on_gpu: bool = True) -> Estimate:
    """Peak bytes on one GPU of a Megatron actor's process while verl 0.9.1 sends its weights to the colocated
    vLLM (ActorRolloutRefWorker.update_weights, the naive checkpoint engine, as for FSDP: weight_sync): once
    before the first step, then after every update.

      export       MegatronEngine.get_per_tensor_param (verl/workers/engine/megatron/transformer_impl.py) loads
                   the weights without their gradients (load_megatron_model_to_gpu, load_grad=False) and, with
                   vanilla_mbridge, hands out bridge.export_weights(module): each weight gathered whole from its
                   TP shards, one at a time (megatron_export_bytes).
      bucket       BucketedWeightSender._init_buffer (verl/workers/rollout/vllm_rollout/
                   bucketed_weight_transfer.py): torch.empty(update_weights_bucket_megabytes) on the GPU,
                   whatever the model's size; each exported tensor is copied into it.
      resident     the bf16 weights over TP x PP; the fp32 main-gradient buffer (megatron-core DDP keeps it
                   allocated; verl's train-mode exit only zeroes it: EngineTrainModeCtx, zero_grad_buffer) unless
                   param_offload, which moves it to the host with the weights; the distributed optimizer's fp32
                   master shards, made when the optimizer is built (distrib_optimizer.py:
                   _build_model_and_main_param_groups), and Adam's two moments, which TransformerEngine's FusedAdam
                   creates at its first step (FusedAdam.step: initialize_state where the state is empty):
                   adam_on_gpu=False before step 1; both on the host with optimizer_offload; the reference
                   model's bf16 weights (megatron_step) unless param_offload.
    """
    parts = megatron_state_parts(spec, tp=tp, pp=pp, dp=dp)
    if param_offload:
        parts["main_grads_fp32"] = 0
    if optimizer_offload:
        parts["master_weights_fp32"] = 0
    if optimizer_offload or not adam_on_gpu:
        parts["adam_moments"] = 0
    reference = 0 if param_offload else parts["weights_bf16"]  # the same bf16 weights over TP x PP
    return Estimate({**parts, "reference_weights_bf16": reference, "export": megatron_export_bytes(spec, tp=tp),
                     "bucket": bucket_bytes}, "weight sync")


def host_offload(spec: ModelSpec, *, backend: str, gpus_per_node: int, gpus: int, param_offload: bool,
                 optimizer_offload: bool, offload_policy: bool = False, tp: int = 1, pp: int = 1,
                 lora_rank: int = 0) -> Estimate:
    """Host memory on one node for what verl keeps there, by part (verl 0.9.1's FSDP engine and Megatron utils).

    FSDP trains fp32 weights (fsdp.yaml model_dtype: fp32) sharded over every GPU of the job, so a node holds
    gpus_per_node / gpus of each: param_offload moves the weights (4P) and optimizer_offload AdamW's two moments
    (8P) to the host between phases; offload_policy (FSDP2's CPUOffloadPolicy) keeps the weights, the gradients
    (4P) and the moments there throughout, and verl then ignores the two others. Megatron's param_offload moves
    the bf16 weights (2P over TP x PP; every data-parallel rank holds its own copy) and optimizer_offload the
    distributed optimizer's fp32 master weights and moments (12P over every GPU). All of it is pinned memory,
    which the kernel cannot swap out. With LoRA (FSDP) the gradients and moments are the adapters' alone.
    """
    p = spec.params
    adapters = spec.lora_params(lora_rank)
    trained = adapters or p

    def node_share(total: int) -> int:
        return total * gpus_per_node // gpus

    parts: dict[str, int] = {}
    if backend == "megatron":
        if param_offload:
            parts["weights_bf16"] = 2 * p // (tp * pp) * gpus_per_node
        if optimizer_offload:
            parts["master_weights_and_adamw_fp32"] = node_share(12 * p)
        return Estimate(parts, "between phases")
    if offload_policy:
        parts = {"weights_fp32": node_share(4 * (p + adapters)), "grads_fp32": node_share(4 * trained),
                 "adamw_fp32": node_share(8 * trained)}
        return Estimate(parts, "throughout")
    if param_offload:
        parts["weights_fp32"] = node_share(4 * (p + adapters))
    if optimizer_offload:
        parts["adamw_fp32"] = node_share(8 * trained)
    return Estimate(parts, "between phases")
