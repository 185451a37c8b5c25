"""KubeRay manifests (ray.io/v1 RayJob, the plan's ConfigMap, optional RBAC) that run verl on AMD GPUs.

What a copied NVIDIA recipe gets wrong on AMD, and this does not (research/field-2026-12-07.md, KubeRay v1.7.0's
ray-operator/controllers/ray/common/pod.go):
- KubeRay sets `ray start --num-gpus` from the first container limit whose name ends in "gpu"; AMD's partition
  resources (`amd.com/cpx_nps4`, the device plugin's mixed naming) do not, and Ray would see 0 GPUs. Every group
  sets num-gpus itself, from the same number as the GPU limit.
- AMD's device plugin hands each container its own GPUs: an init container and the workload get the same ones only
  when both take all GPUs of the node (AMD GPU Operator, pre-start job test). The preflight init container requests
  exactly the main container's GPUs; the guide says to request all of a node's.
- The node labeller's `amd.com/gpu.family` is "AI" on MI300X and MI355X alike; the PCI device id tells gfx942 from
  gfx950, so the pods' node affinity lists the device ids of the arch's products (rocmkit's arch table).

The manifests are built as data and written as YAML by `dump_yaml` (every string double-quoted): no value can
become YAML structure, whatever it holds.
"""

from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field, replace

from .. import archs, raycompat
from ..certify import engines
from ..errors import UsageError
from ..stacks import IMAGE_RE
from .slurm import DEFAULT_ENGINE, HCA_RE, ray_amd_environment

