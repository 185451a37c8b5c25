"""`rocmkit bake`: a docker buildx bake file for every stack × arch, and the context it builds from."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from ..errors import UsageError
from ..fileio import write_atomic
from ..image.plan import DEFAULT_MAX_JOBS
from .common import InputFile, warn


@click.command()
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Write the bake file here. Default: stdout, or DIR/docker-bake.hcl (.json) with --context-dir.")
@click.option("--format", "fmt", type=click.Choice(["hcl", "json"]), default="hcl", show_default=True,
              help="HCL (docker-bake.hcl) or JSON (docker-bake.json); buildx reads both.")
@click.option("--stack", "stack_names", multiple=True, metavar="NAME",
              help="Only this built-in stack (repeatable). Default: every built-in stack.")
@click.option("--stack-file", "stack_files", multiple=True, type=InputFile(dir_okay=False),
              help="A stack file of your own, instead of or besides built-in stacks (repeatable).")
@click.option("--context-dir", type=click.Path(file_okay=False), default=None, metavar="DIR",
              help="Prepare DIR as the build context: rocmkit-dist/ (rocmkit's own wheel, installed by every "
                   "image's final stage) and dockerfiles/ (the rendered Dockerfiles); the bake file goes there too.")
@click.option("--registry", default="rocmkit", show_default=True, metavar="PREFIX",
              help="Default of the REGISTRY variable: tags are REGISTRY/<stack>:<version> (override at bake time "
                   "with REGISTRY=... docker buildx bake).")
@click.option("--max-jobs", type=click.IntRange(min=1), default=DEFAULT_MAX_JOBS, show_default=True, metavar="N",
              help="Default of the MAX_JOBS variable, passed to every compile step.")
@click.option("--force", is_flag=True, help="Overwrite an existing -o file, or a bake file in --context-dir that "
              "rocmkit bake did not write (its own is regenerated).")
def bake(output, fmt, stack_names, stack_files, context_dir, registry, max_jobs, force) -> None:
    """Write a docker buildx bake file: one target per stack × arch (<stack>-<arch>), one group per
    stack, group "default" with every stack; each target has its Dockerfile, MAX_JOBS, the tag
    `rocmkit build` would give (stack, ROCm, arch and inputs hash; registry part from the REGISTRY
    variable) and the OCI and io.rocmkit labels.

    For CI: `rocmkit bake --context-dir ctx`, then `cd ctx && docker buildx bake --push verl-vllm`
    (with REGISTRY=ghcr.io/ORG). Without --context-dir the file expects to be run from a folder
    holding rocmkit-dist/ and dockerfiles/.
    """
    from ..image.bake import check_registry, definition, header, plans_for, prepare_context, select, to_hcl, to_json

    check_registry(registry)
    loaded = select(stack_names, stack_files)
    plans = plans_for(loaded, max_jobs)
    for plan in plans:
        for w in plan.warnings:
            warn(w)
    defn = definition(plans, max_jobs=max_jobs, registry=registry)
    text = to_hcl(defn, header(context_dir)) if fmt == "hcl" else to_json(defn)
    if output and not force and Path(output).exists():
        raise UsageError(f"{output} already exists", hint="pass --force to overwrite it, or choose another path")
    if context_dir and not output:
        # Part of the prepared folder, like its dockerfiles/: the file an earlier `rocmkit bake` wrote there is
        # regenerated; a bake file of the user's own is kept unless --force (checked before the folder is touched).
        output = str(Path(context_dir) / f"docker-bake.{fmt}")
        if not force and Path(output).exists() and not _rocmkit_wrote(Path(output)):
            raise UsageError(f"--context-dir {context_dir}: {output} already exists and rocmkit bake did not write it",
                             hint="pass --force to overwrite it, -o to write the bake file elsewhere, or choose "
                                  "another folder")
        force = True
    if context_dir:
        prepare_context(plans, Path(context_dir))
    if output:
        write_atomic(output, text, force=force, what="--output")
        click.echo(f"wrote {output} ({len(plans)} targets in {len(loaded)} groups)", err=True)
    else:
        sys.stdout.write(text)


def _rocmkit_wrote(path: Path) -> bool:
    """An earlier `rocmkit bake`'s file: HCL with rocmkit's header, or JSON whose targets carry rocmkit's labels."""
    import json

    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False
    if text.startswith("# Rendered by rocmkit bake."):
        return True
    try:
        targets = json.loads(text).get("target") or {}
        return bool(targets) and all(any(k.startswith("io.rocmkit.") for k in (t.get("labels") or {}))
                                     for t in targets.values())
    except (ValueError, AttributeError, TypeError):
        return False

