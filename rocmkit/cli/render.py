"""`rocmkit render`: a stack × arch as a multi-stage Dockerfile."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from .. import stacks
from ..errors import Failed, UsageError
from ..fileio import write_atomic
from ..image.plan import make_plan
from ..image.render import compare_dir, render_dockerfile
from ..image.request import targets_for
from .common import ARCH_HELP, stack_options, warn


@click.command()
@stack_options
@click.option("--arch", "arch_spec", default=None, metavar="ARCH", help=ARCH_HELP)
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Write the Dockerfile here instead of stdout (refuses to overwrite without --force).")
@click.option("--all", "render_every", is_flag=True,
              help="Render every built-in stack × each of its archs into --out-dir as <stack>-<arch>.Dockerfile.")
@click.option("--out-dir", type=click.Path(file_okay=False), default="dockerfiles", show_default=True,
              help="Folder for --all.")
@click.option("--check", is_flag=True, help="With --all: write nothing, exit 1 if any file in --out-dir is stale.")
@click.option("--force", is_flag=True, help="Overwrite an existing --output file.")
def render(stack_name, stack_file, arch_spec, output, render_every, out_dir, check, force) -> None:
    """Render a stack for an arch into a Dockerfile.

    One build stage per compiled component (each producing a wheel, built in parallel and cached on
    its own by BuildKit), a final stage installing the wheels through bind mounts, every GPU arch
    variable set to the target, MAX_JOBS passed to every compile step, the runtime environment with
    the reason for each variable, OCI labels, and a manifest of every pin at
    /opt/rocmkit/manifest.json. `rocmkit render --all` regenerates dockerfiles/.
    """
    if render_every:
        if stack_name or stack_file or arch_spec or output:
            raise UsageError("--all renders every built-in stack; it takes no --stack, --stack-file, --arch or -o")
        _render_all(Path(out_dir), check)
        return
    if check:
        raise UsageError("--check goes with --all")
    stack = stacks.load(stack_name, stack_file)
    plan = make_plan(stack, targets_for(stack, arch_spec))
    for w in plan.warnings:
        warn(w)
    text = render_dockerfile(plan)
    if output:
        write_atomic(output, text, force=force, what="--output")
        click.echo(f"wrote {output}", err=True)
    else:
        sys.stdout.write(text)


def _render_all(out_dir: Path, check: bool) -> None:
    for stack in stacks.all_builtin():
        for c in stack.mutable_components:
            warn(f"{stack.name}: component {c.name} is MUTABLE ({c.mutable_ref}): {c.mutable_reason}")
    d = compare_dir(out_dir)
    if check:
        for p in d.stale:
            click.echo(f"stale: {p}", err=True)
        for p in d.leftovers:
            click.echo(f"no longer rendered: {p}", err=True)
        if d.stale or d.leftovers:
            raise Failed(f"{len(d.stale) + len(d.leftovers)} file(s) in {out_dir} differ from what rocmkit renders now",
                         hint="run `rocmkit render --all` and commit the result")
        click.echo(f"{len(d.wanted)} Dockerfiles in {out_dir} are up to date")
        return
    d.write()
    click.echo(f"rendered {len(d.wanted)} Dockerfiles into {out_dir} ({len(d.stale)} changed, {len(d.leftovers)} removed)")
