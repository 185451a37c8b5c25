"""`rocmkit stacks`: the declared stacks and their pins."""

from __future__ import annotations

import click

from .. import stacks as stacks_mod
from ..errors import EnvironmentMissing, Failed, NotAllRead, UsageError
from ..output import document
from .common import InputFile, echo_json, json_option


def _stack_json(s: stacks_mod.Stack) -> dict:
    return {
        "name": s.name, "description": s.description, "targets": list(s.targets), "rocm": s.rocm,
        "python": s.python, "base_image": s.base.image, "base_image_per_arch": dict(s.base.image_per_arch),
        "base_pip": list(s.base.pip),
        "components": [
            {"name": c.name, "kind": c.kind, "git": c.git, "commit": c.commit, "tag": c.tag,
             "mutable_ref": c.mutable_ref, "mutable_reason": c.mutable_reason, "pip": list(c.pip),
             "needs": list(c.needs), "single_arch": c.single_arch, "source_note": c.source_note,
             "branch": c.branch, "patches": [{"file": p.file, "sha256": p.sha256} for p in c.patches],
             "wheel_url": c.wheel_url, "wheel_sha256": c.wheel_sha256, "constrain": c.constrain}
            for c in s.components
        ],
        "assets": [{"name": a.name, "url": a.url, "sha256": a.sha256, "mutable_reason": a.mutable_reason, "why": a.why}
                   for a in s.assets],
        "ray_version": s.pinned_version("ray"),
        "rocm_wheels": ({"requirements": list(s.base.rocm_wheels.requirements(s.targets)),
                         "find_links": s.base.rocm_wheels.find_links, "index_url": s.base.rocm_wheels.index_url}
                        if s.base.rocm_wheels else None),
        "constraints": list(s.constraints),
        "base_provides": [{"name": p.name, "distribution": p.distribution, "version": p.version,
                           "release": p.release, "mutable_reason": p.mutable_reason, "source_note": p.source_note}
                          for p in s.base.provides],
    }


# What [MUTABLE] means, said under the tables that show it (docs/stacks.md#mutable-components says more).
MUTABLE_NOTE = ("the upstream can change what a build gets: render and build warn about each, the image records the "
                "commit it was built from in /opt/rocmkit/sources.txt, `rocmkit lock` does not lock them, and "
                "`rocmkit build --source NAME=DIR` builds one from a checkout you trust")


@click.command()
@click.argument("name", required=False)
@click.option("--resolve", "do_resolve", is_flag=True,
              help="Run pip's resolver (a dry run for the stack's Python and Linux x86_64) over the stack's pins and "
                   "the requirements of its git components; report conflicts naming both sides and the stack line. "
                   "Exit 0 when everything was read and resolves, 1 on a conflict, 3 when some pins could not be "
                   "checked from here (their index unreachable), 4 when what was read resolves but the requirements "
                   "of git components were not read (no --source for them; the output says how).")
@click.option("--stack-file", type=InputFile(dir_okay=False), default=None,
              help="With --resolve: a stack file of your own instead of a built-in stack.")
@click.option("--source", "source_opts", multiple=True, metavar="COMPONENT=DIR",
              help="With --resolve: a git component's local source, whose requirement files and pyproject "
                   "dependencies are resolved too (repeatable). Without it they are not read.")
@click.option("--find-links", "find_links", multiple=True, metavar="DIR|URL",
              help="With --resolve: also look for wheels here (a local wheelhouse or mirror; repeatable).")
@click.option("--index-url", default=None, metavar="URL",
              help="With --resolve: the package index in place of PyPI (a mirror), as pip's --index-url.")