API_VERSION = "ray.io/v1"
# The KubeRay release whose RayJob CRD the tests validate against (tests/data/kuberay/).
KUBERAY_VERSION = "v1.7.0"
DEFAULT_GPU_RESOURCE = "amd.com/gpu"
# The AMD GPU Operator's node labeller: the PCI device id of the node's GPUs, lower-case hex without 0x ("74a1").
DEVICE_ID_LABEL = "amd.com/gpu.device-id"
# KubeRay refuses longer RayJob names (utils.MaxRayJobNameLength: its RayCluster's name gets a suffix).
MAX_NAME = 47
NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")  # a DNS-1123 label, as Kubernetes names objects
# KubeRay asks more of a RayJob's name: a DNS-1035 label, which starts with a letter (utils.ValidateRayJobMetadata).
JOB_NAME_RE = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
# An extended resource: a domain, "/", then a name (Kubernetes' qualified name).
RESOURCE_RE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
QUANTITY_RE = re.compile(r"^[0-9]+(\.[0-9]+)?(Ki|Mi|Gi|Ti|Pi|Ei|k|M|G|T|P|E|m)?$")
LABEL_RE = re.compile(r"^([a-z0-9]([-a-z0-9.]*[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
LABEL_VALUE_RE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
ENV_RE = re.compile(r"^[A-Z_][A-Z0-9_]*$")
SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
PATH_RE = re.compile(r"^/[A-Za-z0-9_./-]*$")
PLAN_DIR = "/etc/rocmkit"  # the ConfigMap, read-only, in every Ray container and the preflight
REPORT_DIR = "/var/run/rocmkit"  # the preflight's document, on an emptyDir the Ray container sees too
RESERVED_PATHS = ("/", "/dev/shm", PLAN_DIR, REPORT_DIR)  # mounts of rocmkit's own a --pvc must not hide
# What the preflight init container runs on every Ray pod: the doctor's pod mode (GPUs the pod can open against
# the GPUs it requested), the arch, /dev/shm, memlock and the environment lint; non-zero stops the pod before Ray.
PREFLIGHT_IDS = ("pod", "gpu.kfd", "gpu.arch", "container.shm", "container.memlock", "env")


@dataclass(frozen=True)
class KubeRaySpec:
    nodes: int
    gpus_per_node: int
    image: str
    arch: str
    ray_version: str | None  # None only while the options are checked first (validate), before it is looked up
    job_name: str = "rocmkit-verl"
    namespace: str | None = None
    gpu_resource: str = DEFAULT_GPU_RESOURCE
    cpus_per_node: int | None = None
    memory_per_node: str | None = None  # a Kubernetes quantity, e.g. 1800Gi
    shm_size: str = "64Gi"
    ib_hcas: tuple[str, ...] = ()
    extra_env: dict[str, str] = field(default_factory=dict)
    node_selector: dict[str, str] = field(default_factory=dict)
    volumes: dict[str, str] = field(default_factory=dict)  # PersistentVolumeClaim -> mount path (data, models)
    entrypoint: tuple[str, ...] = ()  # empty: verl's main_ppo
    overrides: tuple[str, ...] = ()
    preflight: bool = True
    active_deadline_s: int | None = None  # the whole job, from its start (RayJob activeDeadlineSeconds)
    pre_running_deadline_s: int = 1800  # never scheduled or never Running within this: the job fails
    ttl_s: int = 600  # the finished job's cluster is kept this long for its logs
    service_account: str | None = None
    rbac: bool = False

    @property
    def noset_var(self) -> str:
        return raycompat.noset_variable(self.ray_version)

    @property
    def job(self):
        return engines.cluster_engines()[DEFAULT_ENGINE].cluster


def validate(spec: KubeRaySpec) -> KubeRaySpec:
    """Every value that reaches a manifest, checked; a bad one is a UsageError naming the option."""
    if spec.nodes < 1:
        raise UsageError(f"--nodes {spec.nodes}: at least 1")
    if spec.gpus_per_node < 1:
        raise UsageError(f"--gpus-per-node {spec.gpus_per_node}: at least 1 (the job runs on AMD GPUs)")
    if not IMAGE_RE.match(spec.image or ""):
        raise UsageError(f"--image {spec.image!r} is not an image reference")
    arch = archs.get_arch(spec.arch)
    if arch.vendor != "amd" or not device_ids(arch.name):
        raise UsageError(f"--arch {spec.arch}: not an AMD GPU arch with known PCI ids",
                         hint="gfx942 (MI300X, MI325X) or gfx950 (MI350X, MI355X)")
    spec = replace(spec, arch=arch.name)
    if len(spec.job_name) > MAX_NAME or not JOB_NAME_RE.match(spec.job_name):
        raise UsageError(f"--job-name {spec.job_name!r}: a letter, then lower-case letters, digits and -, at most "
                         f"{MAX_NAME} characters (KubeRay's rules for a RayJob's name)")
    if spec.namespace is not None and (len(spec.namespace) > 63 or not NAME_RE.match(spec.namespace)):
        raise UsageError(f"--namespace {spec.namespace!r}: a DNS label (lower-case letters, digits, -)")
    if spec.service_account is not None and (len(spec.service_account) > 63 or
                                             not NAME_RE.match(spec.service_account)):
        raise UsageError(f"--service-account {spec.service_account!r}: a DNS label")
    if not RESOURCE_RE.match(spec.gpu_resource):
        raise UsageError(f"--gpu-resource {spec.gpu_resource!r} is not an extended resource name",
                         hint="amd.com/gpu, or a partition resource of the device plugin such as amd.com/cpx_nps4")
    for option, value in (("--memory-per-node", spec.memory_per_node), ("--shm-size", spec.shm_size)):
        if value is not None and not QUANTITY_RE.match(value):
            raise UsageError(f"{option} {value!r}: a Kubernetes quantity", hint="e.g. 64Gi or 1800Gi")
    if spec.cpus_per_node is not None and spec.cpus_per_node < 1:
        raise UsageError(f"--cpus-per-node {spec.cpus_per_node}: at least 1")
    for h in spec.ib_hcas:
        if not HCA_RE.match(h):
            raise UsageError(f"--ib-hcas: {h!r} is not an HCA name", hint="e.g. mlx5_0,mlx5_1")
    for k in spec.extra_env:
        if not ENV_RE.match(k):
            raise UsageError(f"--env {k!r}: not an environment variable name")
    for k, v in spec.node_selector.items():
        if not LABEL_RE.match(k) or not LABEL_VALUE_RE.match(v):
            raise UsageError(f"--node-selector {k}={v}: not a label key=value")
    for option, value in (("--active-deadline", spec.active_deadline_s),
                          ("--pre-running-deadline", spec.pre_running_deadline_s), ("--ttl", spec.ttl_s)):
        if value is not None and not (0 if option == "--ttl" else 1) <= value <= 2**31 - 1:
            raise UsageError(f"{option} {value}: seconds, " + ("0 or more" if option == "--ttl" else "at least 1"))
    if spec.active_deadline_s and spec.active_deadline_s <= spec.pre_running_deadline_s:
        raise UsageError(f"--active-deadline {spec.active_deadline_s} is not after --pre-running-deadline "
                         f"{spec.pre_running_deadline_s}", hint="the job's whole time must exceed its time to start")
    for claim, path in spec.volumes.items():
        if len(claim) > 253 or not SUBDOMAIN_RE.match(claim):
            raise UsageError(f"--pvc {claim}: not a PersistentVolumeClaim name")
        if not PATH_RE.match(path) or ".." in path.split("/") or path.rstrip("/") in RESERVED_PATHS:
            raise UsageError(f"--pvc {claim}={path}: an absolute path in the container, not "
                             + ", ".join(RESERVED_PATHS))
    if spec.rbac and not spec.service_account:
        raise UsageError("--rbac makes a ServiceAccount for the pods", hint="add --service-account NAME")
    if not spec.entrypoint:
        spec = replace(spec, entrypoint=spec.job.entrypoint)
    for o in spec.overrides:
        spec.job.check_argument(o)
    if spec.ray_version is not None:
        try:
            raycompat.noset_variable(spec.ray_version)
        except ValueError as exc:
            raise UsageError(f"--ray-version: {exc}") from None
    return spec


def device_ids(arch: str) -> list[str]:
    """The node labeller's values of DEVICE_ID_LABEL for the GPUs of `arch` (VFs too), sorted."""
    return sorted({i.lower().removeprefix("0x") for p in archs.get_arch(arch).products for i in p.pci_ids})


def environment(spec: KubeRaySpec) -> list[dict]:
    # No HIP_VISIBLE_DEVICES, unlike the Slurm job: AMD's device plugin sets no *_VISIBLE_DEVICES variable (it
    # mounts the allocated render nodes), so there is none for Ray >= 2.45 to trip over.
    return [{"name": k, "value": v} for k, v, _ in
            ray_amd_environment(spec.noset_var, spec.ray_version, spec.ib_hcas, spec.extra_env)]


def plan(spec: KubeRaySpec) -> dict:
    """The job's plan, as the ConfigMap carries it to every pod."""
    return {"schema": "rocmkit.kuberay-plan/v1", "job": spec.job_name, "image": spec.image, "arch": spec.arch,
            "nodes": spec.nodes, "gpus_per_node": spec.gpus_per_node, "gpu_resource": spec.gpu_resource,
            "ray_version": spec.ray_version, "overrides": list(spec.overrides)}


def _resources(spec: KubeRaySpec) -> dict:
    # Limits only: Kubernetes takes an extended resource's request from its limit, and the two must be equal.
    limits = {spec.gpu_resource: str(spec.gpus_per_node)}
    if spec.cpus_per_node:
        limits["cpu"] = str(spec.cpus_per_node)
    if spec.memory_per_node:
        limits["memory"] = spec.memory_per_node
    return {"limits": limits}


def _preflight(spec: KubeRaySpec) -> dict:
    command = ["rocmkit", "doctor", "--pod-gpus", str(spec.gpus_per_node), "--arch", spec.arch,
               "--only", ",".join(PREFLIGHT_IDS), "--report", f"{REPORT_DIR}/preflight.json"]
    return {"name": "rocmkit-preflight", "image": spec.image, "command": command, "env": environment(spec),
            # the same GPUs as the Ray container: with all of the node's requested, the device plugin gives both
            # the same ones, so the preflight checks the GPUs Ray will use
            "resources": _resources(spec),
            "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"},
                             {"name": "rocmkit-plan", "mountPath": PLAN_DIR, "readOnly": True},
                             {"name": "rocmkit-report", "mountPath": REPORT_DIR}]}


