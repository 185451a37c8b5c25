"""Slurm batch scripts that start a Ray cluster (in containers, or on the nodes' own software) and run verl.

What the copied upstream scripts get wrong, and this one does not (research/slurm-ray-ci.md part A):
fixed `sleep`s instead of a readiness check; `nodes_array=("$nodes")` (one element: no worker ever
starts); `ray start --address` to a dead head hanging forever; no teardown (containers outlive the
job); `--privileged` containers; and on Ray >= 2.45 the wrong RAY_EXPERIMENTAL_NOSET_* variable.
"""

from __future__ import annotations

import json
import math
import re
import shlex
from dataclasses import dataclass, field, replace

from .. import raycompat
from ..certify import engines
from ..certify.engines.base import ClusterJob
from ..errors import UsageError
from ..stacks import IMAGE_RE
from ..textenum import TextEnum


class Runtime(TextEnum):
    """What runs on each node: a Docker container, an Apptainer one, or the node's own software."""

    DOCKER = "docker"
    APPTAINER = "apptainer"
    NONE = "none"


RUNTIMES = tuple(r.value for r in Runtime)
DEFAULT_ENGINE = "verl"  # the driver's engine, from certify's registry (certify/engines/): its cluster job
# Ray's GCS port must lie outside the worker port range (default 10002-19999), or the head refuses to start.
RAY_WORKER_PORTS = range(10002, 20000)
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
PARTITION_RE = re.compile(r"^[A-Za-z0-9_,.-]{1,64}$")
TIME_RE = re.compile(r"^(\d+-)?\d{1,3}(:\d{2}){0,2}$|^\d+$")
HCA_RE = re.compile(r"^[A-Za-z0-9_:.-]+$")
# What --preflight runs on every node: the RDMA ports and GIDs, and faults in the kernel log since boot.
PREFLIGHT_IDS = ("rdma", "kernel.log")
PREFLIGHT = ("rocmkit", "doctor", "--multi-node", "--only", ",".join(PREFLIGHT_IDS))
# With --min-nodes: the same checks through the fleet doctor (rocmkit/fleet), which also compares the nodes
FLEET_PREFLIGHT = ("rocmkit", "doctor", "--fleet", "--only", ",".join(PREFLIGHT_IDS), "--node-timeout", "300")
# The preflight's own throwaway container (not the Ray one) reads the host's kernel log: /dev/kmsg read-only, and
# CAP_SYSLOG, which reading it needs under kernel.dmesg_restrict=1 (Docker's default capabilities lack it).
PREFLIGHT_DOCKER_FLAGS = ("--init", "--network=host", "--device=/dev/kmsg:/dev/kmsg:r", "--cap-add=SYSLOG")
# What --stall-report-after runs on every node, on the host: py-spy there sees the processes of the job's containers.
STALL_REPORT = ("rocmkit", "doctor", "--stalled", "ray")
# Its deadline: the doctor's own budget is 30 s; the rest is rocmkit's start and srun's on a loaded cluster.
STALL_REPORT_TIMEOUT_S = 120


@dataclass(frozen=True)
class SlurmSpec:
    nodes: int
    gpus_per_node: int
    image: str | None
    runtime: Runtime
    ray_version: str | None  # None only while the options are checked first (validate), before it is looked up
    partition: str | None = None
    time: str | None = None
    ib_hcas: tuple[str, ...] = ()
    job_name: str = "rocmkit-verl"
    cpus_per_task: int | None = None
    ray_port: int = 6379
    join_timeout: int = 300
    entrypoint: tuple[str, ...] = ()  # empty: the engine's own (verl: python3 -m verl.trainer.main_ppo)
    overrides: tuple[str, ...] = ()
    extra_env: dict[str, str] = field(default_factory=dict)
    preflight: bool = False  # run PREFLIGHT on every node before Ray starts; the job fails naming the nodes
    engine: str = DEFAULT_ENGINE  # verl: main_ppo with Hydra overrides; miles: Miles' train.py through `ray job submit`
    stall_report_after: float | None = None  # minutes into the job: STALL_REPORT on every node, the job running on
    min_nodes: int | None = None  # with preflight: `doctor --fleet` drops failing nodes while this many pass

    @property
    def noset_var(self) -> str:
        return raycompat.noset_variable(self.ray_version)

    @property
    def job(self) -> ClusterJob:
        return engines.cluster_engines()[self.engine].cluster


