"""`rocmkit run`: a container with exactly the GPU access a ROCm job needs, and no more."""

from __future__ import annotations

import os
import shlex

import click

from ..cluster.container import docker_run_argv
from ..errors import EnvironmentMissing, UsageError


def render_nodes_for(gpus: str, root: str = "/") -> list[str]:
    """GPU indices (as HIP numbers them: one per KFD GPU node, partitions included, in node order) →
    their /dev/dri/renderD<minor> nodes, read from the KFD topology."""
    from ..host.facts import collect

    try:
        wanted = [int(g) for g in gpus.split(",") if g.strip()]
    except ValueError:
        raise UsageError(f"--gpus {gpus!r}: expected indices such as 0,1,2") from None
    if not wanted or any(g < 0 for g in wanted):
        raise UsageError(f"--gpus {gpus!r}: expected indices such as 0,1,2")
    facts = collect(root, process=False)
    minors = [n.props["drm_render_minor"] for n in facts.nodes if n.is_gpu and "drm_render_minor" in n.props]
    if not minors:
        raise EnvironmentMissing("--gpus needs the KFD topology to find each GPU's render node, and there is none",
                                 hint="run on a host with the amdgpu driver loaded, or leave --gpus out")
    missing = [g for g in wanted if g >= len(minors)]
    if missing:
        raise UsageError(f"--gpus {gpus}: this host has GPUs 0-{len(minors) - 1}")
    return [f"/dev/dri/renderD{minors[g]}" for g in wanted]


@click.command(context_settings={"ignore_unknown_options": False})
@click.argument("image")
@click.argument("command", nargs=-1)
@click.option("--gpus", default=None, metavar="LIST",
              help="Only these GPUs (0,1,...): /dev/kfd plus their render nodes. Default: all of /dev/dri.")
@click.option("--privileged", is_flag=True,
              help="Run privileged instead of the least-privilege flags (only if you must).")
@click.option("--seccomp-unconfined", is_flag=True,
              help="Add --security-opt seccomp=unconfined (ROCm docs: for HPC memory mapping; rarely needed).")
@click.option("--shm-size", default=None, metavar="SIZE", help="A private /dev/shm of SIZE instead of --ipc=host.")
@click.option("-v", "--volume", "volumes", multiple=True, metavar="HOST:CONTAINER[:ro]", help="Bind mount. Repeatable.")
@click.option("-e", "--env", "envs", multiple=True, metavar="NAME=VALUE", help="Environment variable. Repeatable.")
@click.option("--name", default=None, help="Container name.")
@click.option("--print", "print_only", is_flag=True, help="Print the equivalent `docker run` line and exit.")
@click.option("--docker", "docker_cli", default=None, envvar="ROCMKIT_DOCKER", help="The docker client to run.")
def run(image, command, gpus, privileged, seccomp_unconfined, shm_size, volumes, envs, name, print_only,
        docker_cli) -> None:
    """Start IMAGE with the ROCm device flags and run COMMAND (after `--`).

    Least privilege: /dev/kfd and only the render nodes of --gpus (or all of /dev/dri), the groups that
    own them, host IPC (or --shm-size), unlimited memlock and a 64 MiB stack ulimit, and SYS_NICE for
    NUMA binding. --privileged and seccomp=unconfined only when asked. --print shows the `docker run`
    line to paste into other tools.
    """
    nodes = render_nodes_for(gpus) if gpus else None
    env = {}
    for pair in envs:
        k, sep, v = pair.partition("=")
        if not sep or not k:
            raise UsageError(f"--env {pair!r}: expected NAME=VALUE")
        env[k] = v
    mounts = []
    for vol in volumes:
        parts = vol.split(":")
        if len(parts) not in (2, 3) or not all(parts[:2]) or (len(parts) == 3 and parts[2] not in ("ro", "rw")):
            raise UsageError(f"--volume {vol!r}: expected HOST:CONTAINER[:ro|rw]")
        mounts.append((parts[0], parts[1], parts[2] if len(parts) == 3 else "rw"))
    extra = ["--security-opt=seccomp=unconfined"] if seccomp_unconfined else []
    extra += ["-it"] if not print_only and os.isatty(0) and os.isatty(1) else []
    argv = docker_run_argv(image, list(command), render_nodes=nodes, privileged=privileged, env=env, mounts=mounts,
                           name=name, docker=docker_cli or "docker", extra=extra, shm_size=shm_size)
    if print_only:
        click.echo(shlex.join(argv))
        return
    # docker's own message for a missing device node is an OCI runtime error; say what is wrong instead.
    absent = [a.split("=", 1)[1] for a in argv if a.startswith("--device=") and not os.path.exists(a.split("=", 1)[1])]
    if absent:
        raise EnvironmentMissing(f"this host has no {', '.join(absent)} (is the amdgpu driver loaded?)",
                                 hint="--print gives the docker run line to use on a GPU host")
    try:
        os.execvp(argv[0], argv)
    except FileNotFoundError:
        raise EnvironmentMissing(f"no docker client {argv[0]!r}",
                                 hint="install docker, or name it with --docker") from None