def _pod(spec: KubeRaySpec, head: bool) -> dict:
    ports = [{"containerPort": 6379, "name": "gcs-server"}, {"containerPort": 8265, "name": "dashboard"},
             {"containerPort": 10001, "name": "client"}] if head else []
    ray = {"name": "ray-head" if head else "ray-worker", "image": spec.image, "env": environment(spec),
           "resources": _resources(spec),
           "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"},
                            {"name": "rocmkit-plan", "mountPath": PLAN_DIR, "readOnly": True},
                            {"name": "rocmkit-report", "mountPath": REPORT_DIR, "readOnly": True}]
           + [{"name": f"data-{i}", "mountPath": path} for i, path in enumerate(spec.volumes.values())]}
    if ports:
        ray["ports"] = ports
    pod = {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
            {"matchExpressions": [{"key": DEVICE_ID_LABEL, "operator": "In", "values": device_ids(spec.arch)}]}]}}},
        "containers": [ray],
        "volumes": [
            # Ray's object store and RCCL's shared memory: Kubernetes gives a container 64 MiB of /dev/shm otherwise
            {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": spec.shm_size}},
            {"name": "rocmkit-plan", "configMap": {"name": plan_name(spec)}},
            {"name": "rocmkit-report", "emptyDir": {}}]
        + [{"name": f"data-{i}", "persistentVolumeClaim": {"claimName": claim}}
           for i, claim in enumerate(spec.volumes)],
    }
    if spec.preflight:
        pod["initContainers"] = [_preflight(spec)]
    if spec.node_selector:
        pod["nodeSelector"] = dict(sorted(spec.node_selector.items()))
    if spec.service_account:
        pod["serviceAccountName"] = spec.service_account
    return {"metadata": {"labels": {"app.kubernetes.io/managed-by": "rocmkit", "rocmkit.io/job": spec.job_name}},
            "spec": pod}


