"""The memory model: bytes on one GPU for a training step of the actor and for the rollout engine, and on the
host for what verl offloads there.

Pure arithmetic on a ModelSpec. P = parameters, t = tokens of one micro batch, V = vocabulary, L = layers.
Each estimate keeps its parts by name, so `rocmkit tune --json` shows where the memory goes.

Training step, per GPU, the peak of three moments:
  forward end   states + bf16 working weights + saved activations + bf16 logits
  backward      states + working weights + saved activations + logits' backward + the output layer's gradient
  optimizer     states + gradients + AdamW's temporary (torch's foreach AdamW holds one fp32 copy of the
                parameters, the sqrt of the second moment, while it steps)
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


def actor_step(spec: ModelSpec, *, tokens: int, grad_ckpt: bool = True, plain: bool = False,
               shards: int = 1, offload: bool = False) -> Estimate:
    """Peak bytes on one GPU of one actor training step on `tokens` tokens.

    plain: one GPU, fp32 weights under bf16 autocast, torch AdamW (what benchmarks/tune_memory.py measures).
    Otherwise verl's FSDP2 actor: fp32 master weights sharded over `shards` GPUs, bf16 compute weights
    gathered a layer at a time (two in flight with prefetch), bf16 activations; `offload` is FSDP2's CPU
    offload policy (states, gradients and the optimizer step live on the host).
    """
    p = spec.params
    activations = saved_activations(spec, tokens=tokens, grad_ckpt=grad_ckpt, residual_bytes=4 if plain else 2)
    logits_bytes = PLAIN_LOGITS_BYTES if plain else VERL_LOGITS_BYTES
    output_layer = spec.vocab * spec.hidden
    states = 0 if offload else (4 + 8) * p // shards
    grads = 0 if offload else 4 * p // shards
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
                         "output_layer_grad": 4 * output_layer // (1 if plain else shards)}, "backward")
    optimizer = Estimate({"master_weights_and_adam": states, "grads": grads,
                          "adamw_temporary": 0 if offload else 4 * p // shards}, "optimizer step")
    return max((forward, backward, optimizer), key=lambda e: e.peak)


def weight_sync(spec: ModelSpec, *, shards: int = 1, bucket_bytes: int = VERL_SYNC_BUCKET, fsdp1: bool = True,
                param_offload: bool = False, adam_on_gpu: bool = True) -> Estimate:
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
    """
    p = spec.params
    weights = 4 * p // shards
    adam = 8 * p // shards if adam_on_gpu else 0
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


def kv_bytes(spec: ModelSpec, *, tokens: int, tp: int) -> int:
    """KV cache for `tokens` tokens on one GPU: K and V heads split over TP (replicated when kv_heads < tp)."""
    shards = min(tp, spec.kv_heads)
    return tokens * spec.kv_bytes_per_token // shards


def megatron_states(spec: ModelSpec, *, tp: int, pp: int, dp: int) -> int:
    """Megatron-core with the distributed optimizer: bf16 weights 2P and fp32 main gradients 4P split over
    TP x PP; fp32 master weights and Adam moments 12P further over DP."""
    model_parallel = tp * pp
    return (2 + 4) * spec.params // model_parallel + 12 * spec.params // (model_parallel * dp)


def host_offload(spec: ModelSpec, *, backend: str, gpus_per_node: int, gpus: int, param_offload: bool,
                 optimizer_offload: bool, offload_policy: bool = False, tp: int = 1, pp: int = 1) -> Estimate:
    """Host memory on one node for what verl keeps there, by part (verl 0.9.1's FSDP engine and Megatron utils).

    FSDP trains fp32 weights (fsdp.yaml model_dtype: fp32) sharded over every GPU of the job, so a node holds
    gpus_per_node / gpus of each: param_offload moves the weights (4P) and optimizer_offload AdamW's two moments
    (8P) to the host between phases; offload_policy (FSDP2's CPUOffloadPolicy) keeps the weights, the gradients
    (4P) and the moments there throughout, and verl then ignores the two others. Megatron's param_offload moves
    the bf16 weights (2P over TP x PP; every data-parallel rank holds its own copy) and optimizer_offload the
    distributed optimizer's fp32 master weights and moments (12P over every GPU). All of it is pinned memory,
    which the kernel cannot swap out.
    """
    p = spec.params

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
        parts = {"weights_fp32": node_share(4 * p), "grads_fp32": node_share(4 * p), "adamw_fp32": node_share(8 * p)}
        return Estimate(parts, "throughout")
    if param_offload:
        parts["weights_fp32"] = node_share(4 * p)
    if optimizer_offload:
        parts["adamw_fp32"] = node_share(8 * p)
    return Estimate(parts, "between phases")
