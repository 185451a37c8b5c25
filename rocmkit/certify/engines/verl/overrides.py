"""verl 0.9.x `main_ppo` overrides for a one-node GRPO smoke run (research/smoke-grpo.md §1.4, and
research/verl-cpu.md for the CPU run), and the environment the run needs."""

from __future__ import annotations

from dataclasses import dataclass

from . import attention, sleep_pool, smoke_cuts

CPU_PLATFORM_MODULE = "rocmkit.verl.cpu_platform"


@dataclass(frozen=True)
class VerlRun:
    model_dir: str
    train_file: str
    val_file: str
    reward_file: str
    gpus: int = 1  # 0: the CPU, through rocmkit's CPU platform plugin and vLLM's CPU build
    steps: int = 8
    rollout: str = "vllm"
    batch_size: int = 8  # prompts per step
    n: int = 4  # responses per prompt (GRPO group)
    max_prompt_length: int = 128
    max_response_length: int = 32
    lr: float = 1e-5
    tensor_parallel: int = 1  # the rollout's
    backend: str = "fsdp"  # or "megatron": verl's Megatron actor and reference (model_engine=megatron)
    train_tp: int = 1  # Megatron's tensor and pipeline parallel sizes
    train_pp: int = 1
    attn: str | None = None  # the actor's and reference's attention (attention.py decides); None: verl's default
    rollout_graphs: bool = False  # the rollout's compile and CUDA/HIP graphs (certify --rollout-graphs)
    engine_defaults: bool = False  # none of the smoke run's start-up cuts (certify --engine-defaults; smoke_cuts.py)
    ray_temp_dir: str | None = None  # a short path: Ray's socket paths must stay under 107 bytes
    job_keys: frozenset[str] = frozenset()  # the keys a user's script sets: no start-up cut replaces them

    @property
    def on_cpu(self) -> bool:
        return self.gpus == 0


# The rollout's share of each GPU (vLLM's gpu_memory_utilization, SGLang's mem_fraction_static): the actor and the
# reference model live beside it on the same GPUs between rollouts.
ROLLOUT_MEMORY = 0.4


def rollout_share(overrides: list[str]) -> float:
    """The rollout's share of each GPU the overrides give it (the last one named), else ROLLOUT_MEMORY. SGLang takes
    it as mem_fraction_static (verl's launch_server)."""
    key = "actor_rollout_ref.rollout.gpu_memory_utilization="
    return next((float(o.split("=", 1)[1]) for o in reversed(overrides) if o.lstrip("+").startswith(key)),
                ROLLOUT_MEMORY)


