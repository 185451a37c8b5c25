"""verl's own `rocmkit certify` flags, their values made into Settings fields, and `--script` read into a job.
The certify command collects these from the registry (rocmkit/cli/certify.py declares only the shared flags), so a
verl flag is declared, converted and checked (options.py) beside the engine that reads it."""

from __future__ import annotations

from pathlib import Path

import click

from ....paramtypes import InputFile, script_environment
from ....errors import UsageError
from .attention import CHOICES as ATTN_CHOICES
from ...settings import Backend, Rollout, Settings
from ..base import CliOption

D = Settings()  # the defaults: one place (certify/settings.py)
# the flags a --script job takes from its script; given as well, they are refused
SCRIPT_SETS = ("rollout", "rollout_tp", "backend", "tp", "pp")


def _values(enum) -> list[str]:
    return [e.value for e in enum]


def run_options() -> list[CliOption]:
    """How the verl run is shaped; --help lists them after --size."""
    return [
        CliOption("size", ("--rollout",), dict(type=click.Choice(_values(Rollout)), default=D.rollout.value,
                                               show_default=True, help="verl's rollout engine.")),
        CliOption("size", ("--rollout-tp",), dict(
            type=int, default=D.rollout_tp, show_default=True,
            help="With --engine verl: the rollout's tensor parallel size. verl fills the GPUs with replicas of this "
                 "many GPUs each, so it must divide --gpus (checked before anything starts); the certificate's "
                 "engine_run.layout records the replicas and the actor's data-parallel ranks.")),
        CliOption("size", ("--backend",), dict(
            type=click.Choice(_values(Backend)), default=D.backend.value, show_default=True,
            help="verl's actor: FSDP, or Megatron (model_engine=megatron with mbridge; GPUs only, and an image "
                 "with megatron-core and mbridge).")),
        CliOption("size", ("--tp",), dict(type=int, default=D.tp, show_default=True, help="With --backend megatron: "
                  "tensor parallel size of the actor and reference. verl refuses a TP x PP that does not divide --gpus.")),
        CliOption("size", ("--pp",), dict(type=int, default=D.pp, show_default=True,
                                          help="With --backend megatron: pipeline parallel size.")),
        CliOption("size", ("--attn",), dict(
            type=click.Choice(ATTN_CHOICES), default=D.attn, show_default=True,
            help="With --engine verl: the attention verl's actor and reference load the model with. auto: "
                 "flash_attention_2 where flash_attn imports in the target (and a GPU is used), otherwise sdpa; a "
                 "named implementation the target cannot run stops the run (and --dry-run) before training, exit 3. "
                 "The certificate records the choice and why.")),
        CliOption("size", ("--rollout-graphs",), dict(
            is_flag=True,
            help="With --engine verl on GPUs: let the rollout engine compile and capture its CUDA/HIP graphs "
                 "(verl's default; --engine-defaults restores it too, with the other start-up cuts). Without it "
                 "the smoke run rolls out eager, which starts faster; the certificate records whether graphs "
                 "were captured.")),
        CliOption("size", ("--engine-defaults",), dict(
            is_flag=True,
            help="With --engine verl: run verl, vLLM and TransferQueue with their own defaults, none of the smoke "
                 "run's start-up cuts (the actor's entropy compile, the eager rollout, vLLM's model worker in its "
                 "engine process, one TransferQueue storage unit): certifies exactly what a production job starts, "
                 "slower. Without it the certificate names each cut and the option that restores it.")),
    ]


def job_options() -> list[CliOption]:
    """What the run checks beyond the built-in task (a tune plan, a launch script); --help lists them after
    --dry-run."""
    return [
        CliOption("dry_run", ("--tune", "tune_file"), dict(
            type=InputFile(dir_okay=False, exists=True), default=None, metavar="PLAN.json",
            help="With --engine verl: also check that the target's verl composes and validates this `rocmkit tune "
                 "--json` plan (your real job's settings); a rejected plan fails the certificate. A plan without "
                 "algorithm.adv_estimator is refused (exit 2).")),
        CliOption("dry_run", ("--script",), dict(
            type=InputFile(dir_okay=False, exists=True), default=None, metavar="RUN.sh",
            help="Certify this verl launch script as a job (--engine verl is implied). It is read as `rocmkit "
                 "verl-check` reads it (--arg, --env; its GPU queries answer --gpus), and a script verl rejects "
                 "stops here (exit 2, the same findings). Then main_ppo runs the script's overrides under a smoke "
                 "budget: --steps steps, no validation, no checkpoint saves, console and file loggers. A model "
                 "path not on this host is built with random weights from its config.json (--model-config, or "
                 "rocmkit's model table by the path's last part); data files not on this host are replaced by "
                 "the built-in task at the script's lengths. The certificate names each stand-in. The script's "
                 "exported variables, its --config-name and its backend (Megatron or FSDP) go with the job; "
                 "--rollout, --rollout-tp, --backend, --tp and --pp are the script's to set.")),
        CliOption("dry_run", ("--arg", "script_args"), dict(
            multiple=True, metavar="VALUE",
            help="With --script: an argument to the script ($1, $2... in order); repeatable.")),
        CliOption("dry_run", ("--env", "script_env"), dict(
            multiple=True, metavar="NAME=VALUE",
            help="With --script: a variable for the script, over the caller's environment; repeatable.")),
        CliOption("dry_run", ("--model-config",), dict(
            type=InputFile(dir_okay=False, exists=True), default=None, metavar="FILE",
            help="With --script: the config.json of the script's model, built with random weights in its shape "
                 "(used even when the model folder is on this host).")),
    ]


