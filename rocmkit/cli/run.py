"""`rocmkit run`: a container with exactly the GPU access a ROCm job needs, and no more."""

from __future__ import annotations

import os
import shlex
import sys

import click

from ..runtime.container import ULIMIT_NOTE, docker_run_argv, run_container
from ..errors import DeadlinePassed, EnvironmentMissing, UsageError


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
              help="Only these GPUs (0,1,...): /dev/kfd plus their render nodes; none: no GPU at all. Default: all "
                   "of /dev/dri.")
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
@click.option("--timeout", "timeout_s", type=click.IntRange(min=1), default=None, metavar="SECONDS",
              help="Stop and remove the container after this long (exit 124).")
@click.pass_context
def run(ctx, image, command, gpus, privileged, seccomp_unconfined, shm_size, volumes, envs, name, print_only,
        docker_cli, timeout_s) -> None:
    """Start IMAGE with the ROCm device flags and run COMMAND (after `--`).

    Least privilege: /dev/kfd and only the render nodes of --gpus (or all of /dev/dri; none with
    --gpus none, for a CPU stack's image), the groups that own them, host IPC (or --shm-size),
    unlimited memlock and a 64 MiB stack ulimit, and SYS_NICE for NUMA binding. --privileged and
    seccomp=unconfined only when asked. --print shows the `docker run` line to paste into other tools; it needs
    no GPU here (a login node): the device nodes are then not checked, and --gpus, which needs the KFD topology
    to find the GPUs' render nodes, passes all of /dev/dri with HIP_VISIBLE_DEVICES selecting the GPUs (notes on
    stderr say so).

    The container is labelled and removed however rocmkit ends: its own exit (rocmkit exits with the
    container's code), --timeout (124), SIGINT or SIGTERM to rocmkit (130/143).
    """
    from ..runtime import imageref
    from ..runtime.container import read_device_nodes
    from ..runtime.docker_client import run_cli

    imageref.checked(image, "IMAGE", image_id=True)  # --print too: a line Docker refuses is no line to paste
    no_gpus = gpus == "none"
    env = {}
    for pair in envs:
        k, sep, v = pair.partition("=")
        if not sep or not k:
            raise UsageError(f"--env {pair!r}: expected NAME=VALUE")
        env[k] = v
    notes = []
    try:
        render_nodes = render_nodes_for(gpus) if gpus and not no_gpus else None
    except EnvironmentMissing:
        if not print_only:
            raise
        # --print on a host without GPUs (a login node, where the command is prepared): the GPU indices cannot be
        # mapped to render nodes here, so the line passes all of /dev/dri and selects the GPUs by variable.
        # HIP_VISIBLE_DEVICES, not ROCR_VISIBLE_DEVICES: Ray 2.45 refuses the latter (the doctor's env.ray_rocr).
        render_nodes = None
        note = (f"--gpus {gpus}: this host has no KFD topology to map those GPUs to their render nodes, so the line "
                f"passes all of /dev/dri")
        if any(k in env for k in ("HIP_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES")):
            note += " and your -e visible-devices variable selects the GPUs"
        else:
            env["HIP_VISIBLE_DEVICES"] = ",".join(g.strip() for g in gpus.split(",") if g.strip())
            note += f" and selects them with HIP_VISIBLE_DEVICES={env['HIP_VISIBLE_DEVICES']}"
        notes.append(note + f"; `rocmkit run --print --gpus {gpus} IMAGE` on the GPU host gives the line with only "
                            "their render nodes")
    mounts = []
    for vol in volumes:
        parts = vol.split(":")
        if len(parts) not in (2, 3) or not all(parts[:2]) or (len(parts) == 3 and parts[2] not in ("ro", "rw")):
            raise UsageError(f"--volume {vol!r}: expected HOST:CONTAINER[:ro|rw]")
        mounts.append((parts[0], parts[1], parts[2] if len(parts) == 3 else "rw"))
    if no_gpus and privileged:
        raise UsageError("--gpus none and --privileged are alternatives")
    extra = ["--security-opt=seccomp=unconfined"] if seccomp_unconfined else []
    extra += ["-it"] if not print_only and os.isatty(0) and os.isatty(1) else []
    host = read_device_nodes()

    def argv_for(**more) -> list[str]:
        return docker_run_argv(image, list(command), **flags, **more)

    flags = dict(render_nodes=render_nodes, nodes=host, privileged=privileged, env=env, mounts=mounts, name=name,
                 extra=extra, shm_size=shm_size, gpus=not no_gpus)
    if print_only:  # a line for another host: its own `docker`, unless one is named
        if not no_gpus and not privileged and "/dev/kfd" not in host.present:
            notes.append("this host has no /dev/kfd: the device nodes were not checked here, and --group-add names "
                         "the conventional `video` group, not the groups owning the GPU host's nodes")
        click.echo(shlex.join(argv_for(docker=docker_cli or "docker")))
        for note in notes:  # on stderr: stdout stays the one line, pasteable and $(...)-able
            click.echo(f"note: {note}", err=True)
        return
    # docker's own message for a missing device node is an OCI runtime error; say what is wrong instead.
    absent = [a.split("=", 1)[1] for a in argv_for() if a.startswith("--device=")
              and a.split("=", 1)[1] not in host.present]
    if absent:
        raise EnvironmentMissing(f"this host has no {', '.join(absent)} (is the amdgpu driver loaded?)",
                                 hint="--print gives the docker run line to use on a GPU host; --gpus none runs a "
                                      "CPU stack's image without GPUs")
    interactive = sys.stdin.isatty() and sys.stdout.isatty()
    docker = run_cli(docker_cli)
    result, ulimits = run_container(image, list(command), what=f"the container of {image}", timeout=timeout_s,
                                    docker=docker, passthrough=interactive, host_code=False,
                                    on_line=None if interactive else click.echo, **flags)
    if not ulimits:
        click.echo(f"note: {ULIMIT_NOTE}", err=True)
    if result.timed_out:
        raise DeadlinePassed(f"the container of {image} ran past --timeout {timeout_s}s: it was stopped and removed")
    ctx.exit(result.returncode)
