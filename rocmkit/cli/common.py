"""Options and helpers shared by several commands."""

from __future__ import annotations

import click

from ..paramtypes import InputFile, script_environment  # noqa: F401  (the commands' one import)
from ..output import dumps


def json_option(f):
    return click.option("--json", "as_json", is_flag=True, help="Print a JSON document instead of text.")(f)


def stack_options(f):
    f = click.option("--stack-file", type=InputFile(dir_okay=False), default=None,
                     help="A stack file of your own (TOML, schema rocmkit.stack/v1) instead of a built-in stack.")(f)
    f = click.option("--stack", "stack_name", default=None, metavar="NAME",
                     help="A built-in stack (see `rocmkit stacks`). Default: verl-vllm.")(f)
    return f


def echo_json(doc) -> None:
    click.echo(dumps(doc), nl=False)


def warn(message: str) -> None:
    """A loud warning on stderr (mutable refs, overridden inputs)."""
    click.secho(f"warning: {message}", fg="yellow", bold=True, err=True)


ARCH_HELP = ("Build target: gfx942 (MI300X/MI325X), gfx950 (MI350X/MI355X), a list (gfx942,gfx950) for a multi-arch "
             "image, or cpu for a CPU stack. Default: the stack's only target, when it has one.")
