"""`rocmkit build`: plan a stack × arch and build it through the Docker engine with BuildKit."""

from __future__ import annotations

from pathlib import Path

import click

from .. import stacks
from ..runtime.docker_engine import check_ref
from ..errors import UsageError
from ..image.build import DEFAULT_TIMEOUT_S
from ..image.plan import DEFAULT_MAX_JOBS, MANIFEST_PATH
from ..image.request import AUTO, BuildRequest, Reporter, targets_for
from ..image.sources import parse_source_options
from ..image.wheelhouse import check_dir
from ..output import document
from .common import ARCH_HELP, echo_json, json_option, stack_options, warn


def _max_jobs(value: str) -> int | str:
    if value == AUTO:
        return AUTO
    try:
        n = int(value)
    except ValueError:
        raise UsageError(f"--max-jobs {value!r}: expected a number or 'auto'") from None
    if n < 1:
        raise UsageError(f"--max-jobs {value!r}: must be at least 1")
    return n


@click.command()
@click.option("--arch", "arch_spec", default=None, metavar="ARCH", help=ARCH_HELP)
@stack_options
@click.option("--dry-run", is_flag=True, help="Print the plan (stages, what builds in parallel, build args, tag, labels); build nothing.")
@click.option("--tag", "-t", "tag_opts", multiple=True, metavar="REF",
              help="Tag the image REF ([registry/]repo[:tag]); repeatable. Default: the plan's tag, "
                   "rocmkit/<stack>:[rocm<ver>-]<arch>-<inputs hash>, identical for identical inputs. "
                   "Tags are set only after the build succeeded.")
@click.option("--push", is_flag=True, help="After a successful build, push every --tag (needs --tag; log in with `docker login` first).")
@click.option("--max-jobs", default=str(DEFAULT_MAX_JOBS), show_default=True, metavar="N|auto",
              help="Parallel compile jobs in every build stage (build arg MAX_JOBS). 'auto' sizes it from the "
                   "engine's memory and cores, allowing for the stages that compile at the same time.")
@click.option("--base-image", default=None, metavar="IMAGE", help="Replace the stack's base image (e.g. a mirror); recorded in the manifest and labels.")
@click.option("--source", "source_opts", multiple=True, metavar="COMPONENT=DIR",
              help="Build COMPONENT from a local folder instead of its git pin; recorded by content digest. Repeatable.")
@click.option("--cache-from", "cache_from", multiple=True, metavar="REF",
              help="Import build cache: an image reference (or type=registry,ref=REF); with a buildx plugin any "
                   "--cache-from value buildx takes (type=gha, type=local,src=DIR, ...). Repeatable.")
@click.option("--cache-to", "cache_to", multiple=True, metavar="SPEC",
              help="Export build cache. type=inline embeds it in the image (any client); registry, gha and local "
                   "caches need a buildx plugin with a docker-container builder. Repeatable.")
@click.option("--wheelhouse", "wheelhouse_dir", type=click.Path(file_okay=False), default=None, metavar="DIR",
              help="pip installs only from DIR (made by `rocmkit wheelhouse`); with --network none the build "
                   "needs no network at all.")
@click.option("--network", default=None, metavar="MODE",
              help="Network for RUN steps, passed to docker build: e.g. none for an offline build (everything "
                   "must be in the base image and the --source folders), host, default.")
@click.option("--progress", type=click.Choice(["auto", "tty", "plain"]), default="auto", show_default=True,
              help="tty: one live row per stage (its state, step and time); plain: every BuildKit line; auto: tty on "
                   "a terminal outside CI, plain otherwise. The full log always goes to --log-file.")
@click.option("--log-file", type=click.Path(dir_okay=False), default=None,
              help="Write the full build log here. Default: $ROCMKIT_LOG_DIR, else "
                   "$XDG_STATE_HOME/rocmkit/logs (~/.local/state/rocmkit/logs), one file per build.")
@click.option("--docker", "docker_cli", default=None, metavar="PATH", envvar="ROCMKIT_DOCKER", show_envvar=True,
              help="The docker client to build with. Default: the first docker on PATH (then /usr/bin/docker, "
                   "/usr/local/bin/docker) that has a buildx plugin or a built-in BuildKit that works.")
@click.option("--timeout", "timeout_s", type=click.IntRange(min=1), default=DEFAULT_TIMEOUT_S, show_default=True,
              metavar="SECONDS", help="Stop the build after this long.")
@click.option("--sbom-out", type=click.Path(dir_okay=False), default=None, metavar="FILE",
              help="Write the host copy of the image's CycloneDX SBOM (/opt/rocmkit/sbom.cdx.json) here. "
                   "Default: beside the build log, <log name>.cdx.json.")
@click.option("--no-resolve", is_flag=True,
              help="Skip the resolve that runs first (`rocmkit stacks --resolve`: pip's resolver over the stack's pins, "
                   "seconds, before any build). It is skipped by itself for an offline build (--network none, "
                   "--wheelhouse) or when the index is unreachable. The base image is looked up before it either "
                   "way: an unreachable one fails in seconds.")
