"""`rocmkit diff A B`: what differs between two rocmkit images or manifests."""

from __future__ import annotations

import click

from .common import echo_json, json_option


@click.command()
@click.argument("a", metavar="A")
@click.argument("b", metavar="B")
@json_option
@click.option("--exit-code", "exit_code", is_flag=True,
              help="Exit 1 when A and B differ (as `git diff --exit-code`), 0 when identical.")
@click.option("--docker", "docker_cli", default=None, metavar="PATH",
              help="The docker client that runs the package listing (default: $ROCMKIT_DOCKER, else the first on PATH).")
def diff(a, b, as_json, exit_code, docker_cli) -> None:
    """Compare B against A: two rocmkit images, two manifest files, or one of each.

    A path to a file is a manifest (the /opt/rocmkit/manifest.json of an image, or `rocmkit build --json`'s
    "manifest"); anything else is an image in the Docker engine, from which the manifest, the image's ENV and
    the installed Python packages (listed by the image's own Python, in a container with no network and no
    GPU) are read. Reported as changed (~), added (+) and removed (-): pins (components, base pip pins),
    Python packages (images only), environment (the image ENV when both are images, else the manifests'
    runtime environment), arch targets, base image and digest, and any other manifest field.

    Exit 0 when the comparison ran, different or not (as `git diff`: a difference is the answer, not a
    failure); with --exit-code, 1 when they differ. 2 on bad input (no such image, an image without a
    rocmkit manifest, a file that is not one), 3 without a Docker engine.
    """
    from ..image.imagediff import compare, load, text
    from ..output import document

    doc = document("diff", compare(load(a, docker_cli), load(b, docker_cli)))
    if as_json:
        echo_json(doc)
    else:
        click.echo(text(doc), nl=False)
    if exit_code and not doc["identical"]:
        click.get_current_context().exit(1)
