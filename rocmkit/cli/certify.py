"""`rocmkit certify`: a smoke GRPO run that proves a stack trains, judged, with a certificate."""

from __future__ import annotations

from pathlib import Path

import click

from ..certify import engines
from ..certify.settings import SIZES, Settings
from ..errors import UsageError
from ..output import dumps
from ..certify.job import DEFAULT_STEPS as DEFAULT_JOB_STEPS
from .common import InputFile, json_option

D = Settings()  # the defaults: one place (certify/settings.py), read by the options below


@click.command()
@click.option("--image", default=None, help="Certify this image (run inside it through the Docker engine).")
@click.option("--host", "on_host", is_flag=True, help="Certify this host's Python environment (the default without --image).")
@click.option("--engine", type=click.Choice(engines.names()), default=D.engine, show_default=True,
              help="trl: TRL's GRPOTrainer (CPU or one GPU); verl: verl's main_ppo with a vLLM/SGLang rollout "
                   "(GPUs, or the CPU with the verl-cpu stack); miles: Miles' own short e2e test "
                   "(tests/e2e/short/test_qwen2.5_0.5B_gsm8k_short.py) inside --image on --gpus 4 or 8 AMD GPUs.")
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
@json_option
@click.pass_context
def certify(ctx, image, on_host, engine, model, data, steps, gpus, out, force, require_learning, size, timeout,
            stall_timeout, no_probes, progress, dry_run, as_json, **engine_values) -> None:
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
    values = {**ctx.params}  # every flag, the engines' too: an engine's flags may depend on shared ones
    fields = {}
    for each in engines.registry().values():  # each engine makes its own flags into Settings fields
        fields.update(each.cli_settings(values, ctx))
    job = fields.get("job")  # a --script job: its engine, model and shape come from the script
    if steps is None:
        steps = DEFAULT_JOB_STEPS if job else D.steps
    s = Settings(**{"engine": engine, "image": image, "model": Path(model) if model else None,
                    "data": Path(data) if data else None, "steps": steps,
                    "steps_given": ctx.get_parameter_source("steps") is not click.core.ParameterSource.DEFAULT,
                    "gpus": gpus, "out": Path(out),
                    # a job's learning is reported unless asked for; its verdict is that it runs
                    "require_learning": bool(require_learning) if job else (True if require_learning else None),
                    "size": size, "timeout": timeout, "stall_timeout": stall_timeout, "probes": not no_probes,
                    "force": force, "dry_run": dry_run, **fields})
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
            for line in engines.get(s.engine).plan_lines(plan):
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



def _collect_engine_options(command: click.Command) -> None:
    """Each engine's own flags (CertifyEngine.cli_options) into the command, each after the shared flag it names;
    several engines' flags after one shared flag in their cli_rank order. --help lists them where they always stood
    (tests/test_certify_help.py compares the text with the one before the engines declared them)."""
    shared = {p.name for p in command.params}
    extra: dict[str, list[click.Option]] = {}
    for each in sorted(engines.registry().values(), key=lambda e: e.cli_rank):
        for option in each.cli_options():
            if option.after not in shared:
                raise RuntimeError(f"engine {each.name}: --help has no shared flag {option.after!r} to list "
                                   f"{option.decls[0]} after")  # a programming error: caught by every test run
            extra.setdefault(option.after, []).append(click.Option(list(option.decls), **option.attrs))
    command.params[:] = [q for p in command.params for q in (p, *extra.get(p.name, ()))]


_collect_engine_options(certify)
