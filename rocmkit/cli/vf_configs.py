"""`rocmkit vf-configs`: VF-named copies of tuned configs for SR-IOV virtual-function hosts."""

from __future__ import annotations

import click

from ..errors import Failed
from ..host import vfconfigs
from ..output import document
from .common import echo_json, json_option, warn


@click.command("vf-configs")
@click.argument("dirs", nargs=-1, type=click.Path(file_okay=False))
@click.option("--product", default=None, metavar="NAME",
              help="Only this product's VF (base or VF name, e.g. MI300X or 'MI300X VF'). Default: every "
                   "product with a VF in the arch table (MI300X, MI325X, MI350X, MI355X).")
@click.option("--dry-run", is_flag=True, help="Report what would be created; write nothing.")
@click.option("--force", is_flag=True, help="Overwrite VF files whose content differs from the base product's.")
@click.option("--strict", is_flag=True,
              help="Fail (exit 1) when no supported framework is installed, its expected config folders are "
                   "missing, or none of its config files names a base product. Image builds run "
                   "`rocmkit vf-configs --strict`.")
@json_option
def vf_configs(dirs, product, dry_run, force, strict, as_json) -> None:
    """Create VF-named copies of tuned kernel configs (MI300X -> MI300X VF, ...).

    On SR-IOV virtual functions torch reports e.g. "AMD Instinct MI300X VF", and SGLang looks its tuned
    Triton/quantization configs up by that name, finds none, and runs untuned kernels (slow, or a
    Triton shared-memory crash: sgl-project/sglang#3219). For every config file whose device_name token
    is exactly a base product's (not _HF, not already _VF), this creates the VF-named copy beside it.
    Only the file name's device_name token changes; re-running changes nothing; a VF file with different
    content is reported and left alone unless --force (exit 1 while conflicts remain). Copies keep the
    original's permissions.

    Without DIRS, the installed SGLang is found (without importing it) and every config folder in its
    package is covered. With DIRS, those folders are searched instead.
    """
    result = vfconfigs.run(list(dirs), product, dry_run=dry_run, force=force, strict=strict)
    if as_json:
        echo_json(document("vf-configs", result.to_json()))
    else:
        if not result.roots:
            warn("no installed framework needs VF configs (looked for SGLang); nothing to do")
        for root in result.roots:
            label = root["framework"] or "folder"
            click.echo(f"{label} {root['path']}: {len(root['config_dirs'])} config folder(s)")
        verb = "would create" if dry_run else "created"
        click.echo(f"{verb} {len(result.created)}, already present {len(result.present)}, "
                   f"conflicting {len(result.conflicts)}" + (f", overwritten {len(result.overwritten)}" if force else ""))
        for p in result.created:
            click.echo(f"  {verb}: {p}")
        for p in result.conflicts:
            click.echo(f"  conflict (left alone, --force overwrites): {p}")
        for p in result.stray:
            warn(f"suspicious name (an upstream one-liner run twice?): {p}")
    if result.conflicts:
        raise Failed(f"{len(result.conflicts)} VF config file(s) differ from their base product's",
                     hint="inspect them; --force overwrites them with the base product's configs")
