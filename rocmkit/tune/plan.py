"""The decisions: verl overrides for a model on a set of GPUs, each with its reason and source.

Sources: "AMD MI300X study" (Performance Optimization for Reinforcement Learning on AMD GPUs, verl GRPO on
8 x MI300X, https://www.yottalabs.ai/post/performance-optimization-for-reinforcement-learning-on-amd-gpus: TP=1
rollout 2.3-4.3x faster when the model fits, PP=1 best), "guide" (verl's performance tuning guide,
https://verl.readthedocs.io/en/latest/perf/perf_tuning.html), "verl" (verl 0.9.1's own rules, e.g. its
batch divisibility checks), "arithmetic" (the memory model in rocmkit.tune.memory).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import UsageError
from . import batches, memory
from .memory import GIB
from .models import ModelSpec

TP_CHOICES = (1, 2, 4, 8)
HEADROOM = 0.90  # of a GPU's memory a plan may fill: the allocator's fragmentation, NCCL and HIP/CUDA context
MIN_KV_SEQUENCES = 32  # concurrent full-length sequences a rollout replica needs to keep its decode batch busy
MAX_UTILIZATION = 0.70  # guide: 0.5-0.7 balances throughput against OOM
# Of a node's memory verl's offloads may take: Ray's object store reserves 30 % by default
# (https://docs.ray.io/en/latest/ray-core/scheduling/memory-management.html), and the workers, vLLM and the OS
# live in what is left beside the offloads.
HOST_USABLE = 0.70
HOST_PARTS = {"weights_fp32": "fp32 weights", "grads_fp32": "fp32 gradients", "adamw_fp32": "AdamW's fp32 moments",
              "weights_bf16": "bf16 weights",
              "master_weights_and_adamw_fp32": "fp32 master weights and AdamW's moments"}
HOST_MISFIT = "DOES NOT FIT THE HOST: "  # the note that leads a plan whose offloads the host cannot hold
OTHER_NODES = "if the job runs on other nodes than this host, --host-memory-gib N checks the plan against theirs"


@dataclass
class Setting:
    key: str
    value: object
    reason: str
    source: str

    def override(self) -> str:
        v = self.value
        return f"{self.key}={str(v) if not isinstance(v, bool) else ('True' if v else 'False')}"


@dataclass
class Job:
    model: ModelSpec
    gpu_name: str
    gpu_bytes: int
    gpus_per_node: int = 8
    nodes: int = 1
    prompt_len: int = 1024
    response_len: int = 1024
    n: int = 5
    train_batch: int = 1024
    rollout: str = "vllm"
    backend: str = "fsdp"
    micro_batch: int | None = None  # asked for: the single step to report
    seq_len: int | None = None
    grad_ckpt: bool | None = None
    lora_rank: int = 0  # LoRA adapters (peft's "all-linear") of this rank; 0: full-parameter training
    host_bytes: int | None = None  # the node's memory (MemTotal), None: unknown, not checked
    host_source: str = ""  # where host_bytes comes from, or why it is unknown
    host_declared: bool = False  # the user named the host's memory: a plan that does not fit it is refused

    @property
    def gpus(self) -> int:
        return self.gpus_per_node * self.nodes

    @property
    def seq(self) -> int:
        return self.prompt_len + self.response_len


@dataclass
class Plan:
    job: Job
    settings: list[Setting] = field(default_factory=list)
    memory: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    host: dict = field(default_factory=dict)  # host memory the offloads need per node, and the check against it

    def add(self, key: str, value, reason: str, source: str) -> None:
        self.settings.append(Setting(key, value, reason, source))

    def value(self, key: str):
        return next(s.value for s in self.settings if s.key == key)

    def overrides(self) -> list[str]:
        return [s.override() for s in self.settings]


def _gib(n: int) -> str:
    return f"{n / GIB:.1f} GiB"


# The study measured its TP=1 rollout speed-up on MI300X: it is cited for the GPUs of that chip (gfx942: MI300X, its
# VF and HF parts, MI308X, MI325X), not for a GPU it never ran on (MI250X, MI355X, H100).
STUDIED_ARCH = "gfx942"


def on_studied_gpu(gpu_name: str) -> bool:
    """Whether the AMD MI300X study's measurements apply to this GPU (`gpu_name` as tune names it: a product of
    the arch table, perhaps with its partition mode, "MI300X (CPX)")."""
    from .. import archs

    product = archs.product_named(gpu_name.split(" (")[0])
    return product is not None and product.arch == STUDIED_ARCH


def _rollout(job: Job, plan: Plan, budget: int) -> None:
    m = job.model
    need = {}
    for tp in TP_CHOICES:
        if tp > job.gpus_per_node or job.gpus % tp or m.heads % tp:
            continue
        need[tp] = memory.rollout_static(m, tp=tp) + memory.kv_bytes(m, tokens=MIN_KV_SEQUENCES * job.seq, tp=tp) \
            + memory.ENGINE_OVERHEAD
        if need[tp] <= budget:
            break
    else:
        smallest = min(need.values()) if need else 0
        raise UsageError(f"{m.name} does not fit the rollout engine on {job.gpu_name}: weights + KV cache for "
                         f"{MIN_KV_SEQUENCES} sequences of {job.seq} tokens need {_gib(smallest)} per GPU at "
                         f"TP={max(need) if need else '?'}, {_gib(smallest - budget)} more than the "
                         f"{_gib(budget)} the engine may take ({MAX_UTILIZATION} of the GPU)",
                         hint="more GPUs per node (a larger TP), a GPU with more memory, or a smaller model")
    replicas = job.gpus // tp
    studied = on_studied_gpu(job.gpu_name)
    if tp == 1:
        why = (f"weights {_gib(memory.rollout_static(m, tp=1))} + KV for {MIN_KV_SEQUENCES} sequences fit one GPU: "
               f"TP=1 gives {batches.count(replicas, 'replica')}, " +
               ("the fastest rollout (TP=1 2.3-4.3x faster than larger TP on MI300X)" if studied else
                "each decoding without tensor-parallel all-reduces"))
    else:
        why = (f"TP={tp // 2} needs {_gib(need[tp // 2])} per GPU for weights + KV, more than the {_gib(budget)} "
               f"the engine may take ({MAX_UTILIZATION} of the GPU): TP={tp} is the smallest that fits "
               f"({batches.count(replicas, 'replica')})")
    plan.add("actor_rollout_ref.rollout.tensor_model_parallel_size", tp, why,
             "AMD MI300X study + arithmetic" if studied and tp == 1 else "arithmetic")
    engine_bytes = need[tp] + memory.kv_bytes(m, tokens=job.train_batch * job.n * job.seq // replicas, tp=tp)
    engine_bytes = min(engine_bytes, budget)
    fraction = round(engine_bytes / job.gpu_bytes, 2)
    if job.rollout == "sglang":
        # SGLang's fraction is of the free memory at start, for static memory (weights + KV).
        free = int(job.gpu_bytes * HEADROOM)
        fraction = min(round(engine_bytes / free, 2), 0.85)
        why = (f"SGLang reads it as a fraction of the free memory for weights + KV ({_gib(engine_bytes)} of "
               f"about {_gib(free)} free beside the offloaded actor)")
    else:
        fraction = max(min(fraction, MAX_UTILIZATION), round(need[tp] / job.gpu_bytes + 0.01, 2))
        why = (f"vLLM >= 0.7 reads it as a fraction of total memory: {_gib(int(fraction * job.gpu_bytes))} of "
               f"{_gib(job.gpu_bytes)} holds the weights and the KV of the whole batch's rollouts where it fits "
               f"(capped at {MAX_UTILIZATION}: the guide's 0.5-0.7 balances throughput and OOM)")
    plan.add("actor_rollout_ref.rollout.gpu_memory_utilization", fraction, why, "guide + arithmetic")
    plan.add("actor_rollout_ref.rollout.max_num_batched_tokens", max(8192, job.seq),
             "above 2048 for throughput, and at least one whole prompt + response", "guide")
    plan.memory["rollout_engine_gib"] = round(memory.engine_bytes(job.rollout, fraction, gpu_bytes=job.gpu_bytes,
                                                                  free_bytes=int(job.gpu_bytes * HEADROOM)) / GIB, 2)
    plan.memory["rollout_weights_kv_min_gib"] = round(need[tp] / GIB, 2)


def _fsdp(job: Job, plan: Plan, per_gpu_mini: int) -> None:
    m, limit = job.model, int(job.gpu_bytes * HEADROOM)
    shards = job.gpus
    # Cheapest first: the largest token budget without recomputation, then with it; CPU offload last.
    tries = [(f, ckpt, False) for f in (3, 2, 1) for ckpt in (False, True)] + [(f, True, True) for f in (2, 1)]
    for factor, ckpt, offload in tries:
        est = memory.actor_step(m, tokens=factor * job.seq, grad_ckpt=ckpt, shards=shards, offload=offload,
                                lora_rank=job.lora_rank)
        # The weight sync after every update, as the plan runs it: the weights and AdamW's moments offloaded
        # between phases (param_offload and optimizer_offload below), FSDP1 (verl's default strategy) unless
        # FSDP2's offload policy or LoRA needs FSDP2.
        sync = memory.weight_sync(m, shards=shards, fsdp1=not (offload or job.lora_rank), param_offload=True,
                                  adam_on_gpu=False, lora_rank=job.lora_rank,
                                  bucket_bytes=memory.sync_staging(job.rollout))
        if max(est.peak, sync.peak) <= limit:
            break
    else:  # est: one sequence, checkpointed and offloaded, the last try
        worst = max((est, sync), key=lambda e: e.peak)
        raise UsageError(f"one training sequence of {job.seq} tokens of {m.name} needs {_gib(worst.peak)} per GPU "
                         f"({worst.phase}) even with checkpointing and CPU offload, {_gib(worst.peak - limit)} more "
                         f"than {HEADROOM:.0%} of the {job.gpu_name}'s {_gib(job.gpu_bytes)}",
                         hint="shorter --prompt-len/--response-len, sequence parallelism (ulysses), or more memory")
    max_tokens = factor * job.seq
    plan.add("actor_rollout_ref.model.use_remove_padding", m.remove_padding,
             f"sequence packing is tested for model type {m.model_type}" if m.remove_padding else
             f"verl has not tested packing for model type {m.model_type}", "guide")
    plan.add("actor_rollout_ref.actor.use_dynamic_bsz", True,
             "packs micro batches to a token budget: fewer, fuller forward passes", "guide")
    plan.add("actor_rollout_ref.actor.ppo_max_token_len_per_gpu", max_tokens,
             f"{factor} x (prompt + response); the step's peak is {_gib(est.peak)} of {_gib(job.gpu_bytes)}"
             + ("" if factor == 3 else " (3x does not fit)"), "guide + arithmetic")
    for key in ("actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu",
                "actor_rollout_ref.ref.log_prob_max_token_len_per_gpu"):
        plan.add(key, 2 * max_tokens, "forward only: 2x the training budget", "guide")
    fits = max(1, max_tokens // job.seq)
    micro = batches.divisor_at_most(per_gpu_mini, fits)
    plan.add("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", micro,
             f"used when dynamic batching is off: whole sequences in the token budget ({fits} fit) that divide the "
             f"{per_gpu_mini} a rank trains per mini batch (mini batch x n / DP)", "arithmetic + verl")
    plan.add("actor_rollout_ref.model.enable_gradient_checkpointing", ckpt,
             "activations of the token budget do not fit without it" if ckpt else
             "the step fits without recomputation, which costs about a third more compute", "guide + arithmetic")
    plan.add("actor_rollout_ref.actor.fsdp_config.offload_policy", offload,
             "during training: the sharded states do not fit beside the step, so FSDP2 keeps the weights, gradients "
             "and AdamW's moments on the host and steps the optimizer on the CPU (verl then ignores param_offload and "
             "optimizer_offload)" if offload else
             f"during training: the states stay on the GPUs, sharded over {shards} GPUs they fit "
             f"({_gib(est.parts['master_weights_and_adam'])} per GPU); param_offload and optimizer_offload move them "
             "out only between phases", "arithmetic")
    if offload or job.lora_rank:
        plan.add("actor_rollout_ref.actor.strategy", "fsdp2", "offload_policy is FSDP2's CPUOffloadPolicy: verl's "
                 "FSDP1 engine (strategy fsdp, the default) never reads it" if offload else
                 "LoRA under FSDP1 (strategy fsdp, the default) sends vLLM no adapter tensors at the weight sync "
                 "(rocmkit verl-check's rule lora-fsdp1-weight-sync)", "verl")
    plan.memory["actor_step_peak_gib"] = round(est.peak / GIB, 2)
    plan.memory["actor_step_phase"] = est.phase
    plan.memory["actor_step_breakdown_gib"] = est.gib()
    plan.memory["weight_sync_peak_gib"] = round(sync.peak / GIB, 2)
    plan.memory["weight_sync_breakdown_gib"] = sync.gib()


def _megatron(job: Job, plan: Plan) -> tuple[int, int]:
    """Megatron's TP x PP: the smallest TP within a node whose states fit, and pipeline stages only when even the
    node's largest TP does not (the guide's order, "smallest TP that fits, then PP": TP's all-reduces stay on the
    node's links, and the study measured PP=1 best)."""
    m, limit = job.model, int(job.gpu_bytes * HEADROOM)
    act = memory.saved_activations(m, tokens=job.seq, grad_ckpt=True)
    # megatron-core splits the query heads and the KV groups over TP (divide() in its attention).
    tps = [t for t in TP_CHOICES if t <= job.gpus_per_node and m.heads % t == 0 and m.kv_heads % t == 0]
    tried: dict[tuple[int, int], int] = {}
    for pp in (1, 2, 4, 8):
        for tp in tps:
            if job.gpus % (tp * pp) or m.layers % pp:
                continue
            states = memory.megatron_states(m, tp=tp, pp=pp, dp=job.gpus // (tp * pp))
            tried[tp, pp] = states + act // (tp * pp)
            if tried[tp, pp] > limit:
                continue
            if tp == pp == 1:
                why = "the model's states fit one GPU with the distributed optimizer over DP: TP=1, PP=1 is fastest"
            else:
                smaller = [t for t in tps if t < tp and (t, pp) in tried]
                why = (f"states + activations need {_gib(tried[tp, pp])} per GPU at TP={tp}, PP={pp}, within the "
                       f"{_gib(limit)} a plan may fill" + (f"; TP={smaller[-1]} would need {_gib(tried[smaller[-1], pp])}"
                                                           if smaller else ""))
            plan.add("actor_rollout_ref.actor.megatron.tensor_model_parallel_size", tp, why, "guide + arithmetic")
            studied = on_studied_gpu(job.gpu_name)
            if pp == 1:
                pp_why = ("PP=1 measured best on MI300X (MFU 14.0 % vs 11.3 % with PP)" if studied else
                          "PP=1: no pipeline bubbles while the states fit without stages")
            else:
                widest = max(t for t in tps if (t, 1) in tried) if any((t, 1) in tried for t in tps) else None
                pp_why = ((f"the node's largest TP, {widest}, needs {_gib(tried[widest, 1])} per GPU without pipeline "
                           f"stages, more than {_gib(limit)}: PP={pp} splits the layers" if widest else
                           f"no TP within the node divides the job without pipeline stages: PP={pp}")
                          + " (pipeline stages only when TP within the node is not enough)")
            plan.add("actor_rollout_ref.actor.megatron.pipeline_model_parallel_size", pp, pp_why,
                     "AMD MI300X study" if pp == 1 and studied else "guide + arithmetic")
            plan.memory["megatron_states_gib"] = round(states / GIB, 2)
            return tp, pp
    raise UsageError(f"{m.name}'s Megatron states do not fit {job.gpus} x {job.gpu_name} at any TP x PP",
                     hint="more nodes, or the FSDP backend with CPU offload")


def make(job: Job) -> Plan:
    if job.rollout not in ("vllm", "sglang") or job.backend not in ("fsdp", "megatron"):
        raise UsageError("--rollout is vllm or sglang; --backend is fsdp or megatron")
    limit = job.model.max_positions
    if limit and job.prompt_len + job.response_len > limit:
        raise UsageError(f"--prompt-len {job.prompt_len} + --response-len {job.response_len} = "
                         f"{job.prompt_len + job.response_len} tokens, past {job.model.name}'s {limit} positions "
                         "(config.json's max_position_embeddings): vLLM refuses a max_model_len past it",
                         hint=f"keep the two within {limit} (e.g. --response-len {max(1, limit - job.prompt_len)}), or "
                              "plan a model whose context is longer (rope scaling in its config.json)")
    plan = Plan(job)
    # The algorithm is a setting like any other, so the text, the JSON and every command that reads a saved plan
    # get it from here: without it verl runs its default estimator, gae, which is PPO with a critic.
    plan.add("algorithm.adv_estimator", "grpo", "GRPO: each prompt's n responses are scored against their group, "
             "no critic (verl's default, gae, is PPO and trains a critic model these settings do not plan for)",
             "verl")
    plan.add("data.train_batch_size", job.train_batch, "as asked", "user")
    plan.add("data.max_prompt_length", job.prompt_len, "as asked", "user")
    plan.add("data.max_response_length", job.response_len, "as asked", "user")
    plan.add("actor_rollout_ref.rollout.n", job.n, "as asked", "user")
    plan.add("actor_rollout_ref.rollout.name", job.rollout, "as asked", "user")
    plan.add("trainer.n_gpus_per_node", job.gpus_per_node, "as asked", "user")
    plan.add("trainer.nnodes", job.nodes, "as asked", "user")
    if job.lora_rank:
        if job.backend != "fsdp" or job.model.experts:
            raise UsageError("--lora-rank is planned for dense models with the FSDP backend (verl's LoRA examples), "
                             f"not {'Megatron' if job.backend != 'fsdp' else 'a mixture of experts'}",
                             hint="--backend fsdp and a dense model, or plan without --lora-rank")
        plan.add("actor_rollout_ref.model.lora_rank", job.lora_rank, "as asked: the base weights stay frozen in "
                 "fp32, gradients and AdamW's moments are the adapters' alone", "user")
    # Colocated: while the engine generates, the actor's weights and optimizer wait on the host.
    weights = "fp32 weights (as verl trains them)" if job.backend == "fsdp" else "bf16 weights"
    plan.add(_offload_key(job, "param_offload"), True, f"between phases: the actor's {weights} go to host memory "
             "while the rollout engine generates, and back to the GPU for training", "AMD MI300X study")
    plan.add(_offload_key(job, "optimizer_offload"), True, "between phases: AdamW's moments go to host memory while "
             "the rollout engine generates, and back to the GPU for the optimizer step", "AMD MI300X study")
    # The engine's share: what the offloaded actor leaves, capped at the guide's 0.7 (sleep mode does not always
    # give every page back: vllm-project/vllm#37533), so a model that needs nearly the whole GPU gets a larger TP.
    budget = min(int(job.gpu_bytes * HEADROOM) - memory.ENGINE_OVERHEAD // 2, int(job.gpu_bytes * MAX_UTILIZATION))
    _rollout(job, plan, budget)
    if job.backend == "megatron":
        plan.settings.insert(0, Setting("model_engine", "megatron", "verl 0.9's Megatron actor "
                                        "(ppo_megatron_trainer is a deprecated alias)", "verl"))
        tp, pp = _megatron(job, plan)
        dp = job.gpus // (tp * pp)
        per_gpu = batches.mini_batch(job, plan, dp)
        micro = batches.divisor_at_most(per_gpu, 4)
        plan.add("actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu", micro,
                 ("the study's 4" if micro == 4 else "the largest below the study's 4")
                 + f" that divides the {per_gpu} a rank trains per mini batch (mini batch x n / DP={dp}); so the train "
                 "batch x n divides by DP x micro batch as verl's validate_config asks", "AMD MI300X study + verl")
        plan.add("actor_rollout_ref.actor.use_dynamic_bsz", False, "fixed micro batches, as in AMD's MI300X study", "AMD MI300X study")
    else:
        dp = job.gpus  # FSDP without Ulysses sequence parallelism: every GPU is a data-parallel rank
        per_gpu = batches.mini_batch(job, plan, dp)
        _fsdp(job, plan, per_gpu)
    batches.log_prob_micro(job, plan, dp)
    if job.micro_batch or job.seq_len or job.grad_ckpt is not None:
        _asked_step(job, plan)
    _host(job, plan)
    return plan


def _offload_key(job: Job, knob: str) -> str:
    return f"actor_rollout_ref.actor.{'fsdp_config' if job.backend == 'fsdp' else 'megatron'}.{knob}"


def _host(job: Job, plan: Plan) -> None:
    """The host memory per node the planned offloads take, checked against the node's: a plan that cannot fit
    is refused when the user named the host (--host-memory-gib), and said loudly when it is the host tune runs on,
    which may not be the one the job will run on."""
    megatron = job.backend == "megatron"
    est = memory.host_offload(
        job.model, backend=job.backend, gpus_per_node=job.gpus_per_node, gpus=job.gpus,
        param_offload=plan.value(_offload_key(job, "param_offload")),
        optimizer_offload=plan.value(_offload_key(job, "optimizer_offload")),
        offload_policy=not megatron and plan.value("actor_rollout_ref.actor.fsdp_config.offload_policy"),
        tp=plan.value("actor_rollout_ref.actor.megatron.tensor_model_parallel_size") if megatron else 1,
        pp=plan.value("actor_rollout_ref.actor.megatron.pipeline_model_parallel_size") if megatron else 1,
        lora_rank=job.lora_rank)
    plan.host = {"need_gib": round(est.peak / GIB, 1), "breakdown_gib": est.gib(), "when": est.phase,
                 "have_gib": None, "usable_gib": None, "source": job.host_source, "fits": None}
    if job.host_bytes is None:
        plan.notes.append(f"host memory not checked: {job.host_source}")
        return
    usable = int(job.host_bytes * HOST_USABLE)
    plan.host.update(have_gib=round(job.host_bytes / GIB, 1), usable_gib=round(usable / GIB, 1),
                     fits=est.peak <= usable)
    if est.peak <= usable:
        return
    parts = ", ".join(f"{HOST_PARTS[k]} {_gib(v)}" for k, v in est.parts.items())
    what = (f"verl's offloads need {_gib(est.peak)} of pinned host memory per node ({parts}), more than the "
            f"{_gib(usable)} usable of the {_gib(job.host_bytes)} of {job.host_source} ({HOST_USABLE:.0%} of it: "
            "Ray's object store takes 30 % by default)")
    spread = ("more nodes (FSDP shards the states over every GPU of the job: a node holds 1/nodes of them)" if not
              megatron else "a larger Megatron TP x PP (every GPU keeps its own copy of its share of the bf16 weights)"
              " or more nodes (the optimizer's states are sharded over every GPU)")
    hint = f"{spread}, or nodes with at least {_gib(int(est.peak / HOST_USABLE))} of memory"
    if job.host_declared:
        raise UsageError(what, hint=hint)
    # measured here: the job's nodes may be other machines, whose memory the option gives
    plan.notes.insert(0, f"{HOST_MISFIT}{what}; {hint}; {OTHER_NODES}")


def _asked_step(job: Job, plan: Plan) -> None:
    """The step the user asked about: its predicted peak (one GPU: the plain step the benchmark measures)."""
    batch, seq = job.micro_batch or 1, job.seq_len or job.seq
    ckpt = True if job.grad_ckpt is None else job.grad_ckpt
    plain = job.gpus == 1 and not job.lora_rank  # the benchmark's plain step trains every parameter
    est = memory.actor_step(job.model, tokens=batch * seq, grad_ckpt=ckpt, plain=plain, shards=job.gpus,
                            lora_rank=job.lora_rank)
    plan.memory.update(actor_step_peak_gib=round(est.peak / GIB, 2), actor_step_phase=est.phase,
                       actor_step_breakdown_gib=est.gib(),
                       actor_step=({"micro_batch": batch, "seq_len": seq, "grad_ckpt": ckpt,
                                    "kind": "plain single-GPU step" if plain else f"FSDP over {job.gpus} GPUs"
                                    + (f", LoRA rank {job.lora_rank}" if job.lora_rank else "")}))
    if est.peak > job.gpu_bytes:
        plan.notes.append(f"the asked step needs {_gib(est.peak)}, more than the {_gib(job.gpu_bytes)} of a "
                          f"{job.gpu_name}: it will run out of memory")
