"""What a verl smoke run changes from the stack's defaults to start faster, each named with the option that restores
it. A smoke run on a tiny model proves that the stack's pieces start, talk and train; these settings change how
long the start takes, not which code trains: the FSDP actor, vLLM's engine and verl's weight sync all still run.
`--engine-defaults` turns every cut off and certifies exactly what a production job starts; `--rollout-graphs`
restores the rollout's compile and graphs alone. The certificate lists the cuts that applied
(`settings.smoke_cuts`, and certificate.md's "Settings changed for a fast smoke test").

Where the seconds go on one H100 (tests/data/certify/verl-h100-tiny*.json and its log): each Ray actor and vLLM
process spends 15-25 s starting Python and importing torch, vLLM and verl, and a run starts about ten of them; a
cut that removes a process saves about that much when the process is on the path to the first step.

Keys and defaults are verl 0.9.1's and vLLM 0.24's (the sources cited at each cut)."""

from __future__ import annotations

from dataclasses import dataclass, replace

RESTORE_ALL = "--engine-defaults"


@dataclass(frozen=True)
class Cut:
    name: str  # what the smoke run does instead, in a few words
    overrides: tuple[str, ...]  # verl/Hydra overrides, key=value
    default: str  # what the stack does without the cut
    why: str  # why a smoke run needs none of it
    restore: tuple[str, ...] = (RESTORE_ALL,)  # options that give the default back
    env: tuple[tuple[str, str], ...] = ()  # variables the run gets with the cut

    def record(self) -> dict:
        return {"name": self.name, "overrides": list(self.overrides), "env": dict(self.env), "default": self.default,
                "why": self.why, "restored_by": list(self.restore)}


def key_of(override: str) -> str:
    """The config key a Hydra override sets (`+a.b=1`, `++a.b=1`, `a.b=1` all set a.b)."""
    return override.partition("=")[0].lstrip("+~")


def cuts(*, backend: str, rollout: str, tensor_parallel: int, on_cpu: bool, rollout_graphs: bool,
         engine_defaults: bool, job_keys: frozenset[str] = frozenset()) -> list[Cut]:
    """The cuts that apply to this run; none with --engine-defaults. A user's job keeps what its script sets: a cut
    never replaces a key in `job_keys` (verl's examples set enforce_eager=False, and that is the job's own word)."""
    if engine_defaults:
        return []
    out = [replace(c, overrides=tuple(o for o in c.overrides if key_of(o) not in job_keys))
           for c in _all(backend, rollout, tensor_parallel, on_cpu, rollout_graphs)]
    return [c for c in out if c.overrides]


def _all(backend: str, rollout: str, tensor_parallel: int, on_cpu: bool, rollout_graphs: bool) -> list[Cut]:
    out = []
    if backend == "fsdp":
        # verl/workers/engine/fsdp/transformer_impl.py:183-187 compiles entropy_from_logits (dynamic=True) when
        # fsdp_config.use_torch_compile; the actor's top-level use_torch_compile is not what that engine reads
        out.append(Cut("no entropy compile in the actor and reference",
                       ("actor_rollout_ref.actor.fsdp_config.use_torch_compile=False",
                        "actor_rollout_ref.ref.fsdp_config.use_torch_compile=False"),
                       "Inductor compiles the entropy function in the first update",
                       "one compiled helper function; the update itself runs the same"))
    if not on_cpu and not rollout_graphs:  # the CPU rollout runs eager always (cpu requirement, overrides.py)
        # vllm/config/vllm.py:1061-1067 (vLLM 0.24): enforce_eager sets compilation mode NONE and cudagraph_mode
        # NONE; SGLang reads it as disable_cuda_graph
        # SGLang 0.5.12 also captures "piecewise" CUDA graphs through torch.compile unless told not to
        # (sglang/srt/server_args.py, _handle_piecewise_cuda_graph: on by default on NVIDIA, off on ROCm); on two
        # H200s the capture took 100 s of a 330 s start-up
        piecewise = (("+actor_rollout_ref.rollout.engine_kwargs.sglang.disable_piecewise_cuda_graph=True",)
                     if rollout == "sglang" else ())
        out.append(Cut("eager rollout: no compile, no CUDA/HIP graphs",
                       ("actor_rollout_ref.rollout.enforce_eager=True", *piecewise),
                       "torch.compile of the model and FULL_AND_PIECEWISE graph capture at engine start",
                       "the same model runs eager; graph capture is its own risk, certified with --rollout-graphs",
                       restore=("--rollout-graphs", RESTORE_ALL)))
    if rollout == "vllm" and tensor_parallel == 1:
        # verl always asks for vLLM's multiprocessing executor (vllm_async_server.py: "distributed_executor_backend":
        # "mp", then **engine_kwargs, so ours wins). With one GPU per replica the `uni` executor, vLLM's own default
        # for one GPU (vllm/config/parallel.py: world_size 1 -> "uni"), runs the model worker inside the engine-core
        # process: one Python process fewer (its start, imports and distributed init: 22-27 s on the H100 logs,
        # between "Initializing a V1 LLM engine" and the worker's first line). vLLM's CPU platform turns `uni` back
        # into `mp` unless VLLM_ENABLE_V1_MULTIPROCESSING=0 (vllm/platforms/cpu.py, check_and_update_config);
        # AsyncLLM, which verl's server runs, keeps its engine core in its own process either way.
        out.append(Cut("vLLM's model worker inside its engine process (uni executor)",
                       ("+actor_rollout_ref.rollout.engine_kwargs.vllm.distributed_executor_backend=uni",),
                       "distributed_executor_backend=mp: a separate worker process per GPU",
                       "with one GPU per replica there is nothing to distribute; the same worker class, weight sync "
                       "and sleep mode run, in the engine's process",
                       env=(("VLLM_ENABLE_V1_MULTIPROCESSING", "0"),) if on_cpu else ()))
    if not on_cpu:  # the CPU run needs one unit anyway (overrides.cpu_overrides)
        # verl/trainer/config/transfer_queue/transfer_queue.yaml: 8 storage units, each a Ray actor the trainer
        # waits for (transfer_queue/interface.py: init() gets each unit's address before the trainer is built)
        out.append(Cut("one TransferQueue storage unit instead of 8",
                       ("transfer_queue.backend.SimpleStorage.num_data_storage_units=1",),
                       "8 storage units, 8 Ray actor processes the trainer waits for",
                       "a smoke run's batches are a few kilobytes; one unit holds them, and the same queue runs"))
    return out


def overrides(selected: list[Cut]) -> list[str]:
    return [o for c in selected for o in c.overrides]


def environment(selected: list[Cut]) -> dict[str, str]:
    return {k: v for c in selected for k, v in c.env}


def records(selected: list[Cut]) -> list[dict]:
    return [c.record() for c in selected]


def _assignments(env: dict | None) -> list[str]:
    return [f"{k}={v}" for k, v in (env or {}).items()]


def markdown(recorded: list[dict] | None) -> list[str]:
    """certificate.md's section naming each cut, its overrides, the default it replaced and what restores it;
    nothing where the run changed nothing (--engine-defaults, or an engine without cuts)."""
    if not recorded:
        return []
    return ["", "## Settings changed for a fast smoke test", "",
            *(f"- {c['name']}: {', '.join(f'`{o}`' for o in [*c['overrides'], *_assignments(c.get('env'))])} "
              f"(default: {c['default']}; "
              f"restore: {' or '.join(f'`{r}`' for r in c['restored_by'])})" for c in recorded)]
