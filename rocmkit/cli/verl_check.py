"""`rocmkit verl-check`: a user's verl launch scripts checked against the verl that will run them."""

from __future__ import annotations

import click

from .common import InputFile, echo_json, json_option


@click.command("verl-check")
@click.argument("files", nargs=-1, required=True, type=InputFile(dir_okay=False))
@click.option("--image", default=None, help="Check against the verl in this image (run through the Docker engine; "
                                            "the image needs Python with verl, not rocmkit).")
@click.option("--verl-python", default=None, metavar="PY",
              help="Check against the verl of this Python on this host. Default: this Python, if it has verl.")
@click.option("--timeout", type=int, default=600, show_default=True, help="Seconds for verl's check.")
@json_option
@click.pass_context
def verl_check(ctx, files, image, verl_python, timeout, as_json) -> None:
    """Check verl launch scripts or overrides files before a job starts.

    FILE is a launch script (the Hydra overrides after `python3 -m verl.trainer.main_ppo`, read with
    backslash continuations, quoting, comments, and the shell variables the script sets before; a value
    from a variable it does not set is named, not guessed) or a plain overrides file (one a line).
    verl's own config composes them (--image: the image's verl; else --verl-python or this Python's),
    and every unknown, removed or renamed key is reported with FILE:LINE and, where verl's history
    knows one, what to use instead; deprecated config names and keys are warnings, with their
    replacement. Then verl's own validation runs on the composed configuration, with verl 0.9.1's rules for
    splitting the GPUs (rollout TP, Megatron TP x PP x CP), which verl asserts only when its workers start. A
    check that needs a value the script leaves unresolved is named as not checked; the others' errors stand.

    Exit 0: verl accepts every command (warnings may be printed); 1: an error was found; 2: bad usage or
    an unreadable file; 3: no verl to check against.
    """
    from ..verl import recipe_check
    from ..errors import UsageError

    if image and verl_python:
        raise UsageError("--image and --verl-python are alternatives; give one")
    invocations = recipe_check.read_files(list(files))
    if image:
        verdicts, where = recipe_check.in_image(invocations, image, timeout)
    else:
        verdicts, where = recipe_check.on_host(invocations, verl_python, timeout)
    doc = recipe_check.document(invocations, verdicts, where)
    if as_json:
        echo_json(doc)
    else:
        for inv in invocations:
            click.echo(f"{inv.file}:{inv.line}: main_ppo --config-name={inv.config_name}, "
                       f"{len(inv.overrides)} overrides")
        for f in doc["findings"]:
            click.echo(f"{f['file']}:{f['line'] or ''}: {f['severity']}: {f['message']}")
            if f["instead"]:
                click.echo(f"    instead: {f['instead']}")
        c = doc["counts"]
        verdict = "rejected" if c["error"] else "accepted"
        click.echo(f"verl {doc['verl']} ({where}): {verdict}; {c['error']} error(s), {c['warning']} warning(s), "
                   f"{c['note']} note(s)")
    ctx.exit(doc["exit_code"])
