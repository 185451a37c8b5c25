"""`rocmkit matrix`: every built-in stack × arch, for CI image pipelines."""

from __future__ import annotations

import click

from .. import stacks
from ..image.plan import make_plan
from ..image.render import dockerfile_name
from ..output import document
from .common import echo_json, json_option


@click.command()
@json_option
def matrix(as_json: bool) -> None:
    """List every built-in stack × arch: the build matrix of .github/workflows/images.yml.

    `--json` prints {"include": [...]} for a GitHub Actions matrix, each entry with stack, arch, rocm,
    the rendered Dockerfile, the default tag and whether the stack has mutable components.
    """
    rows = []
    for s in stacks.all_builtin():
        for arch in s.targets:
            plan = make_plan(s, [arch])
            rows.append({"stack": s.name, "arch": arch, "rocm": s.rocm,
                         "dockerfile": f"dockerfiles/{dockerfile_name(s.name, [arch])}",
                         "tag": plan.tag.split(":", 1)[1], "mutable": bool(plan.warnings)})
    if as_json:
        echo_json(document("matrix", {"include": rows}))
    else:
        for r in rows:
            click.echo(f"{r['stack']:<14} {r['arch']:<8} ROCm {r['rocm']:<6} {r['dockerfile']}")
