"""The cluster-level check before a `rocmkit kuberay` job (`rocmkit kuberay --check-cluster`): can this Kubernetes
cluster run it? Read through `kubectl get ... -o json` (no client library: kubectl is what a user who applies the
job has, with their kubeconfig), or from files that command wrote (`--cluster-json DIR`); judged here, on data.

What is judged (research/field-2026-12-07.md, "What preflight means on K8s", layer 1):
- KubeRay's RayJob CRD is installed, serves ray.io/v1, and its schema has the fields the job sets (a KubeRay too
  old for preRunningDeadlineSeconds would drop it silently: the API server prunes unknown fields);
- the KubeRay operator runs, and its version (its image's tag);
- AMD's device plugin DaemonSet is ready on every node it is scheduled to;
- each GPU node's allocatable GPUs equal its capacity (the device plugin takes an unhealthy GPU out of allocatable);
- enough nodes are Ready, carry the node labeller's device id of the image's arch, have the GPUs per node free of
  taints the job does not tolerate (it tolerates none).
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from ..errors import EnvironmentMissing, UsageError
from ..host.model import Finding, Status
from .kuberay import DEVICE_ID_LABEL, KubeRaySpec, device_ids

CRD_NAME = "rayjobs.ray.io"
# What `rocmkit kuberay` writes into a RayJob's spec, and into its groups: the cluster's CRD must know each.
JOB_FIELDS = ("entrypoint", "shutdownAfterJobFinishes", "ttlSecondsAfterFinished", "backoffLimit", "submissionMode",
              "preRunningDeadlineSeconds", "activeDeadlineSeconds", "rayClusterSpec", "submitterPodTemplate")
# The files --cluster-json reads, and the kubectl command each one is the output of.
QUERIES = {
    "crd.json": ("get", "crd", CRD_NAME, "-o", "json"),
    "nodes.json": ("get", "nodes", "-o", "json"),
    "daemonsets.json": ("get", "daemonsets", "--all-namespaces", "-o", "json"),
    "deployments.json": ("get", "deployments", "--all-namespaces", "-o", "json"),
}
KUBECTL_TIMEOUT = 60


def read_live(kubectl: str = "kubectl") -> dict[str, dict | None]:
    """The cluster's objects through kubectl; a CRD that is not there is None (a finding, not an error)."""
    out = {}
    for name, args in QUERIES.items():
        try:
            r = subprocess.run([kubectl, *args], capture_output=True, text=True, timeout=KUBECTL_TIMEOUT)
        except FileNotFoundError:
            raise EnvironmentMissing(f"no {kubectl} to read the cluster with",
                                     hint="install kubectl, or give --cluster-json DIR (`kubectl get -o json` files)")
        except subprocess.TimeoutExpired:
            raise EnvironmentMissing(f"`{kubectl} {' '.join(args)}` did not answer within {KUBECTL_TIMEOUT} s",
                                     hint="check the kubeconfig's cluster (`kubectl cluster-info`)") from None
        if r.returncode != 0:
            if name == "crd.json" and "NotFound" in r.stderr:
                out[name] = None
                continue
            said = [line for line in r.stderr.splitlines() if line.strip()]  # kubectl's last line says it plainly
            raise EnvironmentMissing(f"`{kubectl} {' '.join(args)}` failed: {said[-1] if said else r.returncode}",
                                     hint="check the kubeconfig's cluster and your access (`kubectl auth can-i`)")
        out[name] = json.loads(r.stdout)
    return out


def read_files(folder: str) -> dict[str, dict | None]:
    out = {}
    for name, args in QUERIES.items():
        path = Path(folder) / name
        if not path.is_file():
            if name == "crd.json":
                out[name] = None
                continue
            raise UsageError(f"--cluster-json {folder}: no {name}", hint=f"write it with `kubectl {' '.join(args)}`")
        try:
            out[name] = json.loads(path.read_text())
        except ValueError as exc:
            raise UsageError(f"--cluster-json {folder}: {name} is not JSON ({exc})") from None
    return out


def _f(id: str, status: Status, title: str, fix: str | None = None, **evidence) -> Finding:
    return Finding(id=id, area="cluster", status=status, title=title, evidence=evidence, fix=fix)


def check(spec: KubeRaySpec, objects: dict[str, dict | None]) -> list[Finding]:
    return [*_crd(objects["crd.json"]), *_operator(objects["deployments.json"]),
            *_device_plugin(objects["daemonsets.json"]), *_nodes(spec, objects["nodes.json"])]


def _crd(crd: dict | None) -> list[Finding]:
    if crd is None:
        return [_f("cluster.kuberay.crd", Status.FAIL, f"no {CRD_NAME} CRD: KubeRay is not installed",
                   fix="helm install kuberay-operator kuberay/kuberay-operator (KubeRay's docs)")]
    versions = {v.get("name"): v for v in crd.get("spec", {}).get("versions", [])}
    v1 = versions.get("v1")
    if not v1 or not v1.get("served"):
        return [_f("cluster.kuberay.crd", Status.FAIL, f"{CRD_NAME} does not serve ray.io/v1 (versions: "
                   f"{sorted(versions)})", fix="upgrade KubeRay to 1.7 or later")]
    props = v1.get("schema", {}).get("openAPIV3Schema", {}).get("properties", {}).get("spec", {}).get("properties", {})
    missing = [k for k in JOB_FIELDS if k not in props]
    if missing:
        return [_f("cluster.kuberay.crd", Status.FAIL, f"the cluster's RayJob CRD lacks {', '.join(missing)}: the API "
                   "server would drop them from the job", fix="upgrade KubeRay (its CRDs too: helm does not upgrade "
                   "CRDs; `kubectl replace -f` the release's crds/)", missing=missing)]
    return [_f("cluster.kuberay.crd", Status.PASS, f"{CRD_NAME} serves ray.io/v1 with every field the job sets")]


