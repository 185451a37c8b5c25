"""`rocmkit venv`: a stack installed into a venv on this host, the way its image installs it."""

from __future__ import annotations

from pathlib import Path

import click

from .. import stacks
from ..errors import UsageError
from ..paramtypes import InputFile
from .common import echo_json, json_option


@click.command()
@click.option("--stack", "stack_name", default=None, metavar="NAME",
              help="A built-in stack with a pip-only install: verl-cpu or trl-cpu (see `rocmkit stacks`).")
@click.option("--stack-file", type=InputFile(dir_okay=False), default=None,
              help="A stack file of your own (TOML, schema rocmkit.stack/v1) instead of a built-in stack.")
@click.argument("dest", type=click.Path(file_okay=False))
@click.option("--wheelhouse", type=click.Path(file_okay=False), default=None, metavar="DIR",
              help="Install only from DIR (made by `rocmkit wheelhouse --stack NAME DIR`), with no index: offline.")
@click.option("--python", "python", default=None, metavar="PATH",
              help="The Python the venv is made from (it must be the stack's version). Default: rocmkit's own "
                   "when it is that version, else python<version> on PATH.")
@click.option("--rocmkit", "rocmkit_from", type=click.Choice(["auto", "wheel", "editable"]), default="auto",
              show_default=True,
              help="How the venv gets rocmkit: `wheel` installs this rocmkit's own wheel, as the image does; "
                   "`editable` installs the checkout this rocmkit runs from with `pip install -e`; `auto` is "
                   "`editable` when rocmkit runs from a checkout, else `wheel`.")
@click.option("--force", is_flag=True, help="Replace a venv already at DEST (only a venv: a folder with pyvenv.cfg).")
@json_option
def venv(stack_name, stack_file, dest, wheelhouse, python, rocmkit_from, force, as_json) -> None:
    """Make the venv DEST holding the stack, installed the way its image installs it.

    The steps, each printed with its pip line: `python -m venv DEST`; the base pins with the stack's extra
    index (torch's CPU build for verl-cpu); a pip constraint holding the PyTorch build they installed, as the
    image's; the components resolved together; the removals; each no-deps component on its own; then rocmkit
    itself with the requirements its image wheel declares. Then `DEST/bin/rocmkit certify --host --engine
    verl --gpus 0` certifies in it. A stack whose image needs more than pip (ROCm from a base image, components
    compiled from git, downloaded files) is refused, naming why, as is a Python of another version.

    A failed step is named with its pip line, and the venv is removed: nothing half-made is left.
    DEST/rocmkit-venv.json, written last, records the steps. DEST must not exist (or `--force` for a venv there).

    Exit 0 made, 1 a step failed, 2 bad usage (no pip-only install, wrong Python, DEST exists), 3 no Python of
    the stack's version found, 130/143 interrupted.
    """
    from ..image.venv import make

    if not stack_name and not stack_file:
        raise UsageError("name the stack: --stack NAME or --stack-file PATH",
                         hint="stacks with a pip-only install: verl-cpu, trl-cpu, e.g. `rocmkit venv --stack "
                              "verl-cpu .venv-verl-cpu`")
    stack = stacks.load(stack_name, stack_file)

    def say(line: str) -> None:
        click.echo(line, err=as_json)

    doc = make(stack, Path(dest), python=python, wheelhouse=Path(wheelhouse) if wheelhouse else None,
               rocmkit=rocmkit_from, force=force, say=say, on_line=lambda line: click.echo(f"  | {line}", err=True))
    if as_json:
        echo_json(doc)
    else:
        click.echo(f"made {dest} for stack {stack.name} in {doc['seconds']:.0f} s ({len(doc['steps'])} pip steps); "
                   f"rocmkit {doc['rocmkit']['from']}; run {Path(dest) / 'bin' / 'rocmkit'} certify --host ...")
