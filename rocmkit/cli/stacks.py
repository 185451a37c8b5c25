"""`rocmkit stacks`: the declared stacks and their pins."""

from __future__ import annotations

import click

from .. import stacks as stacks_mod
from ..output import document
from .common import echo_json, json_option


def _stack_json(s: stacks_mod.Stack) -> dict:
    return {
        "name": s.name, "description": s.description, "targets": list(s.targets), "rocm": s.rocm,
        "python": s.python, "base_image": s.base.image, "base_image_per_arch": dict(s.base.image_per_arch),
        "base_pip": list(s.base.pip),
        "components": [
            {"name": c.name, "kind": c.kind, "git": c.git, "commit": c.commit, "tag": c.tag,
             "mutable_ref": c.mutable_ref, "mutable_reason": c.mutable_reason, "pip": list(c.pip),
             "needs": list(c.needs), "single_arch": c.single_arch, "source_note": c.source_note,
             "branch": c.branch, "patches": [{"file": p.file, "sha256": p.sha256} for p in c.patches]}
            for c in s.components
        ],
        "assets": [{"name": a.name, "url": a.url, "sha256": a.sha256, "mutable_reason": a.mutable_reason, "why": a.why}
                   for a in s.assets],
        "ray_version": s.pinned_version("ray"),
    }


@click.command()
@click.argument("name", required=False)
@json_option
def stacks(name: str | None, as_json: bool) -> None:
    """List the built-in stacks, or show one stack's components and pins.

    A stack declares a base image, ROCm and Python versions, the targets it supports (GPU archs, or cpu) and its
    components, each pinned by a full git commit or an exact pip version. Built-in stacks live in
    rocmkit/resources/stacks/*.toml; `--stack-file` on other commands takes your own.
    """
    selected = [stacks_mod.load_builtin(name)] if name else stacks_mod.all_builtin()
    if as_json:
        echo_json(document("stacks", {"stacks": [_stack_json(s) for s in selected]}))
        return
    if not name:
        width = max((len(s.name) for s in selected), default=5)
        click.echo(f"{'STACK':<{width}}  {'TARGETS':<15}  {'ROCM':<6}  {'PYTHON':<6}  DESCRIPTION")
        for s in selected:
            mutable = f"  [{len(s.mutable_components)} MUTABLE]" if s.mutable_components else ""
            click.echo(f"{s.name:<{width}}  {','.join(s.targets):<15}  {s.rocm:<6}  {s.python:<6}  {s.description}{mutable}")
        return
    s = selected[0]
    click.echo(f"{s.name}: {s.description}")
    click.echo(f"  targets {', '.join(s.targets)}; ROCm {s.rocm}; Python {s.python}")
    per_arch = "".join(f"; {a}: {img}" for a, img in s.base.image_per_arch.items())
    click.echo(f"  base image {s.base.image}{per_arch}")
    for r in s.base.pip:
        click.echo(f"  base pip   {r}")
    for c in s.components:
        flags = (" [single-arch]" if c.single_arch else "") + (" [MUTABLE]" if c.mutable else "")
        flags += f" [branch {c.branch}]" if c.branch else ""
        flags += "".join(f" [patch {p.file}]" for p in c.patches)
        source = c.git if c.kind == "git" else "PyPI"
        click.echo(f"  {c.name:<20} {c.pin():<40} {source}{flags}")
    for a in s.assets:
        click.echo(f"  asset {a.name:<14} {(a.sha256 or 'MUTABLE')[:12]:<40} {a.url}")