def _ray_start(spec: KubeRaySpec, head: bool) -> dict:
    params = {"num-gpus": str(spec.gpus_per_node)}  # set here, so a partition resource does not give Ray 0 GPUs
    if spec.cpus_per_node:
        params["num-cpus"] = str(spec.cpus_per_node)
    if head:
        params["dashboard-host"] = "0.0.0.0"
    return params


def plan_name(spec: KubeRaySpec) -> str:
    return f"{spec.job_name}-plan"


def entrypoint(spec: KubeRaySpec) -> str:
    """The driver's command line, as KubeRay passes it to `ray job submit` (a shell reads it: quoted)."""
    return shlex.join(spec.job.driver(spec.overrides, spec.entrypoint, spec.nodes, spec.gpus_per_node))


def manifests(spec: KubeRaySpec) -> list[dict]:
    spec = validate(spec)
    if spec.ray_version is None:
        raise ValueError("manifests need the spec's Ray version")  # a caller's bug: the CLI always looks it up
    meta = {"name": spec.job_name, "labels": {"app.kubernetes.io/managed-by": "rocmkit"}}
    if spec.namespace:
        meta["namespace"] = spec.namespace
    cluster = {"rayVersion": spec.ray_version,
               "headGroupSpec": {"rayStartParams": _ray_start(spec, True), "template": _pod(spec, True)},
               "workerGroupSpecs": [{"groupName": "gpu", "replicas": spec.nodes - 1, "minReplicas": spec.nodes - 1,
                                     "maxReplicas": spec.nodes - 1, "rayStartParams": _ray_start(spec, False),
                                     "template": _pod(spec, False)}]}
    job = {"entrypoint": entrypoint(spec), "shutdownAfterJobFinishes": True,
           "ttlSecondsAfterFinished": spec.ttl_s, "backoffLimit": 0, "submissionMode": "K8sJobMode",
           "preRunningDeadlineSeconds": spec.pre_running_deadline_s, "rayClusterSpec": cluster}
    if spec.active_deadline_s:
        job["activeDeadlineSeconds"] = spec.active_deadline_s
    # The submitter pod too, so the RBAC covers every pod of the job; its container without a command, which
    # KubeRay fills with `ray job submit` (v1.7.0 rayjob_controller.go, configureSubmitterContainer).
    if spec.service_account:
        job["submitterPodTemplate"] = {"spec": {"serviceAccountName": spec.service_account, "restartPolicy": "Never",
                                                "containers": [{"name": "ray-job-submitter", "image": spec.image}]}}
    cm_meta = {**meta, "name": plan_name(spec)}
    docs = [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": cm_meta,
             "data": {"plan.json": json.dumps(plan(spec), indent=2, sort_keys=True) + "\n"}}]
    if spec.rbac:
        docs += rbac(spec, meta)
    docs.append({"apiVersion": API_VERSION, "kind": "RayJob", "metadata": meta, "spec": job})
    return docs


