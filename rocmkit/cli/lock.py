"""`rocmkit lock`: pin every stack's base images by digest and check its git pins upstream."""

from __future__ import annotations

import click

from .. import stacks
from ..output import document
from ..refs.lockrun import lock_stack, outcome
from .common import InputFile, echo_json, json_option


@click.command()
@click.argument("stack_names", nargs=-1, metavar="[STACK]...")
@click.option("--stack-file", "stack_files", multiple=True, type=InputFile(dir_okay=False),
              help="A stack file of your own (repeatable); its lock is written beside it as <name>.lock.json.")
@click.option("--check", is_flag=True,
              help="Write nothing: exit 1 when a tag moved, a commit or tag is gone, or a lock is stale or missing "
                   "(the hint says which, and how to fix it); exit 3 when the only problem is a registry or remote "
                   "that could not be reached.")
@json_option
def lock(stack_names, stack_files, check, as_json) -> None:
    """Lock stacks: resolve each base image (base.image and image_per_arch) to the digest its tag names now,
    and check each git component upstream (a declared tag still points to its commit; a commit without a
    tag exists on the remote). The lock of a stack file is written beside it (<name>.lock.json); the lock of
    a built-in stack is written to the current folder (NAME.lock.json), never into rocmkit's installed
    package. Every command that reads a lock looks in the same place (a built-in stack's: the current folder,
    then a lock shipped with rocmkit), so render, build and bake run from the same folder then use FROM
    image:tag@sha256:....

    Registry logins are the ones `docker login` stored ($DOCKER_CONFIG/config.json: credHelpers, credsStore
    or auths, looked up as Docker does; helpers run as docker-credential-NAME get).

    Without STACK or --stack-file: every built-in stack. A stack whose refs cannot all be reached keeps
    its old lock (nothing is rewritten) and the unreachable refs are named (exit 3); a stack pin that no
    longer holds upstream (moved tag, missing commit) is not locked (exit 1). rocmkit ships no lock for its
    built-in stacks: `--check` says so and how to make one. A lock that cannot be written there (a read-only
    folder) is exit 2 before any registry is asked.
    """
    from ..fileio import check_writable

    names = stack_names or ([] if stack_files else stacks.builtin_names())
    chosen = [(stacks.load_builtin(n), stacks.lock_place(name=n), f"rocmkit lock {n}", True) for n in names]
    chosen += [(stacks.load_file(f), stacks.lock_place(path=f), f"rocmkit lock --stack-file {f}", False)
               for f in stack_files]
    if not check:  # minutes of registry and git lookups are not spent on a lock that could not be saved
        for _, place, make, builtin in chosen:
            check_writable(place.path, hint=("a built-in stack's lock is written to the current folder: run "
                                             f"`{make}` in a folder you can write to" if builtin else
                                             "a stack file's lock is written beside it: copy the stack file "
                                             "to a folder you can write to"))
    reports = [lock_stack(stack, place.path, check, make=make, builtin=builtin)
               for stack, place, make, builtin in chosen]
    if as_json:
        echo_json(document("lock", {"check": check, "stacks": reports}))
    else:
        for r in reports:
            read = r["lock_read"]
            other = f"; compared with {read}, shipped with rocmkit" if read and read != r["lock_file"] else ""
            click.echo(f"{r['stack']} ({r['lock_file']}{other}): {r['result']}")
            for f in r["findings"]:
                click.echo(f"  {f['line']}")
    error = outcome(reports, check)
    if error:
        raise error
