"""`rocmkit kuberay`: a KubeRay RayJob (with its ConfigMap, optional RBAC) that runs verl on N nodes of AMD GPUs."""

from __future__ import annotations

import re
import shlex
import sys
from dataclasses import replace
from pathlib import Path

import click

from ..cluster import kuberay as kuberay_mod
from ..errors import UsageError
from ..fileio import write_atomic
from .common import InputFile, json_option, warn
from .slurm import _ray_version, check_with_verl, plan_overrides


def _pairs(values: tuple[str, ...], option: str) -> dict[str, str]:
    out = {}
    for pair in values:
        k, sep, v = pair.partition("=")
        if not sep:
            raise UsageError(f"{option} {pair!r}: expected NAME=VALUE")
        out[k] = v
    return out


def _arch_from_image(image: str) -> str | None:
    """The arch a `rocmkit build` tag names (rocmkit/<stack>:<rocm>-<arch>-<hash>), or None."""
    tag = image.rsplit("/", 1)[-1].partition(":")[2]
    found = set(re.findall(r"(?<![a-z0-9])(gfx9[0-9a-f]{2})(?![0-9a-f])", tag))
    return found.pop() if len(found) == 1 else None


@click.command()
@click.option("--nodes", type=click.IntRange(1, 65536), default=None, help="Number of nodes (one Ray pod each).")
@click.option("--gpus-per-node", type=click.IntRange(min=1), default=8, show_default=True,
              help="GPUs each Ray pod requests (all of a node's: the preflight then checks the GPUs Ray gets), "
                   "Ray's --num-gpus and trainer.n_gpus_per_node.")
@click.option("--image", default=None, help="The job's image (rocmkit, verl and Ray in it).")
@click.option("--arch", default=None, help="gfx942 or gfx950: the nodes the pods may run on (by the AMD node "
                                           "labeller's amd.com/gpu.device-id). Else from the image's rocmkit tag.")
@click.option("--gpu-resource", default=kuberay_mod.DEFAULT_GPU_RESOURCE, show_default=True,
              help="The device plugin's resource, e.g. amd.com/spx_nps1 with its mixed naming; Ray's --num-gpus is "
                   "set from --gpus-per-node whatever its name.")
@click.option("--job-name", default="rocmkit-verl", show_default=True, help="The RayJob's name (a DNS label).")
@click.option("--namespace", default=None, help="Namespace of every object (else kubectl's current one).")
@click.option("--ray-version", default=None, help="Ray version in the image. Else: --stack's pin, the "
                                                  "io.rocmkit.ray-version label of a local Docker image.")
@click.option("--stack", "stack_name", default=None, help="The built-in stack the image was built from.")
@click.option("--cpus-per-node", type=int, default=None, help="CPU limit of each Ray pod (also Ray --num-cpus).")
@click.option("--memory-per-node", default=None, metavar="QUANTITY", help="Memory limit of each Ray pod, e.g. 1600Gi.")
@click.option("--shm-size", default="64Gi", show_default=True, metavar="QUANTITY",
              help="/dev/shm of each Ray pod (a memory emptyDir: Ray's object store and RCCL).")
@click.option("--ib-hcas", default=None, metavar="LIST", help="Comma-separated RDMA devices for RCCL (NCCL_IB_HCA).")
@click.option("--env", "env_pairs", multiple=True, metavar="NAME=VALUE", help="Extra environment. Repeatable.")
@click.option("--node-selector", "selector_pairs", multiple=True, metavar="KEY=VALUE",
              help="A node label the pods require besides the arch's (e.g. a node pool). Repeatable.")
@click.option("--pvc", "pvc_pairs", multiple=True, metavar="CLAIM=PATH",
              help="Mount the PersistentVolumeClaim CLAIM at PATH in every Ray container (data, models, "
                   "checkpoints: a ReadWriteMany claim for several nodes). Repeatable.")
@click.option("--entrypoint", default=None, metavar="COMMAND",
              help="Run COMMAND instead of `python3 -m verl.trainer.main_ppo` (nothing added, nothing checked).")