@json_option
def build(arch_spec, stack_name, stack_file, dry_run, tag_opts, push, max_jobs, base_image, source_opts,
          cache_from, cache_to, wheelhouse_dir, network, progress, log_file, docker_cli, timeout_s, sbom_out, no_resolve,
          as_json) -> None:
    """Build a stack's image for an arch with BuildKit (default stack: verl-vllm).

    The Docker engine is reached through the docker SDK (DOCKER_HOST is honoured); the build runs
    through a docker client that can do BuildKit. Each compiled component builds in its own stage,
    independent ones at the same time, each cached on its own. On failure the failing stage and
    component are named, the tail of its output is printed, the exit code is 1 and nothing is tagged.
    After success the image is tagged (and pushed with --push), inspected, and its tag, id, size and
    manifest summary are printed (--json: a rocmkit.build/v1 document). Every image carries a CycloneDX
    SBOM (/opt/rocmkit/sbom.cdx.json: Python distributions, dpkg packages, git commits, base image),
    written with the host's CycloneDX library (a dependency of rocmkit) mounted for that step only; its
    host copy goes to --sbom-out.

    With --dry-run, print the build plan instead: the stages, which of them BuildKit builds in parallel,
    build args, the default tag (stack, ROCm version, arch and a hash of every input, so identical
    inputs give the identical tag) and the labels.

    Exit codes: 0 built, 1 the build failed, 2 bad usage or input, 3 no Docker engine or no docker
    client that can do BuildKit.
    """
    from ..image import orchestrate

    stack = stacks.load(stack_name, stack_file)
    request = BuildRequest(
        stack=stack, targets=tuple(targets_for(stack, arch_spec)), base_image=base_image, max_jobs=_max_jobs(max_jobs),
        sources=parse_source_options(source_opts, [c.name for c in stack.git_components]), tags=tuple(check_ref(t) for t in tag_opts), push=push,
        cache_from=tuple(cache_from), cache_to=tuple(cache_to),
        wheelhouse=check_dir(Path(wheelhouse_dir)) if wheelhouse_dir else None, network=network, progress=progress,
        log_file=Path(log_file) if log_file else None, docker_cli=docker_cli, timeout_s=timeout_s,
        sbom_out=Path(sbom_out) if sbom_out else None, resolve_first=not no_resolve)
    report = Reporter(say=lambda line: click.echo(line, err=True), warn=warn)
    if dry_run:
        plan, doc = orchestrate.dry_run(request, report)
        if as_json:
            echo_json(document("plan", doc))
        else:
            _print_plan(plan, doc)
        return
    doc = orchestrate.build(request, report)
    if as_json:
        echo_json(document("build", doc))
    else:
        _print_result(doc)


def _human_size(n: int) -> str:
    size = float(n)
    for unit in ("B", "kB", "MB", "GB"):
        if size < 1000 or unit == "GB":
            return f"{n} B" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1000
    return f"{n} B"


def _print_result(doc: dict) -> None:
    b, m = doc["build"], doc["manifest"]
    click.echo(f"built     {doc['image']['tags'][0]}")
    for extra in doc["image"]["tags"][1:]:
        click.echo(f"          {extra}")
    click.echo(f"id        {doc['image']['id']}")
    click.echo(f"size      {_human_size(doc['image']['size_bytes'])}")
    click.echo(f"stack     {doc['stack']} for {';'.join(doc['targets'])} (ROCm {m['rocm']}, Python {m['python']}), "
               f"base {m['base_image']}")
    click.echo(f"inputs    sha256:{doc['inputs_hash']}")
    rebuilt = ", ".join(b["rebuilt_stages"]) or "nothing (fully cached)"
    click.echo(f"steps     {b['steps']} ({b['steps_cached']} cached) in {b['seconds']:.1f}s; rebuilt: {rebuilt}")
    click.echo("manifest  " + MANIFEST_PATH)
    width = max((len(c["name"]) for c in m["components"]), default=0)
    for c in m["components"]:
        if c["kind"] == "pip":
            pin = " ".join(c["requirements"])
        elif c["kind"] == "wheel":
            pin = c["requirement"] + (f" (wheel sha256:{c['sha256'][:12]})" if c.get("sha256") else " (wheel)")
        elif c.get("local_source"):
            pin = f"local sha256:{c['local_source']['digest'][:12]} ({doc['local_sources'][c['name']]})"
        else:
            pin = (c["commit"] or f"{c['mutable_ref']} (MUTABLE)") + (f" ({c['tag']})" if c.get("tag") else "")
        click.echo(f"  {c['name']:<{width}}  {pin}")
    for p in doc["pushed"]:
        click.echo(f"pushed    {p['tag']} {p['digest'] or ''}".rstrip())
    click.echo(f"sbom      {doc['sbom']['image_path']}; host copy {doc['sbom']['host_path']}")
    click.echo(f"log       {b['log']}")


def _print_plan(plan, doc) -> None:
    s = plan.stack
    click.echo(f"stack     {s.name} for {';'.join(plan.targets)} (ROCm {s.rocm}, Python {s.python})")
    click.echo(f"base      {plan.base_ref}{' (overridden)' if plan.base_image_overridden else ''}")
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
