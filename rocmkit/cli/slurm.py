"""`rocmkit slurm`: an sbatch script that brings up a Ray cluster on N nodes and runs verl on it."""

from __future__ import annotations

import shlex
import sys
from dataclasses import replace
from pathlib import Path

import click

from .common import InputFile

from ..certify import engines
from ..cluster import slurm as slurm_mod
from ..errors import UsageError
from ..fileio import write_atomic
from .common import warn


def _ray_version(explicit: str | None, stack_name: str | None, image: str | None, runtime: str) -> tuple[str, str]:
    """(version, where it came from): --ray-version, the stack's pin, the image's label, or (runtime none)
    the Ray installed here."""
    if explicit:
        return explicit, "--ray-version"
    if stack_name:
        from .. import stacks

        stack = stacks.load_builtin(stack_name)
        v = stack.pinned_version("ray")
        if v:
            return v, f"stack {stack_name}"
        # Miles' and TRL's stacks take whatever Ray their base image has (if any): the stack cannot say which.
        raise UsageError(f"stack {stack_name} pins no Ray version (any Ray in its image comes from the base image "
                         f"{stack.base.image}), and the Ray version decides the RAY_EXPERIMENTAL_NOSET_* variable",
                         hint="give --ray-version X: the image's `python3 -c 'import ray; print(ray.__version__)'`")
    if image and runtime == slurm_mod.Runtime.DOCKER:
        try:
            from ..runtime.docker_engine import Engine

            info = Engine.connect(timeout=10).image(image)
        except Exception:  # noqa: BLE001 - no engine here is normal on a login node
            info = None
        if info and info.labels.get("io.rocmkit.ray-version"):
            return info.labels["io.rocmkit.ray-version"], f"label io.rocmkit.ray-version of {image}"
    named = _stack_in_tag(image)
    if named:  # `rocmkit build` tags images rocmkit/<stack>:<rocm>-<arch>-<hash>: that stack's pin, said as a guess
        try:
            v, _ = _ray_version(None, named, None, runtime)
            return v, (f"stack {named}'s pin, the stack the image's tag names; give --ray-version if the image was "
                       "built from another stack file")
        except UsageError:
            pass  # the stack pins no Ray: the image's own label or --ray-version must say
    if runtime == slurm_mod.Runtime.NONE:
        from importlib import metadata

        try:
            return metadata.version("ray"), "the Ray installed here"
        except metadata.PackageNotFoundError:
            pass
    raise UsageError("the image's Ray version is unknown, and it decides the RAY_EXPERIMENTAL_NOSET_* variable",
                     hint="give --ray-version X, or --stack NAME (the stack the image was built from); images "
                          "rocmkit builds carry it in the label io.rocmkit.ray-version when present locally")


def _stack_in_tag(image: str | None) -> str | None:
    """The built-in stack a `rocmkit build` tag names ("rocmkit/verl-vllm:rocm7.14.0-gfx942-ab12"), or None."""
    from .. import stacks

    repo = (image or "").rsplit(":", 1)[0] if ":" in (image or "").rsplit("/", 1)[-1] else (image or "")
    parts = repo.split("/")
    if len(parts) >= 2 and parts[-2] == "rocmkit" and parts[-1] in stacks.builtin_names():
        return parts[-1]
    return None


def plan_overrides(path: str, nodes: int, gpus_per_node: int, given: tuple[str, ...]) -> tuple[str, ...]:
    """The overrides of a `rocmkit tune --json` document the job keeps, to go before OVERRIDES: not those OVERRIDES
    replace, nor trainer.nnodes and trainer.n_gpus_per_node, which the script adds itself (so the plan's must
    agree with --nodes and --gpus-per-node)."""
    from ..tune.planfile import load_overrides

    overrides = load_overrides(path)
    planned = {"trainer.nnodes": nodes, "trainer.n_gpus_per_node": gpus_per_node}
    tuned = []
    for item in overrides:
        key, _, value = item.partition("=")
        if key in planned:
            if value != str(planned[key]):
                raise UsageError(f"--tune {path}: the plan is for {key}={value}, the job for {planned[key]}",
                                 hint="run rocmkit tune with the same --nodes and --gpus-per-node")
            continue
        tuned.append(item)
    mine = {o.split("=", 1)[0].lstrip("+~") for o in given}
    return tuple(o for o in tuned if o.split("=", 1)[0] not in mine)


def check_with_verl(spec, runtime: str, tune_file: str | None, planned: tuple[str, ...],
                    given: tuple[str, ...], verl_python: str | None) -> None:
    """verl-check's checker on the command line the head node will run (spec: a Slurm or KubeRay job's nodes,
    GPUs per node and image, whose verl checks in `runtime`); a rejection is exit 2, no verl exit 3."""
    from ..cluster import verl_overrides

    origins = [verl_overrides.Origin("--nodes and --gpus-per-node", (f"trainer.nnodes={spec.nodes}",
                                                                     f"trainer.n_gpus_per_node={spec.gpus_per_node}"))]
    if planned:
        origins.append(verl_overrides.Origin(f"--tune {tune_file}", planned))
    if given:
        origins.append(verl_overrides.Origin("the overrides after --", given))
    said, where, version = verl_overrides.check(origins, runtime, spec.image, verl_python)
    for line in said:
        warn(line)
    click.echo(f"verl {version} ({where}) accepts the job's overrides", err=True)


