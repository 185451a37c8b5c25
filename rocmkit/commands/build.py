"""`rocmkit build`: plan a stack × arch and build it through the Docker engine with BuildKit."""

from __future__ import annotations

import click

from .. import archs, stacks
from ..errors import UsageError
from ..output import document
from ..plan import DEFAULT_MAX_JOBS, make_plan, plan_document
from ..sources import parse_source_options
from .common import echo_json, json_option, stack_options, warn


def _max_jobs(value: str) -> int | str:
    if value == "auto":
        return "auto"
    try:
        n = int(value)
    except ValueError:
        raise UsageError(f"--max-jobs {value!r}: expected a number or 'auto'") from None
    if n < 1:
        raise UsageError(f"--max-jobs {value!r}: must be at least 1")
    return n


@click.command()
@click.option("--arch", "arch_spec", required=True, metavar="ARCH",
              help="Target arch: gfx942 (MI300X/MI325X), gfx950 (MI350X/MI355X), or a list for a multi-arch image.")
@stack_options
@click.option("--dry-run", is_flag=True, help="Print the plan (stages, what builds in parallel, build args, tag, labels); build nothing.")
@click.option("--max-jobs", default=str(DEFAULT_MAX_JOBS), show_default=True, metavar="N|auto",
              help="Parallel compile jobs in every build stage; 'auto' sizes it from the builder's memory and cores.")
@click.option("--base-image", default=None, metavar="IMAGE", help="Replace the stack's base image (e.g. a mirror); recorded in the manifest and labels.")
@click.option("--source", "source_opts", multiple=True, metavar="COMPONENT=DIR",
              help="Build COMPONENT from a local folder instead of its git pin; recorded by content digest. Repeatable.")
@json_option
def build(arch_spec, stack_name, stack_file, dry_run, max_jobs, base_image, source_opts, as_json) -> None:
    """Build a stack's image for an arch (default stack: verl-vllm).

    With --dry-run, print the build plan: the stages, which of them BuildKit builds in parallel,
    build args, the default tag (stack, ROCm version, arch and a hash of every input, so identical
    inputs give the identical tag) and the labels.
    """
    stack = stacks.load(stack_name, stack_file)
    targets = archs.parse_targets(arch_spec)
    jobs = _max_jobs(max_jobs)
    sources = parse_source_options(source_opts)
    plan = make_plan(stack, targets, base_image=base_image, sources=sources,
                     max_jobs=DEFAULT_MAX_JOBS if jobs == "auto" else jobs)
    for w in plan.warnings:
        warn(w)
    if not dry_run:
        raise UsageError("building is not available yet in this version; use --dry-run to see the plan")
    doc = plan_document(plan)
    if jobs == "auto":
        doc["build_args"]["MAX_JOBS"] = "auto (sized from the builder when the build starts)"
    if as_json:
        echo_json(document("plan", doc))
        return
    _print_plan(plan, doc)


def _print_plan(plan, doc) -> None:
    s = plan.stack
    click.echo(f"stack     {s.name} for {';'.join(plan.targets)} (ROCm {s.rocm}, Python {s.python})")
    click.echo(f"base      {plan.base_image}{' (overridden)' if plan.base_image_overridden else ''}")
    click.echo(f"tag       {plan.tag}")
    click.echo("build args " + " ".join(f"{k}={v}" for k, v in doc["build_args"].items()))
    click.echo("stages    (each level builds in parallel; a level waits for the stages it needs)")
    by_name = {st.name: st for st in plan.stages}
    for i, level in enumerate(plan.levels(), 1):
        parts = []
        for name in level:
            st = by_name[name]
            src = f"local {st.local.path}" if st.local else (st.component.ref[:12] + (" MUTABLE" if st.component.mutable else ""))
            needs = f", needs {', '.join(st.component.needs)}" if st.component.needs else ""
            parts.append(f"{name} ({src}{needs})")
        click.echo(f"  {i}. " + "; ".join(parts))
    pip = doc["final"]["pip"]
    click.echo(f"  final: installs {len(plan.stages)} wheel(s)" + (f" and {', '.join(pip)}" if pip else ""))
    click.echo("runtime env " + " ".join(f"{k}={v}" for k, v in doc["runtime_env"].items()))
    click.echo("labels")
    for k, v in plan.labels.items():
        click.echo(f"  {k}={v}")
