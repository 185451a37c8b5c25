"""`rocmkit outdated`: the newer releases upstream of a stack's pins, and a proposed stack file."""

from __future__ import annotations

from pathlib import Path

import click

from ..errors import EnvironmentMissing, UsageError
from .common import InputFile, echo_json, json_option


def _remotes(values: tuple[str, ...]) -> dict[str, str]:
    out = {}
    for v in values:
        name, sep, url = v.partition("=")
        if not sep or not name or not url or url.startswith("-"):
            raise UsageError(f"--git-remote {v!r}: expected NAME=URL", hint="e.g. --git-remote vllm=file:///mirrors/vllm.git")
        out[name] = url
    return out


@click.command()
@click.argument("stack_name", required=False, metavar="[STACK]")
@click.option("--stack-file", type=InputFile(dir_okay=False), default=None,
              help="A stack file of your own instead of a built-in stack.")
@click.option("--index-url", default="https://pypi.org/simple/", show_default=True, metavar="URL",
              help="The package index asked for PyPI pins (a PEP 691/503 simple index; a plain directory served "
                   "over HTTP works). The stack's own extra index and find-links page are asked too.")
@click.option("--git-remote", "git_remotes", multiple=True, metavar="NAME=URL",
              help="Read component NAME's tags from URL (a mirror, a file:// or local copy) instead of its git "
                   "URL; the proposed stack keeps the stack's own URL. Repeatable.")
@click.option("--write", "write_file", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Write a proposed stack file with every newer pin replaced in place (comments kept), after "
                   "checking it parses and renders. FILE may be the stack file itself (said so); any other "
                   "existing file needs --force; never a file in rocmkit's installation (a built-in stack's own).")
@click.option("--force", is_flag=True, help="With --write: overwrite an existing FILE.")
@json_option
def outdated(stack_name, stack_file, index_url, git_remotes, write_file, force, as_json) -> None:
    """List the newer releases upstream of each pin of STACK (default verl-vllm).

    Git components: the tags of their repository (`git ls-remote --tags`), ordered as versions, newest
    release with its commit; for a newer one, the lines of its own requirement files (pyproject.toml,
    requirements*.txt, and those the stack names) at that tag that bind torch, ROCm, Ray and
    transformers, each checked against the stack's pins. PyPI pins: the index's simple API. The base
    image: the registry's tags of the same form (7.0.2-complete → 7.1.0-complete); the stack's rocm and torch
    pins are left for you to update.

    A commit that no release tag names is ordered by its history (a commits-only fetch): inside the newest
    release's history it is newer; otherwise, like a MUTABLE branch, it is reported (unordered) and not written. A pin whose upstream did not answer is listed as unreachable, one
    whose upstream answered that it has no such repository or image as missing, each with a hint. Exit 0 when
    the check ran, 3 when no upstream answered at all (nothing was checked), 2 on bad usage.
    """
    from ..fileio import write_atomic
    from ..output import document
    from ..image import outdated as od
    from ..stacks import source

    if stack_name and stack_file:
        raise UsageError("STACK and --stack-file are alternatives; give one")
    src = source(stack_name, stack_file)
    stack = src.parse()
    if write_file:
        _refuse_installation(Path(write_file), stack.name)
    remotes = _remotes(git_remotes)
    unknown = sorted(set(remotes) - {c.name for c in stack.git_components})
    if unknown:
        raise UsageError(f"--git-remote {unknown[0]}=...: {stack.name} has no git component {unknown[0]!r}",
                         hint=f"git components: {', '.join(c.name for c in stack.git_components) or '(none)'}")
    findings = od.check(stack, index_url=index_url, git_remotes=remotes)
    written = None
    if write_file:
        written = _write(write_file, src, findings, force, write_atomic, od)
    if as_json:
        echo_json(document("outdated", {"stack": stack.name, "source": src.origin, "index_url": index_url,
                                        "findings": [f.to_json() for f in findings], "written": written}))
    else:
        _print(findings)
    if od.nothing_answered(findings):
        raise EnvironmentMissing(f"no upstream of {stack.name} answered: no pin was checked",
                                 hint="\n      ".join(od.hints(findings)))
    for hint in ([] if as_json else od.hints(findings)):
        click.echo(f"hint: {hint}", err=True)


def _refuse_installation(target: Path, name: str) -> None:
    """--write never goes into rocmkit's installed package: a built-in stack file there (or a new one) would change
    rocmkit for everyone who shares the installation, until a pip upgrade silently puts it back."""
    from ..stacks import builtin_folder

    folder = Path(str(builtin_folder())).resolve()
    if target.resolve().parent == folder:
        raise UsageError(f"--write {target}: that is inside rocmkit's installation ({folder}), where the built-in "
                         "stacks live", hint=f"write the proposal to a file of your own (--write {name}.toml) and "
                                             f"use it with --stack-file {name}.toml")


def _write(write_file, src, findings, force, write_atomic, od) -> str | None:
    target = Path(write_file)
    if not od.edits(findings):
        unchecked = sum(f.status in (od.UNREACHABLE, od.MISSING) for f in findings)
        click.echo(f"nothing newer to write{f' among the pins checked ({unchecked} were not)' if unchecked else ''}: "
                   f"{target} not written", err=True)
        return None
    new, _ = od.proposed_text(src, findings)
    same = src.path is not None and target.exists() and target.resolve() == src.path.resolve()
    write_atomic(target, new, force=force or same, what="--write")
    click.echo(f"{'replaced the source stack file' if same else 'wrote the proposed stack'} {target}; check it with "
               f"`rocmkit render --stack-file {target} --arch ...`", err=True)
    return str(target)


def _print(findings) -> None:
    rows = [("COMPONENT", "KIND", "CURRENT", "LATEST", "STATUS")]
    for f in findings:
        rows.append((f.component, f.kind, f.current if f.kind in ("git", "base-image") else f.pin,
                     (f.latest or "-") + (f" ({f.latest_commit[:12]})" if f.latest_commit else ""), f.status))
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for k, r in enumerate(rows):
        click.echo("  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip())
        f = findings[k - 1] if k else None
        if f and f.note:
            click.echo(f"    note: {f.note}")
        for c in (f.constraints if f else []):
            verdict = "" if "satisfied" not in c else (
                f"  [stack pins {c['stack_pins']}: {'ok' if c['satisfied'] else 'CONFLICT'}]")
            click.echo(f"    {c['file']}: {c['line']}{verdict}")
    from ..image.outdated import MISSING, NEWER, UNREACHABLE

    newer = sum(f.status == NEWER for f in findings)
    unreachable = sum(f.status == UNREACHABLE for f in findings)
    missing = sum(f.status == MISSING for f in findings)
    click.echo(f"{newer} newer, {unreachable} could not be checked{f', {missing} missing upstream' if missing else ''}, "
               f"{len(findings)} pins")