def validate(spec: SlurmSpec) -> SlurmSpec:
    """Every value that reaches the script, checked; a bad one is a UsageError naming the option."""
    if spec.nodes < 1:
        raise UsageError(f"--nodes {spec.nodes}: at least 1")
    if spec.gpus_per_node < 0:
        raise UsageError(f"--gpus-per-node {spec.gpus_per_node}: 0 or more")
    if spec.runtime not in RUNTIMES:
        raise UsageError(f"--runtime {spec.runtime!r}", hint=f"one of: {', '.join(RUNTIMES)}")
    spec = replace(spec, runtime=Runtime(spec.runtime))
    if spec.runtime is not Runtime.NONE and not spec.image:
        raise UsageError(f"--runtime {spec.runtime} needs --image",
                         hint="or --runtime none for software installed on the nodes")
    sif = spec.image and spec.image.endswith(".sif") and re.match(r"^[\w./-]+$", spec.image)
    if spec.image and not (IMAGE_RE.match(spec.image) or sif):
        raise UsageError(f"--image {spec.image!r} is not an image reference or .sif path")
    if spec.partition and not PARTITION_RE.match(spec.partition):
        raise UsageError(f"--partition {spec.partition!r}: letters, digits, _ , . -")
    if spec.time and not TIME_RE.match(spec.time):
        raise UsageError(f"--time {spec.time!r}", hint="minutes, MM:SS, HH:MM:SS or D-HH:MM:SS")
    for h in spec.ib_hcas:
        if not HCA_RE.match(h):
            raise UsageError(f"--ib-hcas: {h!r} is not an HCA name", hint="e.g. mlx5_0,mlx5_1 or rdma0:1")
    if not NAME_RE.match(spec.job_name):
        raise UsageError(f"--job-name {spec.job_name!r}: letters, digits, _ . -")
    if spec.ray_port in RAY_WORKER_PORTS or not 1024 <= spec.ray_port <= 65535:
        raise UsageError(f"--ray-port {spec.ray_port}: must be 1024-65535 and outside Ray's worker ports 10002-19999",
                         hint="Ray refuses a GCS port inside its worker port range (the head never starts)")
    if spec.stall_report_after is not None:
        if not 0 < spec.stall_report_after < math.inf:  # nan and inf too: the script sleeps whole seconds
            raise UsageError(f"--stall-report-after {spec.stall_report_after:g}: a number of minutes, more than 0")
        if spec.time and 0 < time_minutes(spec.time) <= spec.stall_report_after:
            raise UsageError(f"--stall-report-after {spec.stall_report_after:g} is not before the job's --time "
                             f"{spec.time} ({time_minutes(spec.time):g} minutes)",
                             hint="Slurm kills the job at --time: give fewer minutes, so the report comes first")
    if spec.min_nodes is not None:
        if not spec.preflight:
            raise UsageError("--min-nodes says how many nodes the preflight may leave", hint="add --preflight")
        if not 1 <= spec.min_nodes <= spec.nodes:
            raise UsageError(f"--min-nodes {spec.min_nodes}: 1 to --nodes ({spec.nodes})")
        known = engines.cluster_engines().get(spec.engine)
        if known is None or not known.cluster.main_ppo:
            raise UsageError(f"--min-nodes: the {spec.engine} engine's node count cannot follow the preflight",
                             hint=f"--engine {DEFAULT_ENGINE}, or leave --min-nodes out")
    if spec.join_timeout < 10:
        raise UsageError(f"--join-timeout {spec.join_timeout}: at least 10 seconds")
    if spec.engine not in engines.cluster_engines():
        raise UsageError(f"--engine {spec.engine!r}", hint=f"one of: {', '.join(engines.cluster_engines())}")
    if not spec.entrypoint:
        spec = replace(spec, entrypoint=spec.job.entrypoint)
    for o in spec.overrides:
        spec.job.check_argument(o)
    for k in spec.extra_env:
        if not re.match(r"^[A-Z_][A-Z0-9_]*$", k):
            raise UsageError(f"--env {k!r}: not an environment variable name")
    if spec.ray_version is None:  # the options alone: a missing --image is said before an unknown Ray version
        return spec
    try:
        raycompat.noset_variable(spec.ray_version)
    except ValueError as exc:
        raise UsageError(f"--ray-version: {exc}") from None
    return spec


def time_minutes(value: str) -> float:
    """Slurm's --time (M, M:S, H:M:S, D-H, D-H:M or D-H:M:S, as sbatch(1) reads them) in minutes; 0 is no limit."""
    days, _, rest = value.rpartition("-")
    parts = [int(p) for p in rest.split(":")]
    if days:
        hours, minutes, seconds = (parts + [0, 0])[:3]
    elif len(parts) == 3:
        hours, minutes, seconds = parts
    else:
        hours, (minutes, seconds) = 0, (parts + [0])[:2]
    return int(days or 0) * 1440 + hours * 60 + minutes + seconds / 60


def environment(spec: SlurmSpec) -> list[tuple[str, str, str]]:
    """(name, value, why) exported on every node and passed into the containers."""
    env = []
    if spec.gpus_per_node:
        env.append(("HIP_VISIBLE_DEVICES", ",".join(str(i) for i in range(spec.gpus_per_node)),
                    "Ray >= 2.45 raises when ROCR_VISIBLE_DEVICES (which Slurm exports) is set without it"))
    return env + ray_amd_environment(spec.noset_var, spec.ray_version, spec.ib_hcas, spec.extra_env)


