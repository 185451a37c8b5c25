"""Options and helpers shared by several commands."""

from __future__ import annotations

import os
import stat

import click

from ..output import dumps


class InputFile(click.Path):
    """A file the command reads: click.Path, and a device or a pipe is refused (exit 2 naming the option), for
    /dev/zero, /dev/full or /dev/urandom never end and a FIFO without a writer never starts: reading one as a stack
    file or a script would fill memory or wait forever."""

    def convert(self, value, param, ctx):
        if isinstance(value, str) and not value.strip():
            self.fail("an empty path", param, ctx)  # "" would read as "." (the current folder)
        rv = super().convert(value, param, ctx)
        try:
            mode = os.stat(rv).st_mode
        except (OSError, ValueError):
            return rv  # missing: exists= (or the command's own message) decides
        if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
            self.fail(f"{click.format_filename(rv)!r} is a device or a pipe, not a file", param, ctx)
        return rv


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


def script_environment(items) -> dict[str, str]:
    """This process's environment with a launch script's `--env NAME=VALUE` items over it (verl-check, certify)."""
    from ..errors import UsageError

    env = dict(os.environ)
    for item in items:
        name, eq, value = item.partition("=")
        if not eq or not name.isidentifier():
            raise UsageError(f"--env {item}: expected NAME=VALUE")
        env[name] = value
    return env
