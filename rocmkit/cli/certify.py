"""`rocmkit certify`: a smoke GRPO run that proves a stack trains, judged, with a certificate."""

from __future__ import annotations

from pathlib import Path

import click

from ..certify import engines
from ..certify.engines.trl import ZERO_STAGES
from ..certify.settings import SIZES, Backend, Rollout, Settings, VllmMode
from ..errors import UsageError
from ..verl.attention import CHOICES as ATTN_CHOICES
from ..output import dumps
from ..certify.job import DEFAULT_STEPS as DEFAULT_JOB_STEPS
from .common import InputFile, json_option, script_environment

D = Settings()  # the defaults: one place (certify/settings.py), read by the options below


def _values(enum) -> list[str]:
    return [e.value for e in enum]


@click.command()
@click.option("--image", default=None, help="Certify this image (run inside it through the Docker engine).")
@click.option("--host", "on_host", is_flag=True, help="Certify this host's Python environment (the default without --image).")
@click.option("--engine", type=click.Choice(engines.names()), default=D.engine, show_default=True,
              help="trl: TRL's GRPOTrainer (CPU or one GPU); verl: verl's main_ppo with a vLLM/SGLang rollout "
                   "(GPUs, or the CPU with the verl-cpu stack); miles: Miles' own short e2e test "
                   "(tests/e2e/short/test_qwen2.5_0.5B_gsm8k_short.py) inside --image on --gpus 4 or 8 AMD GPUs.")
@click.option("--miles-dir", default=D.miles_dir, show_default=True,
              help="With --engine miles: the Miles checkout inside the image (its tests/ and train.py).")
@click.option("--model", type=click.Path(file_okay=False), default=None,
              help="A local Hugging Face model folder. Default: a tiny Qwen2 model generated in the target.")
@click.option("--data", type=InputFile(dir_okay=False), default=None,
              help="A parquet file in verl's GSM8K row format. Default: the built-in task.")
@click.option("--steps", type=int, default=None,
              help=f"Training steps (at least 4). Given, exactly that many run; left out on the built-in task, the "
                   f"run stops once the reward rule holds from step 8 on, or after {D.steps} steps. With --script: "
                   f"default {DEFAULT_JOB_STEPS} (a job's learning is reported, not judged: 1 or more).")
@click.option("--gpus", type=int, default=D.gpus, show_default=True,
              help="GPUs to train on; 0 trains on the CPU. Fewer visible than asked: exit 3 before training.")
@click.option("--out", type=click.Path(file_okay=False), default=str(D.out), show_default=True,
              help="Run folder: new, empty, or a previous run's (its marker file). Holds the model, data, logs, "
                   "metrics, certificate.json, certificate.md and its picture, certificate.svg; a previous run's "
                   "files move whole to previous/<its time>/ inside it.")
@click.option("--force", is_flag=True,
              help="Use an --out folder that holds other files: rocmkit adds only its own entries beside them "
                   "and never replaces a file it did not write.")
@click.option("--require-learning", is_flag=True,
              help="Fail unless the reward rises (always required on the built-in task; reported otherwise).")
@click.option("--size", type=click.Choice(SIZES), default=D.size, show_default=True,
              help="Size of the built-in model: tiny (1.3M parameters) or 0.5b (Qwen2.5-0.5B-shaped, random).")
@click.option("--rollout", type=click.Choice(_values(Rollout)), default=D.rollout.value, show_default=True,
              help="verl's rollout engine.")
@click.option("--rollout-tp", type=int, default=D.rollout_tp, show_default=True,
              help="With --engine verl: the rollout's tensor parallel size. verl fills the GPUs with replicas of this "
                   "many GPUs each, so it must divide --gpus (checked before anything starts); the certificate's "
                   "engine_run.layout records the replicas and the actor's data-parallel ranks.")
@click.option("--backend", type=click.Choice(_values(Backend)), default=D.backend.value, show_default=True,
              help="verl's actor: FSDP, or Megatron (model_engine=megatron with mbridge; GPUs only, and an image "
                   "with megatron-core and mbridge).")