def rbac(spec: KubeRaySpec, meta: dict) -> list[dict]:
    """A ServiceAccount for the job's pods, allowed to read its own pods and post events (the preflight's report
    and AMD's pre-start test report through events) and nothing else."""
    name = spec.service_account
    sa_meta = {**meta, "name": name}
    return [{"apiVersion": "v1", "kind": "ServiceAccount", "metadata": sa_meta},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": sa_meta,
             "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
                       {"apiGroups": [""], "resources": ["events"], "verbs": ["create"]}]},
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": sa_meta,
             "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
             "subjects": [{"kind": "ServiceAccount", "name": name,
                           **({"namespace": spec.namespace} if spec.namespace else {})}]}]


def render(spec: KubeRaySpec) -> str:
    spec = validate(spec)
    head = (f"# rocmkit kuberay: verl on {spec.nodes} node(s) x {spec.gpus_per_node} {spec.gpu_resource} "
            f"({spec.arch}), Ray {spec.ray_version}, for KubeRay {API_VERSION} (schema of {KUBERAY_VERSION})\n"
            f"# apply with: kubectl apply -f FILE; follow: kubectl get rayjob {spec.job_name} -w\n")
    return head + "".join("---\n" + dump_yaml(d) for d in manifests(spec))


def dump_yaml(value, indent: int = 0) -> str:
    """Block YAML of dicts, lists, str, int and bool; strings and keys double-quoted (JSON's escapes are YAML's), so
    a value never turns into YAML syntax."""
    pad = " " * indent
    if isinstance(value, dict):
        if not value:
            return pad + "{}\n"
        out = []
        for k, v in value.items():
            key = k if re.match(r"^[A-Za-z][A-Za-z0-9]*$", k) else json.dumps(k)
            if isinstance(v, (dict, list)) and v:
                out.append(f"{pad}{key}:\n" + dump_yaml(v, indent + 2))
            else:
                out.append(f"{pad}{key}: {_scalar(v)}\n")
        return "".join(out)
    if isinstance(value, list):
        if not value:
            return pad + "[]\n"
        out = []
        for item in value:
            nested = isinstance(item, (dict, list)) and item
            text = dump_yaml(item, indent + 2) if nested else f"{pad}  {_scalar(item)}\n"
            out.append(f"{pad}- " + text[indent + 2:])
        return "".join(out)
    return pad + _scalar(value) + "\n"


def _scalar(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, str):
        return json.dumps(v)
    if v == {} or v == []:
        return json.dumps(v)
    raise TypeError(f"not a manifest value: {v!r}")


def example_specs() -> dict[str, KubeRaySpec]:
    """The manifests committed under kuberay/, regenerated by `rocmkit kuberay --examples kuberay`."""
    common = dict(nodes=2, gpus_per_node=8, ray_version="2.55.1", job_name="verl-grpo", namespace="rl",
                  cpus_per_node=96, memory_per_node="1600Gi", active_deadline_s=4 * 3600,
                  volumes={"rl-data": "/data", "models": "/models"},
                  overrides=("data.train_files=/data/gsm8k/train.parquet", "data.val_files=/data/gsm8k/test.parquet",
                             "actor_rollout_ref.model.path=/models/Qwen2.5-7B-Instruct",
                             "algorithm.adv_estimator=grpo", "actor_rollout_ref.rollout.name=vllm"))
    return {
        "verl-gfx942.yaml": KubeRaySpec(image="rocmkit/verl-vllm:rocm7.0.2-gfx942", arch="gfx942", **common),
        "verl-gfx950-spx.yaml": KubeRaySpec(image="rocmkit/verl-vllm:rocm7.0.2-gfx950", arch="gfx950",
                                            gpu_resource="amd.com/spx_nps1", service_account="verl-grpo", rbac=True,
                                            **common),
    }
