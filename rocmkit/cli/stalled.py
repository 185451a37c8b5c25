"""`rocmkit doctor --stalled PID|ray`: the stall report of a user's own running job on this node."""

from __future__ import annotations

import datetime as dt
import socket
from pathlib import Path

import click

from ..errors import EnvironmentMissing, UsageError
from ..output import dumps


def stalled_report(selectors: tuple[str, ...], stall_out: str | None, as_json: bool, other_options: bool) -> int:
    from ..stall import report, tree

    if other_options:
        raise UsageError("--stalled reports on running processes; it takes no --level 2, --image, --root, --capture, "
                         "--compare, --baseline or --save-baseline")
    pids = tree.select(selectors)
    out = Path(stall_out) if stall_out else Path(
        f"rocmkit-stall-{socket.gethostname()}-{dt.datetime.now():%Y%m%d-%H%M%S}")
    if out.exists() and any(out.iterdir()):
        raise UsageError(f"--stall-out {out} is not empty", hint="name a new folder")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise EnvironmentMissing(f"cannot make {out}: {exc.strerror or exc}") from None
    doc = report.take(pids, out_dir=out, label="rocmkit doctor --stalled " + " ".join(selectors))
    if as_json:
        click.echo(dumps(doc), nl=False)
    else:
        click.echo("\n".join(report.lines(doc)))
    return 0 if doc["verdict"]["health"] == "working" else 1