@click.option("--tp", type=int, default=D.tp, show_default=True, help="With --backend megatron: tensor parallel size "
              "of the actor and reference. verl refuses a TP x PP that does not divide --gpus.")
@click.option("--pp", type=int, default=D.pp, show_default=True, help="With --backend megatron: pipeline parallel size.")
@click.option("--attn", type=click.Choice(ATTN_CHOICES), default=D.attn, show_default=True,
              help="With --engine verl: the attention verl's actor and reference load the model with. auto: "
                   "flash_attention_2 where flash_attn imports in the target (and a GPU is used), otherwise sdpa; a "
                   "named implementation the target cannot run stops the run (and --dry-run) before training, exit 3. "
                   "The certificate records the choice and why.")
@click.option("--rollout-graphs", is_flag=True,
              help="With --engine verl on GPUs: let the rollout engine compile and capture its CUDA/HIP graphs "
                   "(verl's default; --engine-defaults restores it too, with the other start-up cuts). Without it "
                   "the smoke run rolls out eager, which starts faster; the certificate records whether graphs "
                   "were captured.")
@click.option("--engine-defaults", is_flag=True,
              help="With --engine verl: run verl, vLLM and TransferQueue with their own defaults, none of the smoke "
                   "run's start-up cuts (the actor's entropy compile, the eager rollout, vLLM's model worker in its "
                   "engine process, one TransferQueue storage unit): certifies exactly what a production job starts, "
                   "slower. Without it the certificate names each cut and the option that restores it.")
@click.option("--vllm-mode", type=click.Choice(_values(VllmMode)), default=D.vllm_mode,
              help="With --engine trl: generate with vLLM. server: `trl vllm-serve` on the first GPU and the trainer "
                   "under `accelerate launch` on the others (--gpus 2 or more; --gpus 0: both on the CPU, the server "
                   "on loopback); its log is server.log. colocate: vLLM inside each training process. "
                   "Default: TRL's Hugging Face generation in one process.")
@click.option("--zero", type=click.IntRange(min(ZERO_STAGES), max(ZERO_STAGES)), default=D.zero,
              help="With --vllm-mode on GPUs: DeepSpeed ZeRO stage of the trainer (accelerate --use_deepspeed).")
@click.option("--timeout", type=int, default=D.timeout, show_default=True,
              help="Seconds for the whole certification; at the deadline everything it started is stopped (exit 124).")
@click.option("--stall-timeout", type=int, default=D.stall_timeout, show_default=True,
              help="Stop the run when it prints no new step and no new line and its processes do no work for "
                   "this many seconds (0: never; a status line that a waiting job repeats is not new; work is a "
                   "thread wanting a core half the time while it touches new memory or files, or a GPU busy while its "
                   "memory changes, read from /proc; a thread spinning, as a rank waiting in a collective does, "
                   "is not work; silent work delays the stop by at most 5 times this), or soon "
                   "after a fatal error (a worker traceback, vLLM's 'Worker failed', a dead Ray actor, a CUDA/HIP "
                   "error) with no progress after it: a FAIL certificate naming the stall or error, its phase and "
                   "last lines (exit 1). The default is several times the longest silence of a healthy run.")
@click.option("--no-probes", is_flag=True,
              help="Skip the level-2 GPU probes (GEMM, HBM, host links, all-reduce) recorded in the certificate.")
@click.option("--progress", type=click.Choice(["auto", "tty", "plain"]), default="auto", show_default=True,
              help="Live display on a terminal, or one line per event (auto: plain when not a terminal or in CI).")
@click.option("--dry-run", is_flag=True,
              help="Check everything inside the target (Python, rocmkit, torch, the engine, GPUs, verl's own check "
                   "of the overrides) in a temporary folder, print the command; write nothing to --out.")
@click.option("--tune", "tune_file", type=InputFile(dir_okay=False, exists=True), default=None, metavar="PLAN.json",
              help="With --engine verl: also check that the target's verl composes and validates this `rocmkit tune "
                   "--json` plan (your real job's settings); a rejected plan fails the certificate. A plan without "
                   "algorithm.adv_estimator is refused (exit 2).")
