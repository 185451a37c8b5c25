"""`rocmkit certify`: a smoke GRPO run that proves a stack trains, judged, with a certificate."""

from __future__ import annotations

from pathlib import Path

import click

from ..errors import UsageError
from ..fileio import write_atomic
from ..output import dumps
from .common import json_option


def _host_facts() -> dict:
    from ..doctor.facts import collect

    facts = collect("/", process=False)
    return {"gpus": [{"pci": d.pci_address, "product": d.product.name if d.product else d.device_id, "gfx": d.gfx,
                      "partitions": d.partitions} for d in facts.devices],
            "rocm": facts.rocm_version, "container": facts.container}


@click.command()
@click.option("--image", default=None, help="Certify this image (run inside it through the Docker engine).")
@click.option("--host", "on_host", is_flag=True, help="Certify this host's Python environment (the default without --image).")
@click.option("--engine", type=click.Choice(["trl", "verl"]), default="trl", show_default=True,
              help="trl: TRL's GRPOTrainer (CPU or one GPU); verl: verl's main_ppo with vLLM/SGLang rollout (GPUs).")
@click.option("--model", type=click.Path(file_okay=False), default=None,
              help="A local Hugging Face model folder. Default: a tiny Qwen2 model generated offline.")
@click.option("--data", type=click.Path(dir_okay=False), default=None,
              help="A parquet file in verl's GSM8K row format. Default: the built-in task.")
@click.option("--steps", type=int, default=16, show_default=True, help="Training steps (at least 4).")
@click.option("--gpus", type=int, default=1, show_default=True, help="GPUs to use; 0 runs the TRL engine on the CPU.")
@click.option("--out", type=click.Path(file_okay=False), default="rocmkit-certify", show_default=True,
              help="Run folder: model, data, logs, metrics, certificate.json and certificate.md.")
@click.option("--require-learning", is_flag=True,
              help="Fail unless the reward rises (always required on the built-in task; reported otherwise).")
@click.option("--size", type=click.Choice(["tiny", "0.5b"]), default="tiny", show_default=True,
              help="Size of the built-in model: tiny (1.3M parameters) or 0.5b (Qwen2.5-0.5B-shaped, random).")
@click.option("--rollout", type=click.Choice(["vllm", "sglang"]), default="vllm", show_default=True,
              help="verl's rollout engine.")
@click.option("--timeout", type=int, default=3600, show_default=True, help="Seconds before the run is stopped.")
@click.option("--no-probes", is_flag=True,
              help="Skip the level-2 GPU probes (GEMM, HBM, host links, all-reduce) recorded in the certificate.")
@click.option("--dry-run", is_flag=True, help="Validate everything and print the exact command; run nothing.")
@json_option
@click.pass_context
def certify(ctx, image, on_host, engine, model, data, steps, gpus, out, require_learning, size, rollout, timeout,
            no_probes, dry_run, as_json) -> None:
    """Run a short GRPO job on this stack and say, with numbers, whether it trains.

    The built-in default needs no network: a tiny Qwen2 model and tokenizer are generated locally,
    with a task whose reward a policy learns within the smoke budget. The certificate passes only if
    every step ran, every loss is finite and (on the built-in task, or with --require-learning) the
    reward rose by the stated margin. It records rollout and training tokens/s, the time of each
    phase (generation, reference and old log-probs, reward, update), MFU where the device's peak is
    known, the doctor's level-2 GPU probe figures (unless --no-probes; not on the CPU), the image
    (id, manifest) or host packages, and the host's GPUs. For the verl engine the
    overrides are validated against the target's own verl before anything runs.

    Exit 0 pass, 1 fail, 2 bad usage or an invalid verl configuration, 3 missing environment.
    """
    from ..certify import runner
    from ..certify.certificate import build, markdown
    from ..certify.judge import judge

    if image and on_host:
        raise UsageError("--image and --host are alternatives; give one")
    s = runner.Settings(engine=engine, image=image, model=model, data=data, steps=steps, gpus=gpus, out=Path(out),
                        require_learning=True if require_learning else None, size=size, rollout=rollout,
                        timeout=timeout)
    runner.validate_settings(s)
    target = runner.check_target(s)
    ws = runner.prepare(s)
    inner, env = runner.inner_command(s, ws)
    argv = runner.wrap(s, ws, inner, env)
    validation = runner.validate_verl(s, ws) if engine == "verl" else None
    line = runner.shell_line(argv, env, bool(image))
    if dry_run:
        if as_json:
            click.echo(dumps({"schema": "rocmkit.certify-plan/v1", "command": argv, "env": env, "shell": line,
                              "verl_validation": validation, "run_folder": str(ws.root)}), nl=False)
        else:
            if validation:
                click.echo(f"verl {validation['verl']} accepts the configuration")
            click.echo(line)
        return
    probes = None if no_probes else runner.probe_figures(s)
    run = runner.execute(s, ws, argv, env)
    steps_data = runner.read_steps(s, ws)
    info = runner.run_info(ws)
    verdict = judge(steps_data, s.steps, run["status"], require_learning=s.learning_required)
    settings = {"engine": engine, "steps": steps, "gpus": gpus, "model": model or f"built-in {size}",
                "data": data or "built-in digits task", "rollout": rollout if engine == "verl" else None,
                "learning_required": s.learning_required, "command": argv}
    cert = build(settings=settings, target=target, host=_host_facts(), info=info, steps=steps_data,
                 verdict=verdict, run=run, files={"log": str(ws.log), "metrics": str(ws.run_dir / "metrics.jsonl")},
                 probes=probes)
    write_atomic(ws.root / "certificate.json", dumps(cert))
    write_atomic(ws.root / "certificate.md", markdown(cert))
    if as_json:
        click.echo(dumps(cert), nl=False)
    else:
        click.echo(markdown(cert))
        click.echo(f"certificate: {ws.root / 'certificate.json'}")
    ctx.exit(0 if verdict.passed else 1)
