"""`rocmkit verl-check`: a user's verl launch scripts checked against the verl that will run them."""

from __future__ import annotations


import click

from .common import InputFile, echo_json, json_option, script_environment


@click.command("verl-check")
@click.argument("files", nargs=-1, required=True, type=InputFile(dir_okay=False))
@click.option("--image", default=None, help="Check against the verl in this image (run through the Docker engine; "
                                            "the image needs Python with verl, not rocmkit).")
@click.option("--verl-python", default=None, metavar="PY",
              help="Check against the verl of this Python on this host. Default: this Python, if it has verl.")
@click.option("--timeout", type=click.IntRange(min=1), default=600, show_default=True,
              help="Seconds for verl's check.")
@click.option("--gpus", type=click.IntRange(min=1), default=None, metavar="N",
              help="What the script's GPU queries (nvidia-smi, rocm-smi, amd-smi, torch.cuda.device_count) answer. "
                   "Default: 8, and a note says it was assumed.")
@click.option("--arg", "script_args", multiple=True, metavar="VALUE",
              help="An argument to the script ($1, $2... in order); repeatable.")
@click.option("--env", "script_env", multiple=True, metavar="NAME=VALUE",
              help="A variable for the script, over the caller's environment (which it gets, $HOME aside); repeatable.")
@click.option("--script-timeout", type=click.FloatRange(min=0.1), default=20.0, show_default=True, metavar="S",
              help="Seconds the script may run in its sandbox before it is stopped.")
@json_option
@click.pass_context
def verl_check(ctx, files, image, verl_python, timeout, gpus, script_args, script_env, script_timeout,
               as_json) -> None:
    """Check verl launch scripts or overrides files before a job starts.

    FILE is a launch script or a plain overrides file (one key=value a line). A script is run by bash in a
    bubblewrap sandbox (Debian's bubblewrap package): read-only root, a private empty $HOME and /tmp, no
    network, no GPU, stopped after --script-timeout. python, ray, torchrun, downloads, GPU tools and file
    changes are recording stand-ins there, so what is checked is the exact argv bash hands to
    `verl.trainer.main_ppo` (each main_ppo command the script runs), each override with the line that wrote
    it. The script gets the caller's environment, --env, --arg and --gpus.
    verl's own config composes them (--image: the image's verl; else --verl-python or this Python's),
    and every unknown, removed or renamed key is reported with FILE:LINE and, where verl's history
    knows one, what to use instead; deprecated config names and keys are warnings, with their
    replacement. A value of the wrong type (data.max_prompt_length=5l2) is an error naming the type verl
    declares for its key. Then verl's own validation runs on the composed configuration, with verl 0.9.1's rules for
    splitting the GPUs (rollout TP, Megatron TP x PP x CP), which verl asserts only when its workers start.

    Exit 0: verl accepts every command (warnings may be printed); 1: an error was found; 2: bad usage, an
    unreadable file, or a script that runs no main_ppo (it exits first, or is stopped at its deadline); 3:
    no verl to check against, or no bubblewrap sandbox for a script.
    """
    from ..verl import launch_script, recipe_check
    from ..errors import UsageError

    if image and verl_python:
        raise UsageError("--image and --verl-python are alternatives; give one")
    env = script_environment(script_env)
    options = launch_script.ReadOptions(env=env, args=list(script_args), gpus=gpus, timeout=script_timeout)
    invocations = recipe_check.read_files(list(files), options)
    if image:
        verdicts, where = recipe_check.in_image(invocations, image, timeout)
    else:
        verdicts, where = recipe_check.on_host(invocations, verl_python, timeout)
    doc = recipe_check.document(invocations, verdicts, where)
    if as_json:
        echo_json(doc)
    else:
        for line in recipe_check.text_lines(invocations, verdicts):
            click.echo(line)
        c = doc["counts"]
        verdict = "rejected" if c["error"] else "accepted"
        click.echo(f"verl {doc['verl']} ({where}): {verdict}; {c['error']} error(s), {c['warning']} warning(s), "
                   f"{c['note']} note(s)")
    ctx.exit(doc["exit_code"])