@click.option("--script", type=InputFile(dir_okay=False, exists=True), default=None, metavar="RUN.sh",
              help="Certify this verl launch script as a job (--engine verl is implied). It is read as `rocmkit "
                   "verl-check` reads it (--arg, --env; its GPU queries answer --gpus), and a script verl rejects "
                   "stops here (exit 2, the same findings). Then main_ppo runs the script's overrides under a smoke "
                   "budget: --steps steps, no validation, no checkpoint saves, console and file loggers. A model "
                   "path not on this host is built with random weights from its config.json (--model-config, or "
                   "rocmkit's model table by the path's last part); data files not on this host are replaced by "
                   "the built-in task at the script's lengths. The certificate names each stand-in. The script's "
                   "exported variables, its --config-name and its backend (Megatron or FSDP) go with the job; "
                   "--rollout, --rollout-tp, --backend, --tp and --pp are the script's to set.")
@click.option("--arg", "script_args", multiple=True, metavar="VALUE",
              help="With --script: an argument to the script ($1, $2... in order); repeatable.")
@click.option("--env", "script_env", multiple=True, metavar="NAME=VALUE",
              help="With --script: a variable for the script, over the caller's environment; repeatable.")
@click.option("--model-config", type=InputFile(dir_okay=False, exists=True), default=None, metavar="FILE",
              help="With --script: the config.json of the script's model, built with random weights in its shape "
                   "(used even when the model folder is on this host).")
@json_option
@click.pass_context
def certify(ctx, image, on_host, engine, miles_dir, model, data, steps, gpus, out, force, require_learning, size,
            rollout, rollout_tp, backend, tp, pp, attn, rollout_graphs, engine_defaults, vllm_mode, zero, timeout, stall_timeout, no_probes, progress,
            dry_run, tune_file, script, script_args, script_env, model_config, as_json) -> None:
    """Run a short GRPO job on this stack and say, with numbers, whether it trains.

    The built-in default needs no network: a tiny Qwen2 model and tokenizer are generated inside the
    target (no torch needed on the host for --image), with a task whose reward a policy learns within
    the smoke budget. The certificate passes only if every step ran, every loss is finite, no GPU probe
    failed and (on the built-in task, or with --require-learning) the reward rose by the stated margin.
    On the built-in task without --steps, the run stops as soon as that rule holds (from step 8 on), and
    the certificate's run.ended_by says which rule ended the run.
    It records the image (id, repo digests, manifest) or host packages, the device actually used, the
    engine's per-step metrics, rollout and training tokens/s, time per phase, MFU where known, the
    doctor's level-2 GPU probe figures, and every failed or warned probe. The engine's output goes to
    run.log; the terminal shows the step, the reward and the time.

    It also proves that the rollout samples the policy the trainer trains: the figures verl and TRL compute
    every step from the rollout's and the trainer's log-probs of the same tokens are judged against bands
    measured on healthy runs and on runs with a broken weight sync (a mismatch from the first step: the
    rollout's numerics; one after the first update: its weights did not follow), and with verl's vLLM
    rollout a witness at both ends of every weight sync checks that each tensor the trainer sent reached the
    rollout's model unchanged. In a --script job, where random weights make the reward meaningless, these
    are the certificate's evidence that the stack trains the job's model.

    While it trains, the terminal says which phase the run is in and for how long ("starting the vLLM
    engine: 2:10", "step 3 of 16, reward 0.412"), and a watchdog stops a run that stalls or whose engine
    died (--stall-timeout).

    Exit 0 certified; 1 the stack ran and did not train or learn, stalled, or its engine failed; 2 bad usage or an invalid verl
    configuration; 3 not certified: the target could not run the check (no Python, rocmkit, torch or
    engine in it; no Docker engine; fewer GPUs visible than asked; an --attn it cannot run); 124 not certified: past --timeout;
    130/143 interrupted. Whatever the exit, nothing rocmkit started is left running.
    """
    from ..certify.flow import certify as run_certify
    from ..progress import Display

    if image and on_host:
        raise UsageError("--image and --host are alternatives; give one")
    if tune_file:
        from ..tune.planfile import load_overrides

        tuned = tuple(load_overrides(tune_file))
    else:
        tuned = ()
    job = None
    if script:
        job, model, rollout, rollout_tp, backend, tp, pp = read_job(ctx, script, script_args, script_env, model_config,
                                                                    model, data, gpus, image)
        engine = "verl"
    elif script_args or script_env or model_config:
        raise UsageError("--arg, --env and --model-config are for --script")
    if steps is None:
        steps = DEFAULT_JOB_STEPS if script else D.steps
    s = Settings(engine=engine, image=image, model=Path(model) if model else None,
                 data=Path(data) if data else None, steps=steps, steps_given=ctx.get_parameter_source("steps") is not click.core.ParameterSource.DEFAULT,
                 job=job, gpus=gpus, out=Path(out),
                 # a job's learning is reported unless asked for; its verdict is that it runs
                 require_learning=bool(require_learning) if script else (True if require_learning else None), size=size, rollout=Rollout(rollout),
                 rollout_tp=rollout_tp,
                 timeout=timeout, stall_timeout=stall_timeout, probes=not no_probes, force=force, dry_run=dry_run, tune=tuned,
                 backend=Backend(backend), tp=tp, pp=pp, vllm_mode=VllmMode(vllm_mode) if vllm_mode else None,
                 zero=zero, attn=attn, rollout_graphs=rollout_graphs, engine_defaults=engine_defaults, miles_dir=miles_dir)
    with Display("certify", progress) as display:
        outcome = run_certify(s, display)
    if outcome.plan is not None:
        plan = outcome.plan
        if as_json:
            click.echo(dumps(plan), nl=False)
        else:
            for note in plan["notes"]:
                click.echo(f"note: {note}")
            if plan["setup"]:
                dev = plan["setup"].get("devices") or {}
                click.echo(f"target: Python {plan['setup'].get('python')}, torch {dev.get('torch')}, "
                           f"{dev.get('visible', 0)} GPU(s) visible")
            for c in plan.get("checks", []):
                if c["passed"]:
                    click.echo(f"{c['name']}: {c['detail']}")
            for c in plan["setup_failures"]:
                click.echo(f"setup: {c['name']}: {c['detail']}")
            for line in engines.get(engine).plan_lines(plan):
                click.echo(line)
            click.echo(plan["shell"])
    elif outcome.certificate is not None:
        from ..certify.certificate import markdown

        click.echo(dumps(outcome.certificate) if as_json else markdown(outcome.certificate), nl=not as_json)
        if not as_json:
            click.echo(f"certificate: {outcome.folder / 'certificate.json'}")
    if outcome.error:
        message, hint = outcome.error
        click.echo(f"error: {message}", err=True)
        if hint:
            click.echo(f"hint: {hint}", err=True)
    ctx.exit(outcome.exit_code)