@click.option("--no-preflight", "no_preflight", is_flag=True,
              help="Leave out the rocmkit-preflight init container.")
@click.option("--active-deadline", type=int, default=None, metavar="SECONDS",
              help="Fail the job after this long (RayJob activeDeadlineSeconds).")
@click.option("--pre-running-deadline", type=int, default=1800, show_default=True, metavar="SECONDS",
              help="Fail the job if it is not running after this long: never scheduled, a preflight that stopped a "
                   "pod (RayJob preRunningDeadlineSeconds).")
@click.option("--ttl", type=int, default=600, show_default=True, metavar="SECONDS",
              help="Keep the finished job's Ray cluster this long (for its logs), then delete it.")
@click.option("--service-account", default=None, help="The pods' ServiceAccount.")
@click.option("--rbac", is_flag=True, help="Also write --service-account with a Role to read pods and post events.")
@click.option("--tune", "tune_file", type=InputFile(dir_okay=False), default=None, metavar="FILE",
              help="A `rocmkit tune --json` document: its overrides go before OVERRIDES (as `rocmkit slurm --tune`).")
@click.option("--verl-python", default=None, metavar="PY",
              help="Check the overrides with the verl of this Python instead of the job's image.")
@click.option("--no-verl-check", "no_verl_check", is_flag=True,
              help="Write the job without checking its verl overrides with verl's config.")
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None, help="Write here (else stdout).")
@click.option("--force", is_flag=True, help="Overwrite --output.")
@click.option("--examples", "examples_dir", type=click.Path(file_okay=False), default=None,
              help="Regenerate the example manifests into this folder, e.g. kuberay/.")
@click.option("--check-cluster", "check_cluster", is_flag=True,
              help="Instead of writing the job: check that kubectl's cluster can run it (KubeRay's RayJob CRD with the "
                   "fields the job sets, its operator, AMD's device plugin ready, allocatable GPUs equal to capacity, "
                   "enough Ready nodes of the arch without blocking taints). Exit 1 when it cannot.")
@click.option("--cluster-json", "cluster_json", type=click.Path(file_okay=False, exists=True), default=None,
              metavar="DIR", help="With --check-cluster: read the cluster from files instead of kubectl: "
                                  "crd.json, nodes.json, daemonsets.json, deployments.json (`kubectl get -o json`).")