@json_option
def stacks(name: str | None, do_resolve: bool, stack_file: str | None, source_opts: tuple[str, ...],
           find_links: tuple[str, ...], index_url: str | None, as_json: bool) -> None:
    """List the built-in stacks, or show one stack's components and pins; with --resolve, check that pip can
    install them together before any build.

    A stack declares a base image (ROCm from it, or from pip wheels), ROCm and Python versions, the targets it
    supports (GPU archs, or cpu) and its components, each pinned by a full git commit, an exact pip version or
    a prebuilt wheel (a URL with its sha256, or an index pin); a MUTABLE one by a branch, tag or short hash
    (the footer says what that means). Built-in stacks live in rocmkit/resources/stacks/*.toml; `--stack-file`
    on other commands takes your own, or a copy of a built-in one with the patches/ and files/ it names.
    """
    if do_resolve:
        _resolve(name, stack_file, source_opts, list(find_links), index_url, as_json)
        return
    if stack_file or source_opts or find_links or index_url:
        raise UsageError("--stack-file, --source, --find-links and --index-url go with --resolve")
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
        if any(s.mutable_components for s in selected):
            click.echo(f"\n[N MUTABLE]: N components pinned by a branch, a tag or a short commit hash, not a full "
                       f"commit; {MUTABLE_NOTE}. `rocmkit stacks NAME` names them.")
        return
    s = selected[0]
    click.echo(f"{s.name}: {s.description}")
    click.echo(f"  targets {', '.join(s.targets)}; ROCm {s.rocm}; Python {s.python}")
    per_arch = "".join(f"; {a}: {img}" for a, img in s.base.image_per_arch.items())
    click.echo(f"  base image {s.base.image}{per_arch}")
    if s.base.rocm_wheels:
        for r in s.base.rocm_wheels.requirements(s.targets):
            click.echo(f"  base rocm  {r} (ROCm from wheels)")
    for r in s.base.pip:
        click.echo(f"  base pip   {r}")
    for p in s.base.provides:  # what the build's first step checks the base for (or records, MUTABLE)
        click.echo(f"  from base  {p.name:<20} {p.pin():<40} {'recorded' if p.mutable else 'checked'} by the build")
    for c in s.components:
        flags = (" [single-arch]" if c.single_arch else "") + (" [MUTABLE]" if c.mutable else "")
        flags += f" [branch {c.branch}]" if c.branch else ""
        flags += "".join(f" [patch {p.file}]" for p in c.patches)
        source = c.git if c.kind == "git" else (c.wheel_url or "index wheel") if c.kind == "wheel" else "PyPI"
        flags += " [constrained]" if c.constrain else ""
        click.echo(f"  {c.name:<20} {c.pin():<40} {source}{flags}")
    for a in s.assets:
        click.echo(f"  asset {a.name:<14} {(a.sha256 or 'MUTABLE')[:12]:<40} {a.url}")
    for r in s.constraints:
        click.echo(f"  constraint {r}")
    if s.mutable_components or any(not a.sha256 for a in s.assets):
        click.echo(f"\n[MUTABLE]: a component pinned by a branch, a tag or a short commit hash, not a full commit "
                   f"(an asset: by no sha256); {MUTABLE_NOTE}.")


def _resolve(name: str | None, stack_file: str | None, source_opts: tuple[str, ...], find_links: list[str],
             index_url: str | None, as_json: bool) -> None:
    from ..image.sources import parse_source_options
    from ..stacks.resolve import PYPI, resolve

    if name and stack_file:
        raise UsageError("give a stack NAME or --stack-file, not both")
    selected = ([stacks_mod.load_file(stack_file)] if stack_file else
                [stacks_mod.load_builtin(name)] if name else stacks_mod.all_builtin())
    if source_opts and len(selected) != 1:
        raise UsageError("--source needs one stack: give NAME or --stack-file")
    results = []
    for s in selected:
        sources = parse_source_options(source_opts, [c.name for c in s.git_components]) if source_opts else {}
        r = resolve(s, {k: v.path for k, v in sources.items()}, find_links, index_url or PYPI)
        results.append(r)
        if not as_json:
            for line in r.lines():
                click.echo(line)
    if as_json:
        echo_json(document("stacks-resolve", {"results": [r.as_json() for r in results]}))
    statuses = {r.status for r in results}
    if "conflict" in statuses:
        raise Failed("pip cannot install " + ", ".join(r.stack for r in results if r.status == "conflict")
                     + " as declared", hint="see each conflict above: both sides and the stack line")
    if "offline" in statuses:
        raise EnvironmentMissing("the package index is not reachable from here; nothing was resolved")
    unread = [f"{r.stack}: {', '.join(r.unread())}" for r in results if r.unread()]
    if "partial" in statuses:
        raise EnvironmentMissing("some pins could not be checked from here (listed above as NOT CHECKED)"
                                 + (f"; git requirements not read ({'; '.join(unread)})" if unread else ""),
                                 hint="give their wheels with --find-links DIR to check them too"
                                      + ("; each unread git component says how to read it" if unread else ""))
    if unread:
        raise NotAllRead(f"what was read resolves, but not the requirements of git components ({'; '.join(unread)})",
                         hint="give each a checkout with --source NAME=DIR, as the lines above say, to resolve the "
                              "whole stack")