def read_job(ctx, script, script_args, script_env, model_config, model, data, gpus, image):
    """The script read into a job (certify/job.py); verl's rejection printed as verl-check prints it, exit 2.
    The script's own model folder, rollout and rollout TP become the run's."""
    from ..certify import job as job_mod

    if model or data:
        raise UsageError("--model and --data name the built-in run's inputs; with --script the script names them",
                         hint="leave them out (a model not on this host: --model-config FILE)")
    asked = ctx.params["engine"]
    if ctx.get_parameter_source("engine").name != "DEFAULT" and "job" not in engines.get(asked).options:
        raise UsageError(f"--script certifies a verl launch script: --engine {asked} cannot run it",
                         hint="leave out --engine")
    for name in ("rollout", "rollout_tp", "backend", "tp", "pp"):
        if ctx.get_parameter_source(name).name != "DEFAULT":
            raise UsageError(f"--{name.replace('_', '-')}: with --script the script sets it",
                             hint="change the script's override instead")
    env = script_environment(script_env)
    try:
        job, lines = job_mod.read(script, list(script_args), env, max(1, gpus), 20.0, image, model_config)
    except job_mod.Rejected as exc:
        for line in exc.lines:
            click.echo(line, err=True)
        raise
    for line in lines:
        click.echo(line, err=True)
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
    return (job, (job.model_path if job.config is None else None), rollout, rollout_tp, job_mod.backend(job),
            *map(int, megatron))