def settings(values: dict, ctx, name: str) -> dict:
    """Settings fields from verl's flags; with --script, the job and what the script sets (the engine too)."""
    v = dict(values)
    if v["tune_file"]:
        from ....tune.planfile import load_overrides

        tuned = tuple(load_overrides(v["tune_file"]))
    else:
        tuned = ()
    fields = {}
    if v["script"]:
        job, model = read_job(ctx, v)
        fields = {"engine": name, "job": job, "model": Path(model) if model else None,
                  **dict(zip(SCRIPT_SETS, job_shape(job, v["script"])))}
        v.update((k, fields[k]) for k in SCRIPT_SETS)
    elif v["script_args"] or v["script_env"] or v["model_config"]:
        raise UsageError("--arg, --env and --model-config are for --script")
    return {**fields, "rollout": Rollout(v["rollout"]), "rollout_tp": v["rollout_tp"], "backend": Backend(v["backend"]),
            "tp": v["tp"], "pp": v["pp"], "attn": v["attn"], "rollout_graphs": v["rollout_graphs"],
            "engine_defaults": v["engine_defaults"], "tune": tuned}


def read_job(ctx, v: dict):
    """The script read into a job (certify/job.py); verl's rejection printed as verl-check prints it, exit 2.
    Returns the job and the script's own model folder (None where its config.json stands in)."""
    from ... import engines
    from ... import job as job_mod

    if v["model"] or v["data"]:
        raise UsageError("--model and --data name the built-in run's inputs; with --script the script names them",
                         hint="leave them out (a model not on this host: --model-config FILE)")
    asked = v["engine"]
    if ctx.get_parameter_source("engine").name != "DEFAULT" and "job" not in engines.get(asked).options:
        raise UsageError(f"--script certifies a verl launch script: --engine {asked} cannot run it",
                         hint="leave out --engine")
    for name in SCRIPT_SETS:
        if ctx.get_parameter_source(name).name != "DEFAULT":
            raise UsageError(f"--{name.replace('_', '-')}: with --script the script sets it",
                             hint="change the script's override instead")
    env = script_environment(v["script_env"])
    try:
        job, lines = job_mod.read(v["script"], list(v["script_args"]), env, max(1, v["gpus"]), 20.0, v["image"],
                                  v["model_config"])
    except job_mod.Rejected as exc:
        for line in exc.lines:
            click.echo(line, err=True)
        raise
    for line in lines:
        click.echo(line, err=True)
    return job, (job.model_path if job.config is None else None)


def job_shape(job, script) -> tuple:
    """The script's rollout, rollout TP, backend and Megatron TP and PP, as the flags would give them."""
    from ... import job as job_mod

    rollout = job.value("actor_rollout_ref.rollout.name") or D.rollout.value
    tp = job.value("actor_rollout_ref.rollout.tensor_model_parallel_size")
    if rollout not in _values(Rollout):
        raise UsageError(f"{script}: actor_rollout_ref.rollout.name={rollout}: certify runs vllm or sglang")
    try:
        rollout_tp = int(tp) if tp else 1
    except ValueError:
        raise UsageError(f"{script}: actor_rollout_ref.rollout.tensor_model_parallel_size={tp}: not an integer") from None
    megatron = [job.value(f"actor_rollout_ref.actor.megatron.{k}_model_parallel_size") or "1"
                for k in ("tensor", "pipeline")]
    if not all(x.isdigit() for x in megatron):
        raise UsageError(f"{script}: actor_rollout_ref.actor.megatron's TP and PP ({', '.join(megatron)}): "
                         "not integers")
    return (rollout, rollout_tp, job_mod.backend(job), *map(int, megatron))