def _containers(obj: dict) -> list[dict]:
    return obj.get("spec", {}).get("template", {}).get("spec", {}).get("containers", [])


def _operator(deployments: dict) -> list[Finding]:
    found = [d for d in deployments.get("items", []) if any("kuberay/operator" in c.get("image", "")
                                                           for c in _containers(d))]
    if not found:
        return [_f("cluster.kuberay.operator", Status.FAIL, "no KubeRay operator Deployment (an image "
                   "kuberay/operator) in any namespace", fix="install the kuberay-operator Helm chart")]
    d = found[0]
    image = next(c["image"] for c in _containers(d) if "kuberay/operator" in c.get("image", ""))
    version = image.rsplit(":", 1)[-1] if ":" in image.rsplit("/", 1)[-1] else "unknown"
    ready = d.get("status", {}).get("readyReplicas", 0) or 0
    where = f"{d['metadata'].get('namespace')}/{d['metadata']['name']}"
    if ready < 1:
        return [_f("cluster.kuberay.operator", Status.FAIL, f"the KubeRay operator {where} ({version}) has no ready "
                   "replica", fix=f"kubectl -n {d['metadata'].get('namespace')} describe deployment "
                   f"{d['metadata']['name']}", version=version)]
    return [_f("cluster.kuberay.operator", Status.PASS, f"KubeRay operator {version} ready ({where})",
               version=version)]


def _device_plugin(daemonsets: dict) -> list[Finding]:
    found = [d for d in daemonsets.get("items", []) if any("k8s-device-plugin" in c.get("image", "")
                                                          for c in _containers(d))]
    if not found:
        return [_f("cluster.device_plugin", Status.FAIL, "no AMD GPU device plugin DaemonSet (an image "
                   "rocm/k8s-device-plugin) in any namespace", fix="install AMD's GPU Operator (its DeviceConfig "
                   "deploys the device plugin and the node labeller)")]
    out = []
    for d in found:
        st = d.get("status", {})
        want, ready = st.get("desiredNumberScheduled", 0), st.get("numberReady", 0)
        where = f"{d['metadata'].get('namespace')}/{d['metadata']['name']}"
        status = Status.PASS if want and ready == want else Status.FAIL
        out.append(_f("cluster.device_plugin", status, f"device plugin {where}: {ready} of {want} pod(s) ready",
                      fix=None if status is Status.PASS else f"kubectl -n {d['metadata'].get('namespace')} get pods "
                      "-o wide: a node whose plugin is not ready offers no GPUs", desired=want, ready=ready))
    return out


def _quantity(value) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


def _nodes(spec: KubeRaySpec, nodes: dict) -> list[Finding]:
    ids, res = set(device_ids(spec.arch)), spec.gpu_resource
    out, fit, short = [], [], []
    gpu_nodes = [n for n in nodes.get("items", []) if _quantity(n.get("status", {}).get("capacity", {}).get(res)) > 0]
    if not gpu_nodes:
        return [_f("cluster.nodes", Status.FAIL, f"no node offers {res}", fix="check the device plugin's resource "
                   "naming (amd.com/gpu with `single`, partition names with `mixed`) and --gpu-resource")]
    for n in gpu_nodes:
        name, st = n["metadata"]["name"], n.get("status", {})
        cap, alloc = _quantity(st["capacity"][res]), _quantity(st.get("allocatable", {}).get(res))
        if alloc != cap:
            short.append(f"{name} ({alloc} of {cap})")
        ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in st.get("conditions", []))
        label = n["metadata"].get("labels", {}).get(DEVICE_ID_LABEL)
        taints = [f"{t['key']}:{t.get('effect')}" for t in n.get("spec", {}).get("taints", [])
                  if t.get("effect") in ("NoSchedule", "NoExecute")]
        if n.get("spec", {}).get("unschedulable"):
            taints.append("unschedulable (cordoned)")
        why = [] if ready else ["not Ready"]
        if label not in ids:
            why.append(f"{DEVICE_ID_LABEL}={label} is not {spec.arch}")
        if alloc < spec.gpus_per_node:
            why.append(f"{alloc} allocatable {res}, the job asks {spec.gpus_per_node}")
        labels = n["metadata"].get("labels", {})
        if any(labels.get(k) != v for k, v in spec.node_selector.items()):
            why.append("not matched by --node-selector")
        why += [f"taint {t}" for t in taints]
        (out if why else fit).append((name, why))
    findings = []
    if short:
        findings.append(_f("cluster.gpus.allocatable", Status.FAIL, f"allocatable {res} below capacity on "
                           f"{', '.join(short)}: the device plugin marked GPUs unhealthy", fix="kubectl describe node "
                           "NAME; the GPU Operator's health (device-metrics-exporter) says which GPU", nodes=short))
    else:
        findings.append(_f("cluster.gpus.allocatable", Status.PASS, f"allocatable {res} equals capacity on all "
                           f"{len(gpu_nodes)} GPU node(s)"))
    excluded = {name: why for name, why in out}
    status = Status.PASS if len(fit) >= spec.nodes else Status.FAIL
    findings.append(_f("cluster.nodes", status, f"{len(fit)} node(s) can take a pod of the job ({spec.arch}, "
                       f"{spec.gpus_per_node} {res}, no taint it does not tolerate); it needs {spec.nodes}",
                       fix=None if status is Status.PASS else "see excluded: " + "; ".join(
                           f"{k}: {', '.join(v)}" for k, v in list(excluded.items())[:6]),
                       fit=[name for name, _ in fit], excluded=excluded))
    return findings
