"""What verl 0.9.1 itself decides about a `python3 -m verl.trainer.main_ppo ARGV` command, without GPUs: the
oracle that verl-check is measured against (benchmarks/verl_examples.py) and tested against
(tests/test_verl_rules_differential.py). Run it in a Python with verl (CI: ROCMKIT_VERL_CPU_PYTHON).

`verdict(argv) -> (accepted, reason)` goes through verl's own steps in the order a job meets them, calling verl's
code wherever it runs without GPUs:
1. Hydra compose, as main_ppo's @hydra.main(config_path="config") does, or a user's --config-path with verl's
   config folder on the search path;
2. verl/utils/config.py validate_config (what main_ppo runs before Ray starts);
3. the dataclass conversions the workers make (actor, rollout, reference after init_model's renames, algorithm,
   critic), the FSDP engine's optimizer (verl's build_optimizer, torch's AdamW taking the lr), and the rollout
   placement assert of ActorRolloutRefWorker.init_model;
4. the first step: PPOTrainer._get_required_batch_multiple pads the batch, TrainingWorker.train_mini_batch splits
   the mini batch over the data-parallel ranks (called with a stand-in engine that reports the data-parallel
   size and stops once the split is made), prepare_micro_batches splits each rank's share into micro batches
   (called on a TensorDict of the rank's size), kl_penalty, get_policy_loss_fn and get_adv_estimator_fn look up
   their names.
A model's files are not read (a critic's hub model offline is skipped, as the workers would read it online), and
validate_config's last check, a LoRA rank against vLLM's, is skipped in a Python without a usable vLLM.
What it cannot call is mirrored and said so: the data-parallel size (world / Ulysses SP for FSDP, world / (TP x PP
x CP) for Megatron, whose parallel state refuses a world it does not divide) and vLLM's refusal of a
gpu_memory_utilization outside (0, 1].
"""

from __future__ import annotations

import contextlib
import io
import math
import sys
import types
import typing
import warnings
from pathlib import Path


def _verl_config_dir() -> Path:
    import verl

    return Path(verl.__file__).parent / "trainer" / "config"


def parse(argv: list[str]) -> tuple[str | None, str, list[str]]:
    """main_ppo's own command line: Hydra's --config-path/-cp, --config-name/-cn, then the overrides."""
    path, name, overrides = None, "ppo_trainer", []
    it = iter(argv)
    for a in it:
        for flag, short in (("--config-path", "-cp"), ("--config-name", "-cn")):
            if a in (flag, short):
                a = f"{flag}={next(it)}"
            if a.startswith(flag + "="):
                if flag == "--config-path":
                    path = a.split("=", 1)[1]
                else:
                    name = a.split("=", 1)[1]
                break
        else:
            overrides.append(a)
    return path, name, overrides


def compose(config_path: str | None, config_name: str, overrides: list[str]):
    """A user's --config-path replaces main_ppo's config folder; verl's own stays on the search path (verl's
    examples name it in their yaml's hydra.searchpath, relative to verl's checkout)."""
    from hydra import compose as hydra_compose
    from hydra import initialize_config_dir

    if config_path and not Path(config_path).is_absolute():  # Hydra: relative to the file of @hydra.main
        config_path = str((_verl_config_dir().parent / config_path).resolve())
    primary = config_path or str(_verl_config_dir())
    extra = [] if not config_path else [f"hydra.searchpath=[file://{_verl_config_dir()}]"]
    with initialize_config_dir(config_dir=primary, version_base=None):
        return hydra_compose(config_name=config_name, overrides=overrides + extra)


def verdict(argv: list[str]) -> tuple[bool, str]:
    from hydra.errors import HydraException

    path, name, overrides = parse(argv)
    try:
        cfg = compose(path, name, overrides)
    except HydraException as exc:
        return False, f"compose: {exc}"
    return judge(cfg)


class _Reached(Exception):
    """Raised by the stand-in engine once verl's own code has split the batch: the GPU work would start here."""


def _quiet(fn, *args, **kwargs):
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return fn(*args, **kwargs)