def overrides(r: VerlRun) -> list[str]:
    """The overrides, in `key=value` form. trainer.n_gpus_per_node and nnodes are filled in here."""
    workers = max(1, r.gpus)
    data_parallel = max(1, workers // (r.train_tp * r.train_pp)) if r.backend == "megatron" else workers
    micro = max(1, r.batch_size * r.n // (2 * data_parallel))
    out = megatron_overrides(r) if r.backend == "megatron" else []
    out += [
        "algorithm.adv_estimator=grpo",
        f"data.train_files={r.train_file}", f"data.val_files={r.val_file}",
        f"data.train_batch_size={r.batch_size}",
        f"data.max_prompt_length={r.max_prompt_length}", f"data.max_response_length={r.max_response_length}",
        "data.dataloader_num_workers=0",
        f"actor_rollout_ref.model.path={r.model_dir}",
        f"actor_rollout_ref.actor.optim.lr={r.lr}",
        f"actor_rollout_ref.actor.ppo_mini_batch_size={max(1, r.batch_size // 2)}",
        f"actor_rollout_ref.actor.ppo_micro_batch_size_per_gpu={micro}",
        # KL loss on: it is what makes verl build the reference policy, so reference log-probs run.
        "actor_rollout_ref.actor.use_kl_loss=True", "actor_rollout_ref.actor.kl_loss_coef=0.001",
        "actor_rollout_ref.actor.kl_loss_type=low_var_kl",
        "actor_rollout_ref.actor.use_dynamic_bsz=False",
        f"actor_rollout_ref.rollout.name={r.rollout}",
        f"actor_rollout_ref.rollout.tensor_model_parallel_size={r.tensor_parallel}",
        f"actor_rollout_ref.rollout.gpu_memory_utilization={ROLLOUT_MEMORY}", f"actor_rollout_ref.rollout.n={r.n}",
        f"actor_rollout_ref.rollout.log_prob_micro_batch_size_per_gpu={micro}",
        "actor_rollout_ref.rollout.agent.num_workers=1",
        f"actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu={micro}",
        f"reward.custom_reward_function.path={r.reward_file}", "reward.custom_reward_function.name=compute_score",
        "reward.num_workers=1",
        "trainer.critic_warmup=0", "trainer.logger=['console','file']",
        "trainer.project_name=rocmkit", "trainer.experiment_name=certify",
        f"trainer.n_gpus_per_node={workers}", "trainer.nnodes=1",
        "trainer.total_epochs=100", f"trainer.total_training_steps={r.steps}",
        "trainer.save_freq=-1", "trainer.test_freq=-1", "trainer.val_before_train=False",
        "trainer.resume_mode=disable",
        "+ray_kwargs.ray_init.include_dashboard=False",
    ]
    if r.ray_temp_dir:
        out.append(f"+ray_kwargs.ray_init._temp_dir={r.ray_temp_dir}")
    if r.rollout == "vllm" and not r.on_cpu:
        # ROCm: expandable segments and vLLM's custom all-reduce do not mix (verl's ROCm CI sets this).
        out.append("+actor_rollout_ref.rollout.engine_kwargs.vllm.disable_custom_all_reduce=True")
    if r.rollout == "sglang":
        # verl starts SGLang at log level error (async_sglang_server.py, launch_server); its info lines are what the
        # certificate reads: the weights' and KV cache's memory, and its batches as the run's progress
        out.append("+actor_rollout_ref.rollout.engine_kwargs.sglang.log_level=info")
    out += attention_overrides(r.attn)
    out += startup_overrides(r)
    if r.on_cpu:
        out += cpu_overrides()
    return out


def attention_overrides(attn: str | None) -> list[str]:
    """verl reads the implementation from the model's override_config (verl/workers/config/model.py:185). Its
    remove-padding path packs a batch's sequences into one and relies on flash-attn's varlen kernels to keep
    them apart; SDPA would attend across them, so SDPA runs padded."""
    if attn is None:
        return []
    out = [f"+actor_rollout_ref.model.override_config.attn_implementation={attn}"]
    return out + (["actor_rollout_ref.model.use_remove_padding=False"] if attn == "sdpa" else [])


def startup_cuts(r: VerlRun) -> list[smoke_cuts.Cut]:
    """What a smoke run does not need at start-up (smoke_cuts.py names each, with the option that restores it)."""
    return smoke_cuts.cuts(backend=r.backend, rollout=r.rollout, tensor_parallel=r.tensor_parallel,
                           on_cpu=r.on_cpu, rollout_graphs=r.rollout_graphs, engine_defaults=r.engine_defaults,
                           job_keys=r.job_keys)


def startup_overrides(r: VerlRun) -> list[str]:
    return smoke_cuts.overrides(startup_cuts(r))


def megatron_overrides(r: VerlRun) -> list[str]:
    """verl 0.9's Megatron actor and reference: the model engine first (it picks the config groups the keys below
    live in), TP and PP for both, and a bridge from Hugging Face weights, which verl 0.9.1 asserts (use_mbridge).

    The bridge is mbridge (`vanilla_mbridge=True`), not verl 0.9.1's default, NVIDIA's Megatron-Bridge: verl's
    `[megatron]` extra pins megatron-bridge 0.5.2, which PyPI does not have (its newest, 0.3.1, needs
    transformers<5, megatron-core<0.17 and TransformerEngine<2.13, none of which verl 0.9.1 runs with), while
    mbridge is what verl's own `[mcore]` extra installs: pure Python, on PyPI. verl warns that this path is
    deprecated (verl/workers/config/engine.py); it is the one a pip install can have today.

    Attention: verl's default `override_transformer_config.attention_backend=flash` lets TransformerEngine run
    flash-attn only, and a target without flash-attn then fails at the first log-prob pass ("No dot product
    attention backend is available", two H100s without flash-attn). `auto` lets TransformerEngine choose among
    what it has: flash-attn where installed, else cuDNN's fused attention (NVIDIA) or CK/AOTriton (ROCm's TE)."""
    out = ["model_engine=megatron"]
    for role in ("actor", "ref"):
        out += [f"actor_rollout_ref.{role}.megatron.tensor_model_parallel_size={r.train_tp}",
                f"actor_rollout_ref.{role}.megatron.pipeline_model_parallel_size={r.train_pp}",
                f"actor_rollout_ref.{role}.megatron.use_mbridge=True",
                f"actor_rollout_ref.{role}.megatron.vanilla_mbridge=True"]
    # the reference reads the actor's override_transformer_config (verl's ppo_megatron_trainer: oc.select)
    return out + ["actor_rollout_ref.actor.megatron.override_transformer_config.attention_backend=auto"]


def cpu_overrides() -> list[str]:
    """What verl 0.9.1 needs on a CPU (research/verl-cpu.md; the ones marked required there are why each exists)."""
    return [
        "trainer.device=cpu",
        "actor_rollout_ref.rollout.enforce_eager=True",  # vLLM's CPU build: no graphs (--rollout-graphs is refused)
        "actor_rollout_ref.actor.strategy=fsdp2",  # FSDP1 refuses CPU parameters
        "actor_rollout_ref.ref.strategy=fsdp2",
        "+actor_rollout_ref.rollout.enable_sleep_mode=False",  # sleep mode needs the GPU's virtual memory API
        "actor_rollout_ref.rollout.free_cache_engine=False",
        "actor_rollout_ref.rollout.max_num_seqs=64",
        "actor_rollout_ref.rollout.max_num_batched_tokens=1024",
        "actor_rollout_ref.rollout.checkpoint_engine.update_weights_bucket_megabytes=64",
        "actor_rollout_ref.model.enable_gradient_checkpointing=False",
        "actor_rollout_ref.actor.use_torch_compile=False",
        "actor_rollout_ref.ref.use_torch_compile=False",
        "transfer_queue.backend.SimpleStorage.num_data_storage_units=1",  # 8 units hang on 2 cores
        "ray_kwargs.ray_init.num_cpus=8",  # Ray must offer more CPU slots than a small host has cores
        "+ray_kwargs.ray_init.num_gpus=1",  # verl's resource pool asks Ray for one GPU per worker
        # fp32 actor and reference: bf16 matmuls are slow on CPUs without bf16 units (AVX2: a step took 10 s,
        # 3.4 s in fp32). The rollout stays bf16: vLLM's fp32 weight sync breaks (and the job hangs).
        "+actor_rollout_ref.actor.fsdp_config.mixed_precision={param_dtype:fp32,reduce_dtype:fp32,buffer_dtype:fp32}",
        "+actor_rollout_ref.ref.fsdp_config.mixed_precision={param_dtype:fp32,reduce_dtype:fp32,buffer_dtype:fp32}",
    ]


def environment(r: VerlRun, metrics_file: str) -> dict[str, str]:
    """Variables the run needs besides the overrides."""
    env = {"VERL_FILE_LOGGER_PATH": metrics_file,
           # Ray 2.60 writes ~/.ray/auth_token when ray.init() starts a cluster, and from then on every
           # `ray start` on this host wants token authentication: this throwaway cluster needs none.
           "RAY_AUTH_MODE": "disabled",
           # Ray's driver folds lines that repeat across workers (numbers ignored) into "[repeated Nx across
           # cluster]": two rollout replicas' sleeps and weight syncs would read as one's (report.py counts them)
           "RAY_DEDUP_LOGS": "0"}
    if r.on_cpu:
        env.update({
            "VERL_USE_EXTERNAL_MODULES": CPU_PLATFORM_MODULE,  # verl imports it in every process, Ray workers too
            "VERL_PLATFORM": "cpu",
            "VERL_ENGINE_DEVICE": "cuda",  # verl registers no engine for device cpu; the plugin stands in for cuda
            "VLLM_CPU_KVCACHE_SPACE": "1",  # GiB; the default takes far more than a smoke run uses
            "TORCHDYNAMO_DISABLE": "1",  # vLLM's CPU sampler would compile with inductor: g++ and minutes
        })
    if r.rollout == "vllm":
        # verl's Ray environment quiets vLLM to WARN unless the variable is set (verl/trainer/constants_ppo.py:89,
        # get_ppo_ray_runtime_env); its INFO lines are what the certificate reads: engine init, compile, graph
        # capture, what sleep mode freed
        env["VLLM_LOGGING_LEVEL"] = "INFO"
    env.update(sleep_pool.environment(r.rollout, r.on_cpu))
    env.update(smoke_cuts.environment(startup_cuts(r)))
    return env


def attention_choice(asked: str, on_cpu: bool, report: dict) -> dict:
    """The setup's choice; a target whose rocmkit predates --attn reports none, and auto then means SDPA."""
    return report.get("attention") or attention.choose(asked, on_cpu, None)


def run_overrides(cfg: dict, report: dict) -> list[str]:
    """The run's overrides: the ones validated in the setup, with the chosen attention's and SGLang's backends."""
    sglang = (report.get("sglang") or {}).get("overrides", [])
    if not cfg.get("attention"):  # Megatron: megatron-core's own attention
        return cfg["verl_overrides"] + sglang
    chosen = attention_choice(cfg["attention"]["asked"], cfg["gpus"] == 0, report)["chosen"]
    return cfg["verl_overrides"] + attention_overrides(chosen) + sglang