@json_option
@click.argument("overrides", nargs=-1)
def kuberay(nodes, gpus_per_node, image, arch, gpu_resource, job_name, namespace, ray_version, stack_name,
            cpus_per_node, memory_per_node, shm_size, ib_hcas, env_pairs, selector_pairs, pvc_pairs, entrypoint,
            no_preflight, active_deadline, pre_running_deadline, ttl, service_account, rbac, tune_file, verl_python,
            no_verl_check, output, force, examples_dir, check_cluster, cluster_json, as_json, overrides) -> None:
    """Render a KubeRay RayJob that runs verl with OVERRIDES on N nodes of AMD GPUs.

    Written: a ConfigMap with the job's plan, optionally a ServiceAccount with its Role, and a ray.io/v1 RayJob
    whose head and worker pods each request --gpus-per-node of --gpu-resource, set Ray's --num-gpus to the
    same number, run only on nodes whose AMD GPUs are of the image's arch, get /dev/shm in memory and the
    environment `rocmkit slurm` sets for Ray and RCCL on AMD; a `rocmkit-preflight` init container requesting
    the same GPUs runs `rocmkit doctor --pod-gpus G` first and stops the pod when it cannot open them. The
    driver is `python3 -m verl.trainer.main_ppo trainer.nnodes=N trainer.n_gpus_per_node=G OVERRIDES...`.
    Give OVERRIDES after `--`.

    As with `rocmkit slurm`, the overrides are first checked by verl's own config, in the job's image (through
    this host's Docker engine) or with --verl-python; a rejection is exit 2, no verl to check with exit 3.

    With --check-cluster nothing is written: the cluster kubectl reaches is checked for the job instead.
    """
    if examples_dir:
        specs = kuberay_mod.example_specs()
        for name, spec in specs.items():
            write_atomic(Path(examples_dir) / name, kuberay_mod.render(spec))
        click.echo(f"wrote {len(specs)} example manifests into {examples_dir}", err=True)
        return
    if nodes is None:
        raise UsageError("--nodes is required")
    if not image:
        raise UsageError("--image is required", hint="the image the job runs, e.g. one `rocmkit build` tagged")
    arch = arch or _arch_from_image(image)
    if not arch:
        raise UsageError(f"the arch of {image} is unknown", hint="give --arch gfx942 or --arch gfx950")
    given = tuple(overrides)
    planned = plan_overrides(tune_file, nodes, gpus_per_node, given) if tune_file else ()
    try:
        entry = tuple(shlex.split(entrypoint)) if entrypoint is not None else ()
    except ValueError as exc:
        raise UsageError(f"--entrypoint: {exc}") from None
    if entrypoint is not None and not entry:
        raise UsageError("--entrypoint is empty", hint="leave it out for verl's main_ppo")
    spec = kuberay_mod.KubeRaySpec(
        nodes=nodes, gpus_per_node=gpus_per_node, image=image, arch=arch, ray_version=None, job_name=job_name,
        namespace=namespace, gpu_resource=gpu_resource, cpus_per_node=cpus_per_node, memory_per_node=memory_per_node,
        shm_size=shm_size, ib_hcas=tuple(h for h in (ib_hcas or "").split(",") if h),
        extra_env=_pairs(env_pairs, "--env"), node_selector=_pairs(selector_pairs, "--node-selector"),
        volumes=_pairs(pvc_pairs, "--pvc"),
        entrypoint=entry, overrides=planned + given, preflight=not no_preflight, active_deadline_s=active_deadline,
        pre_running_deadline_s=pre_running_deadline, ttl_s=ttl, service_account=service_account, rbac=rbac)
    spec = kuberay_mod.validate(spec)  # the options first: a bad one is said before the image is looked into
    if cluster_json and not check_cluster:
        raise UsageError("--cluster-json is what --check-cluster reads", hint="add --check-cluster")
    if as_json and not check_cluster:
        raise UsageError("--json prints --check-cluster's findings; the job itself is YAML", hint="add --check-cluster")
    if check_cluster:
        click.get_current_context().exit(_check_cluster(spec, cluster_json, as_json))
    version, source = _ray_version(ray_version, stack_name, image, "docker")
    if verl_python and no_verl_check:
        raise UsageError("--verl-python and --no-verl-check: give one")
    if entry:
        if verl_python:
            raise UsageError("--verl-python checks verl's main_ppo overrides, and this job runs --entrypoint")
    elif no_verl_check:
        warn("the job's verl overrides are not checked (--no-verl-check)")
    else:
        check_with_verl(spec, "docker", tune_file, planned, given, verl_python)  # the job's image, by Docker here
    spec = replace(spec, ray_version=version)
    text = kuberay_mod.render(spec)
    click.echo(f"Ray {version} ({source}): {spec.noset_var}=1", err=True)
    if output:
        write_atomic(output, text, force=force, what="--output")
        click.echo(f"wrote {output}; submit with: kubectl apply -f {output}", err=True)
    else:
        sys.stdout.write(text)


def _check_cluster(spec, cluster_json, as_json) -> int:
    from ..cluster import k8s_check
    from ..host.report import exit_code, table
    from ..output import document, dumps

    objects = k8s_check.read_files(cluster_json) if cluster_json else k8s_check.read_live()
    findings = k8s_check.check(spec, objects)
    code = exit_code(findings, strict=False)
    if as_json:
        click.echo(dumps(document("kuberay-check", {"job": kuberay_mod.plan(spec), "findings": [
            f.to_json() for f in findings], "exit_code": code})), nl=False)
    else:
        where = f"cluster files in {cluster_json}" if cluster_json else "kubectl's current cluster"
        click.echo(table(findings, f"rocmkit kuberay --check-cluster — {where}", color=sys.stdout.isatty()), nl=False)
    return code