def judge(cfg, copy_first: bool = True) -> tuple[bool, str]:
    """verl's verdict on a composed config (resolved here, on a copy unless copy_first is False)."""
    import copy

    from omegaconf import OmegaConf

    cfg = copy.deepcopy(cfg) if copy_first else cfg
    try:
        OmegaConf.resolve(cfg)
        for step in (_validate, _conversions, _first_step):
            _quiet(step, cfg)
    except _Reject as exc:
        return False, str(exc)
    except Exception as exc:  # noqa: BLE001 - any failure is verl rejecting the configuration
        return False, f"{type(exc).__name__}: {_said(exc)}"
    return True, ""


def _said(exc: BaseException) -> str:
    """An exception's first line; with the next one where the first only introduces it (Hydra's
    InstantiationException: "Error in call to target 'X':", then the dataclass's own TypeError)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    if len(lines) > 1 and lines[0].endswith(":"):
        return f"{lines[0]} {lines[1]}"
    return lines[0] if lines else ""


class _Reject(Exception):
    pass


def _offline_model(exc: BaseException) -> bool:
    """An exception from reading a model's files (transformers, the Hugging Face hub): not a verdict on the
    configuration, which is all an offline oracle can judge."""
    import traceback

    while exc is not None:
        if any("transformers" in f.filename or "huggingface_hub" in f.filename
               for f in traceback.extract_tb(exc.__traceback__)):
            return True
        exc = exc.__cause__ or exc.__context__
    return False


def _without_vllm(exc: BaseException) -> bool:
    """validate_config's LoRA rank check imports vLLM through verl/third_party/vllm, which refuses a Python
    without a usable vLLM: the environment, not a verdict (validate_config has no check after that one)."""
    import traceback

    return any(f.filename.endswith("verl/third_party/vllm/__init__.py")
               for f in traceback.extract_tb(exc.__traceback__))


def _lora_rank(cfg) -> None:
    """validate_config's LoRA check, by verl's own get_vllm_max_lora_rank (its module imports vLLM at the top; the
    function itself falls back to vLLM's list of ranks without it)."""
    lora = cfg.actor_rollout_ref.model.get("lora", {}) or {}
    rank = lora.get("rank", 0) or 0
    if rank <= 0:
        rank = cfg.actor_rollout_ref.model.get("lora_rank", 0)
    if lora.get("merge", False):
        rank = 0
    if rank > 0 and cfg.actor_rollout_ref.rollout.name == "vllm":
        _verl_method("workers/rollout/vllm_rollout/utils.py", "get_vllm_max_lora_rank")(rank)


def _validate(cfg) -> None:
    """validate_config; where it cannot read the critic's model offline, the rest of it without the critic."""
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import validate_config

    try:
        validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
    except Exception as exc:
        if _without_vllm(exc):  # its last check, the LoRA rank against vLLM's: every check before it passed
            _lora_rank(cfg)
            return
        if not (need_critic(cfg) and _offline_model(exc)):
            raise
        validate_config(cfg, use_reference_policy=need_reference_policy(cfg), use_critic=False)


def _conversions(cfg) -> None:
    from omegaconf import open_dict
    from verl.trainer.ppo.utils import need_critic, need_reference_policy
    from verl.utils.config import omega_conf_to_dataclass

    arr = cfg.actor_rollout_ref
    omega_conf_to_dataclass(arr.actor)
    if arr.actor.strategy in ("fsdp", "fsdp2"):  # FSDPEngine._build_optimizer at init: torch takes the lr
        import torch
        from verl.workers.config.optimizer import build_optimizer

        build_optimizer([torch.nn.Parameter(torch.zeros(1))], omega_conf_to_dataclass(arr.actor.optim))
    rollout = omega_conf_to_dataclass(arr.rollout)
    omega_conf_to_dataclass(cfg.algorithm)
    if need_reference_policy(cfg):  # ActorRolloutRefWorker.init_model renames the reference's keys first
        ref = arr.ref.copy()
        with open_dict(ref):
            ref.ppo_mini_batch_size = arr.actor.ppo_mini_batch_size
            ref.ppo_micro_batch_size = ref.pop("log_prob_micro_batch_size", None)
            ref.ppo_micro_batch_size_per_gpu = ref.pop("log_prob_micro_batch_size_per_gpu", None)
            ref.use_dynamic_bsz = ref.pop("log_prob_use_dynamic_bsz", False)
            ref.ppo_max_token_len_per_gpu = ref.pop("log_prob_max_token_len_per_gpu", None)
        omega_conf_to_dataclass(ref)
    if need_critic(cfg):
        try:
            omega_conf_to_dataclass(cfg.critic)
        except Exception as exc:
            if not _offline_model(exc):
                raise
    world = cfg.trainer.n_gpus_per_node * cfg.trainer.nnodes
    replica = rollout.tensor_model_parallel_size * rollout.data_parallel_size * rollout.pipeline_model_parallel_size
    # verl/workers/engine_workers.py, ActorRolloutRefWorker.init_model: the same assert, on the same numbers
    assert world % replica == 0, f"rollout world_size: {world} is not divisible by infer_world_size: {replica}"
    util = rollout.gpu_memory_utilization  # mirrored: vLLM's CacheConfig refuses it when the rollout starts
    if not 0 < util <= 1:
        raise _Reject(f"vLLM: gpu_memory_utilization must be in (0, 1], got {util}")


def data_parallel(cfg, section: str = "actor_rollout_ref.actor") -> int:
    """Mirrored (engines need a process group to say it): FSDPEngine.get_data_parallel_size is world // Ulysses SP,
    on a device mesh that needs SP to divide the world; Megatron's is world // (TP x PP x CP)."""
    from omegaconf import OmegaConf

    world = cfg.trainer.n_gpus_per_node * cfg.trainer.nnodes
    node = OmegaConf.select(cfg, section)
    if node.strategy == "megatron":
        m = node.megatron
        split = m.tensor_model_parallel_size * m.pipeline_model_parallel_size * m.context_parallel_size
    else:
        sp = node.get("ulysses_sequence_parallel_size", 1) or 1
        split = sp if sp > 1 else (node.get("fsdp_config", {}).get("ulysses_sequence_parallel_size", 1) or 1)
        if node.strategy == "veomni":  # VeOmniEngine.get_data_parallel_size: world // its own Ulysses size
            split = node.get("veomni", {}).get("ulysses_parallel_size", 1) or 1
        if section == "critic":
            split = node.get("ulysses_sequence_parallel_size", 1) or 1
    if world % split:
        raise _Reject(f"{section}: the parallel split {split} does not divide the world of {world} GPUs")
    return world // split


_METHODS: dict = {}


def _verl_method(path: str, name: str):
    """One function of verl's, compiled from verl's own file without its decorators: its module imports what a
    CPU check may lack (trainer_base.py needs transfer_queue, engine_workers.py uvicorn), and the part of the
    function that runs before any GPU work needs only these names."""
    import ast

    import torch
    from verl.utils import tensordict_utils as tu

    if (path, name) not in _METHODS:
        file = Path(_verl_config_dir()).parents[1] / path
        tree = ast.parse(file.read_text())
        node = next(n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == name)
        node.decorator_list = []
        namespace = {"math": math, "torch": torch, "tu": tu, "maybe_fix_3d_position_ids": tu.maybe_fix_3d_position_ids,
                     "Literal": typing.Literal, "get_args": typing.get_args}
        exec(compile(ast.Module([node], []), str(file), "exec"), namespace)  # noqa: S102 - verl's own code
        _METHODS[(path, name)] = namespace[name]
    return _METHODS[(path, name)]


def _tensordict(size: int, **non_tensor):
    import torch
    from tensordict import TensorDict
    from verl.utils import tensordict_utils as tu

    td = TensorDict({"x": torch.zeros(size, 1)}, batch_size=[size])
    tu.assign_non_tensor(td, **non_tensor)
    return td


def _train_mini_batch(share: int, mini: int, dp: int) -> None:
    """verl's TrainingWorker.train_mini_batch on one rank's share, with a stand-in engine."""
    def stop(**_):
        raise _Reached

    engine = types.SimpleNamespace(get_data_parallel_size=lambda: dp, get_data_parallel_rank=lambda: 0,
                                   train_mode=stop)
    fn = _verl_method("workers/engine_workers.py", "train_mini_batch")
    try:
        fn(types.SimpleNamespace(engine=engine), _tensordict(share, mini_batch_size=mini, epochs=1, seed=0))
    except _Reached:
        pass


def _micro_split(size: int, micro) -> None:
    from verl.workers.engine.utils import prepare_micro_batches

    prepare_micro_batches(_tensordict(size, use_dynamic_bsz=False, micro_batch_size_per_gpu=micro))


def _first_step(cfg) -> None:
    import torch
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn, get_policy_loss_fn, kl_penalty
    from verl.trainer.ppo.utils import need_critic, need_reference_policy

    arr = cfg.actor_rollout_ref
    actor, rollout, ref = arr.actor, arr.rollout, arr.ref
    dp = data_parallel(cfg)
    dynamic = actor.use_dynamic_bsz
    # ActorRolloutRefWorker.init_model's asserts
    # (verl's asserts say nothing; the key is named here so that a reader, and verl_examples, know which)
    assert dynamic == rollout.log_prob_use_dynamic_bsz, "rollout.log_prob_use_dynamic_bsz != actor.use_dynamic_bsz"
    if not dynamic:
        assert rollout.log_prob_micro_batch_size_per_gpu is not None, "rollout.log_prob_micro_batch_size_per_gpu"
        assert actor.ppo_micro_batch_size_per_gpu is not None, "actor.ppo_micro_batch_size_per_gpu"
    use_critic, use_ref = need_critic(cfg), need_reference_policy(cfg)
    trainer = types.SimpleNamespace(config=cfg, use_critic=use_critic, global_steps=1)
    multiple = _verl_method("trainer/ppo/v1/trainer_base.py", "_get_required_batch_multiple")(trainer, dp)
    n = rollout.n
    batch = -(-cfg.data.train_batch_size * n // multiple) * multiple  # upsample_batch_to_divisible_size
    share = batch // dp
    _train_mini_batch(share, actor.ppo_mini_batch_size * n, dp)
    if use_critic:
        critic_dp = data_parallel(cfg, "critic")
        _train_mini_batch(batch // critic_dp, cfg.critic.ppo_mini_batch_size * n, critic_dp)
    if not dynamic:
        _micro_split(share, rollout.log_prob_micro_batch_size_per_gpu)  # compute_log_prob
        _micro_split(actor.ppo_mini_batch_size * n // dp, actor.ppo_micro_batch_size_per_gpu)  # update_actor
    if use_ref and not ref.log_prob_use_dynamic_bsz:
        _micro_split(share, ref.log_prob_micro_batch_size_per_gpu)
    zero = torch.zeros(1)
    if actor.use_kl_loss:
        kl_penalty(zero, zero, actor.kl_loss_type)
    if cfg.algorithm.use_kl_in_reward:
        kl_penalty(zero, zero, cfg.algorithm.kl_penalty)
    get_policy_loss_fn(actor.policy_loss.loss_mode)
    get_adv_estimator_fn(cfg.algorithm.adv_estimator)


BATCH_MARK = "VERL-ORACLE-VERDICTS "


def batch(path: str) -> None:
    """Every command of a JSON list (each main_ppo's arguments) judged in this one process (verl's imports are
    most of the time); one marked JSON line of [accepted, reason] pairs, in order."""
    import json

    out = []
    for argv in json.loads(Path(path).read_text()):
        try:
            out.append(list(verdict(argv)))
        except Exception as exc:  # noqa: BLE001 - one command's failure is its verdict, not the batch's
            out.append([False, f"{type(exc).__name__}: {_said(exc)}"])
    print(BATCH_MARK + json.dumps(out), flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--batch"]:
        batch(sys.argv[2])
        sys.exit(0)
    accepted, reason = verdict(sys.argv[1:])
    print("accepted" if accepted else f"rejected: {reason}")
    sys.exit(0 if accepted else 1)