@click.command()
# at most 65536: a typo of many digits is refused, while the largest AMD system (Frontier, 9,408 nodes) fits
@click.option("--nodes", type=click.IntRange(1, 65536), required=False, help="Number of nodes (one Ray node each).")
@click.option("--gpus-per-node", type=int, default=8, show_default=True,
              help="GPUs per node (Slurm --gpus-per-node, Ray --num-gpus, trainer.n_gpus_per_node); 0 for none.")
@click.option("--image", default=None, help="Docker image, or a .sif file for --runtime apptainer.")
@click.option("--runtime", type=click.Choice(slurm_mod.RUNTIMES), default="docker", show_default=True,
              help="docker: one container per node, removed when the job ends; apptainer: `apptainer exec --rocm`; "
                   "none: software installed on the nodes.")
@click.option("--partition", default=None, help="Slurm partition.")
@click.option("--time", "time_limit", default=None, help="Slurm time limit, e.g. 04:00:00.")
@click.option("--ib-hcas", default=None, metavar="LIST",
              help="Comma-separated InfiniBand/RoCE HCAs for RCCL (NCCL_IB_HCA).")
@click.option("--cpus-per-task", type=int, default=None, help="Slurm CPUs per node task (also Ray --num-cpus).")
@click.option("--job-name", default="rocmkit-verl", show_default=True,
              help="Slurm job name; the log is JOB_NAME-<jobid>.out.")
@click.option("--ray-version", default=None, help="Ray version in the image. Else: --stack's pin, the io.rocmkit.ray-version label of a local "
                   "Docker image, or (--runtime none) the Ray installed here.")
@click.option("--stack", "stack_name", default=None,
              help="The built-in stack the image was built from (for its Ray pin).")
@click.option("--ray-port", type=int, default=6379, show_default=True, help="Ray head port; outside 10002-19999.")
@click.option("--join-timeout", type=int, default=300, show_default=True,
              help="Seconds to wait for the head and for every node to join before failing the job.")
@click.option("--entrypoint", default=None, metavar="COMMAND",
              help="Run COMMAND on the head node instead of `python3 -m verl.trainer.main_ppo` (trainer.nnodes and "
                   "trainer.n_gpus_per_node are then not added).")
@click.option("--env", "env_pairs", multiple=True, metavar="NAME=VALUE",
              help="Extra environment for every node. Repeatable.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Write the script here (else stdout).")
@click.option("--force", is_flag=True, help="Overwrite --output.")
@click.option("--examples", "examples_dir", type=click.Path(file_okay=False), default=None,
              help="Regenerate the example scripts (one per runtime) into this folder, e.g. slurm/.")
@click.option("--tune", "tune_file", type=InputFile(dir_okay=False), default=None, metavar="FILE",
              help="A `rocmkit tune --json` document: its overrides go before OVERRIDES (an override given in "
                   "OVERRIDES replaces the tuned one of the same key); its nodes and GPUs per node must match, and it must set "
                   "algorithm.adv_estimator (plans of rocmkit tune do).")
@click.option("--preflight", is_flag=True,
              help="Before Ray starts, run `rocmkit doctor --multi-node --only rdma,kernel.log` on every node (in a "
                   "throwaway container for --runtime docker, given /dev/kmsg read-only and CAP_SYSLOG); the job "
                   "fails naming the nodes where it fails (no ACTIVE RDMA port, GPU or PCIe faults in the log).")
@click.option("--min-nodes", "min_nodes", type=click.IntRange(min=1), default=None, metavar="N", expose_value=False,
              callback=lambda ctx, _param, value: ctx.meta.__setitem__("slurm --min-nodes", value),
              help="With --preflight: run it as `rocmkit doctor --fleet` (rocmkit on the first node's PATH; the "
                   "doctors in the image), which also compares the nodes, and go on without the failing nodes "
                   "while at least N pass; trainer.nnodes follows. The report and the --exclude line for the next "
                   "job go to JOB_NAME-<jobid>/preflight.")
@click.option("--stall-report-after", "stall_report_after", type=float, default=None, metavar="MINUTES",
              help="MINUTES into the job (fractions too; below --time), run `rocmkit doctor --stalled ray` on every "
                   "node, on the host (not in the container), and let the job run on: where each Ray process of a "
                   "hung job waits, before Slurm kills it at --time. Reports go to JOB_NAME-<jobid>/stall/<node>, "
                   "output and errors to its stall.log; bounded, it never fails the job. The nodes need rocmkit "
                   "with py-spy (`rocmkit[stall]`) and may ptrace the job's processes (root for Docker's).")
@click.option("--engine", type=click.Choice(list(engines.cluster_engines())), default=slurm_mod.DEFAULT_ENGINE, show_default=True,
              help="verl: `python3 -m verl.trainer.main_ppo` with Hydra OVERRIDES; miles: Miles' Ray launch, "
                   "`ray job submit -- python3 /root/miles/train.py --actor-num-nodes N --actor-num-gpus-per-node G "
                   "ARGS` with Miles' job runtime env (--entrypoint replaces the train.py command).")
