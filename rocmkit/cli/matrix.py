"""`rocmkit matrix`: every built-in stack × arch, for CI image pipelines."""

from __future__ import annotations

import click

from ..image.bake import matrix_rows
from ..output import document
from .common import echo_json, json_option


@click.command()
@json_option
def matrix(as_json: bool) -> None:
    """List every built-in stack × arch: the build matrix of .github/workflows/images.yml.

    `--json` prints {"include": [...]} for a GitHub Actions matrix, each entry with stack, arch, rocm,
    the rendered Dockerfile, the default tag and whether the stack has mutable components.
    """
    rows = matrix_rows()
    if as_json:
        echo_json(document("matrix", {"include": rows}))
    else:
        for r in rows:
            click.echo(f"{r['stack']:<14} {r['arch']:<8} ROCm {r['rocm']:<6} {r['dockerfile']}")
