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
        click.echo(table(rows), nl=False)


def table(rows: list[dict]) -> str:
    """One line a row, each column as wide as its widest value, so a long stack name keeps the columns in line."""
    cells = [(r["stack"], r["arch"], f"ROCm {r['rocm']}", r["dockerfile"]) for r in rows]
    widths = [max((len(c[i]) for c in cells), default=0) for i in range(3)]
    return "".join(" ".join(v.ljust(w) for v, w in zip(c[:3], widths)) + f" {c[3]}\n" for c in cells)
