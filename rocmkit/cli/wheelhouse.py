"""`rocmkit wheelhouse`: the wheels of a stack's pip steps, downloaded and built ahead for offline builds."""

from __future__ import annotations

from pathlib import Path

import click

from .. import stacks
from .common import echo_json, json_option, stack_options


@click.command()
@stack_options
@click.argument("dest", type=click.Path(file_okay=False))
@click.option("--python", "python", default=None, metavar="PATH",
              help="The Python that runs `pip wheel` (it must be the stack's version). Default: rocmkit's own.")
@json_option
def wheelhouse(stack_name, stack_file, dest, python, as_json) -> None:
    """Put every wheel the stack's pip steps install into DEST (default stack: verl-vllm).

    `pip wheel` resolves the base pins, the pip components and rocmkit's own requirements together, as
    the image's pip does, and turns any sdist into a wheel, so nothing compiles in the image. Then
    `rocmkit build --wheelhouse DEST --network none` builds with no network at all (pip installs only
    from DEST), and `rocmkit venv --stack NAME VENV --wheelhouse DEST` installs the stack into a venv from
    it. Files land in DEST only when every download succeeded; other files there are kept, and
    DEST/wheelhouse.json lists the files with their sha256. Stacks that build components from git are
    refused: what those install is known only from their sources.

    Exit 0 done, 1 pip failed, 2 bad usage (wrong Python version, a stack with git components).
    """
    from ..image.wheelhouse import make

    stack = stacks.load(stack_name, stack_file)
    doc = make(stack, Path(dest), python=python, on_line=lambda line: click.echo(line, err=True))
    if as_json:
        echo_json(doc)
    else:
        click.echo(f"{len(doc['files'])} files for {stack.name} (Python {doc['python']}) in {dest}")