def ray_amd_environment(noset_var: str, ray_version: str | None, ib_hcas: tuple[str, ...],
                        extra_env: dict[str, str]) -> list[tuple[str, str, str]]:
    """(name, value, why) of Ray and RCCL on AMD GPUs, whatever starts the nodes (Slurm here, KubeRay's pods in
    cluster/kuberay.py), so the two cannot drift apart."""
    env = [(noset_var, "1", f"Ray {ray_version} must not narrow each actor's GPUs: verl assigns them")]
    env += [
        ("HSA_NO_SCRATCH_RECLAIM", "1",
         "RCCL on ROCm 7.1+ fails ncclCommInitRank without it (vllm-project/vllm#32497)"),
        ("NCCL_MIN_NCHANNELS", "112", "fill MI300X/MI355X XGMI bandwidth (AMD workload tuning guide)"),
        ("TORCH_NCCL_HIGH_PRIORITY", "1", "high-priority streams for RCCL under FSDP (AMD workload tuning guide)"),
        ("GPU_MAX_HW_QUEUES", "2", "with TORCH_NCCL_HIGH_PRIORITY, per AMD's multi-node FSDP advice"),
        ("TOKENIZERS_PARALLELISM", "false", "tokenizer threads deadlock after fork in Ray workers"),
    ]
    if ib_hcas:
        env += [
            ("NCCL_IB_HCA", ",".join(ib_hcas), "the InfiniBand/RoCE adapters RCCL may use"),
            ("NCCL_IB_GID_INDEX", "3", "RoCE v2 GID (as verl's AMD multi-node recipe)"),
            ("NCCL_CROSS_NIC", "0", "keep each ring on one NIC (as verl's AMD multi-node recipe)"),
        ]
    env += [(k, v, "given with --env") for k, v in sorted(extra_env.items())]
    return env


def render(spec: SlurmSpec) -> str:
    from ..runtime.container import rocm_device_args
    from ..templating import environment as jinja_environment

    spec = validate(spec)
    if spec.ray_version is None:
        raise ValueError("render needs the spec's Ray version")  # a caller's bug: the CLI always looks it up
    env = jinja_environment(comment_start_string="<#", comment_end_string="#>")  # bash has ${#ARRAY[@]}
    env.filters["q"] = lambda v: shlex.quote(str(v))
    env.filters["qjoin"] = lambda items: " ".join(shlex.quote(str(i)) for i in items)
    # The containers get the ROCm devices of `rocmkit run` (all of /dev/dri: Slurm's GRES decides which GPUs
    # the job may use, through HIP_VISIBLE_DEVICES), with host networking for Ray and RCCL.
    # Group ids of this (rendering) machine mean nothing on the nodes: the script reads each node's own.
    docker_flags = ["--init", "--network=host"] + [a for a in rocm_device_args() if not a.startswith("--group-add=")]
    job = spec.job
    return env.get_template("slurm/ray-job.sbatch.j2").render(
        spec=spec, env=environment(spec), docker_flags=docker_flags if spec.gpus_per_node else
        [f for f in docker_flags if not f.startswith("--device=")],
        driver=job.driver(spec.overrides, spec.entrypoint, spec.nodes, spec.gpus_per_node),
        # the id list quoted although a comma is not special to bash: unquoted, shellcheck reads it as a typo (SC2054)
        preflight=" ".join(f"'{a}'" if "," in a else shlex.quote(a) for a in PREFLIGHT),
        preflight_docker_flags=PREFLIGHT_DOCKER_FLAGS, submit=job.submit,
        fleet_preflight=" ".join(f"'{a}'" if "," in a else shlex.quote(a) for a in FLEET_PREFLIGHT),
        stall_after_s=math.ceil(spec.stall_report_after * 60) if spec.stall_report_after else 0,
        stall_report=" ".join(STALL_REPORT), stall_timeout_s=STALL_REPORT_TIMEOUT_S,
        runtime_env=json.dumps({"env_vars": dict(job.runtime_env)}))


def example_specs() -> dict[str, SlurmSpec]:
    """The scripts committed under slurm/ (one per runtime), regenerated by `rocmkit slurm --examples`."""
    common = dict(nodes=2, gpus_per_node=8, ray_version="2.55.1", partition="mi300x", time="04:00:00",
                  ib_hcas=("mlx5_0", "mlx5_1", "mlx5_2", "mlx5_3", "mlx5_4", "mlx5_5", "mlx5_8", "mlx5_9"),
                  cpus_per_task=96, overrides=("data.train_files=/data/gsm8k/train.parquet",
                                               "data.val_files=/data/gsm8k/test.parquet",
                                               "actor_rollout_ref.model.path=/models/Qwen2.5-7B-Instruct",
                                               "algorithm.adv_estimator=grpo", "actor_rollout_ref.rollout.name=vllm"))
    return {
        "verl-docker.sbatch": SlurmSpec(image="rocmkit/verl-vllm:rocm7.0.2-gfx942", runtime=Runtime.DOCKER, **common),
        "verl-apptainer.sbatch": SlurmSpec(image="/shared/images/verl-vllm-gfx942.sif", runtime=Runtime.APPTAINER, **common),
        "verl-none.sbatch": SlurmSpec(image=None, runtime=Runtime.NONE, **common),
    }
