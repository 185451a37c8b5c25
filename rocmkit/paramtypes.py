"""click's pieces that the CLI shares with what declares its own flags below it (certify's engines declare
theirs, issue 72): the input-file type and a launch script's `--env` items. They live here, not in rocmkit/cli/,
because nothing below the CLI may import it (tests/test_layout.py)."""

from __future__ import annotations

import os
import stat

import click


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


def script_environment(items) -> dict[str, str]:
    """This process's environment with a launch script's `--env NAME=VALUE` items over it (verl-check, certify)."""
    from .errors import UsageError

    env = dict(os.environ)
    for item in items:
        name, eq, value = item.partition("=")
        if not eq or not name.isidentifier():
            raise UsageError(f"--env {item}: expected NAME=VALUE")
        env[name] = value
    return env