@click.option("--verl-python", default=None, metavar="PY",
              help="Check the verl overrides with the verl of this Python (the job's verl version) instead of the "
                   "job's image (--runtime docker) or this Python.")
@click.option("--no-verl-check", "no_verl_check", is_flag=True,
              help="Write the job without checking its verl overrides (the plan's and those after --) with verl's "
                   "config, as `rocmkit verl-check` does; for a verl this host cannot reach.")
@click.argument("overrides", nargs=-1)
def slurm(nodes, gpus_per_node, image, runtime, partition, time_limit, ib_hcas, cpus_per_task, job_name, ray_version,
          stack_name, ray_port, join_timeout, entrypoint, env_pairs, output, force, examples_dir, tune_file,
          preflight, engine, stall_report_after, verl_python, no_verl_check, overrides) -> None:
    """Render an sbatch script: a Ray cluster on N nodes, then verl with OVERRIDES.

    The script starts one container per node (removed however the job ends), the Ray head on the first
    node and the workers with deadlines, waits until every node has joined (naming the missing ones if
    not), sets the RCCL environment and the RAY_EXPERIMENTAL_NOSET_* variable of the image's Ray, runs
    `python -m verl.trainer.main_ppo trainer.nnodes=N trainer.n_gpus_per_node=G OVERRIDES...` on the head
    node, and exits with its code. Give OVERRIDES after `--`.

    Before the script is written, that command line (trainer.nnodes, trainer.n_gpus_per_node, the --tune
    plan's overrides, then OVERRIDES) is checked as `rocmkit verl-check` checks a launch script: by verl's own
    config, in the job's image (--runtime docker, through this host's Docker engine) or with --verl-python or
    this Python's verl, and by verl 0.9.1's rules for the rollout and Megatron GPU split. What verl would
    reject is exit 2, naming each override and verl's reason; no verl to check with is exit 3 (--verl-python
    names one; --no-verl-check writes the job unchecked). A custom --entrypoint or --engine miles is not checked.
    """
    if examples_dir:
        for name, spec in slurm_mod.example_specs().items():
            write_atomic(Path(examples_dir) / name, slurm_mod.render(spec), mode=0o755)
        click.echo(f"wrote {len(slurm_mod.example_specs())} example scripts into {examples_dir}", err=True)
        return
    if nodes is None:
        raise UsageError("--nodes is required")
    given = tuple(overrides)
    planned = plan_overrides(tune_file, nodes, gpus_per_node, given) if tune_file else ()
    overrides = planned + given
    env = {}
    for pair in env_pairs:
        k, sep, v = pair.partition("=")
        if not sep:
            raise UsageError(f"--env {pair!r}: expected NAME=VALUE")
        env[k] = v
    try:
        entry = tuple(shlex.split(entrypoint)) if entrypoint is not None else ()  # (): the engine's own
    except ValueError as exc:
        raise UsageError(f"--entrypoint: {exc}") from None
    if entrypoint is not None and not entry:
        raise UsageError("--entrypoint is empty", hint="leave it out for the engine's own driver")
    spec = slurm_mod.SlurmSpec(
        nodes=nodes, gpus_per_node=gpus_per_node, image=image, runtime=runtime, ray_version=None,
        partition=partition, time=time_limit, ib_hcas=tuple(h for h in (ib_hcas or "").split(",") if h),
        job_name=job_name, cpus_per_task=cpus_per_task, ray_port=ray_port, join_timeout=join_timeout,
        entrypoint=entry, overrides=tuple(overrides), extra_env=env, preflight=preflight, engine=engine,
        stall_report_after=stall_report_after)
    spec = replace(spec, min_nodes=click.get_current_context().meta.get("slurm --min-nodes"))
    # The options the user gave are checked first: the Ray version is looked up in the image they name, so a
    # missing --image must be said as such, not as "the image's Ray version is unknown".
    slurm_mod.validate(spec)
    version, source = _ray_version(ray_version, stack_name, image, runtime)
    if verl_python and no_verl_check:
        raise UsageError("--verl-python and --no-verl-check: give one (the first checks with that verl, the second "
                         "checks nothing)")
    if not spec.job.main_ppo or entry:
        if verl_python:
            raise UsageError("--verl-python checks verl's main_ppo overrides, and this job runs "
                             + ("--engine " + engine if not spec.job.main_ppo else "--entrypoint"))
    elif no_verl_check:
        warn("the job's verl overrides are not checked (--no-verl-check)")
    else:
        check_with_verl(spec, spec.runtime, tune_file, planned, given, verl_python)
    spec = replace(spec, ray_version=version)
    text = slurm_mod.render(spec)
    click.echo(f"Ray {version} ({source}): {spec.noset_var}=1", err=True)
    if output:
        write_atomic(output, text, force=force, mode=0o755, what="--output")
        click.echo(f"wrote {output}; submit with: sbatch {output}", err=True)
    else:
        sys.stdout.write(text)
