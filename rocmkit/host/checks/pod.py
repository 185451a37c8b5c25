"""The doctor's pod mode (`--pod-gpus N`, the preflight init container `rocmkit kuberay` writes): the GPUs this pod can
open against the GPUs it requested.

Inside a Kubernetes pod, AMD's device plugin mounts /dev/kfd and the render nodes of the GPUs (or partitions) it
allocated, and sets no *_VISIBLE_DEVICES variable; sysfs and the KFD topology still list every GPU of the host
(ROCm/k8s-device-plugin, internal/pkg/plugin/plugin.go Allocate). So the pod's GPUs are the KFD GPU nodes whose
render node is here and opens, never the count sysfs gives. One unit of the plugin's resource is one KFD node
(a whole GPU with amd.com/gpu in SPX, one partition with a partition resource such as amd.com/cpx_nps4).
"""

from __future__ import annotations

from ..facts import Facts
from ..model import Status
from . import Context, documents, finding

PLUGIN_DOC = "https://instinct.docs.amd.com/projects/gpu-operator/en/latest/"


def openable(f: Facts) -> tuple[list[str], int]:
    """(render nodes of KFD GPU nodes that are here and open, GPU nodes sysfs lists)."""
    ok, listed = [], 0
    for d in f.devices:
        for minor in d.render_minors:
            listed += 1
            node = f.render.get(minor)
            if node is not None and node.exists and node.accessible:
                ok.append(f"/dev/dri/renderD{minor}")
    return ok, listed


@documents("pod.gpus", what="with --pod-gpus N (a Kubernetes pod): the GPUs the pod can open (render nodes of KFD GPU "
                            "nodes present and openable; sysfs lists all of the host's) equal the N it requested")
def check_pod_gpus(f: Facts, ctx: Context):
    wanted = ctx.pod_gpus
    if wanted is None:
        return
    ok, listed = openable(f)
    evidence = {"requested": wanted, "openable": len(ok), "listed_by_sysfs": listed, "render_nodes": ok}
    if not f.devices:
        yield finding("pod.gpus", "pod", Status.FAIL, f"the pod requested {wanted} GPU(s) and sysfs lists no AMD GPU "
                      "(no KFD topology)", fix="the node runs no amdgpu driver, or the pod is on a node without AMD "
                      "GPUs: check the job's node affinity and `kubectl describe node`", ref=PLUGIN_DOC, **evidence)
    elif len(ok) < wanted:
        yield finding("pod.gpus", "pod", Status.FAIL,
                      f"the pod requested {wanted} GPU(s) and can open {len(ok)} (sysfs lists {listed} on the host)",
                      fix="the device plugin allocated fewer GPUs than asked, or their render nodes do not open: "
                          "`kubectl describe node` (allocatable amd.com/gpu below capacity: an unhealthy GPU) and the "
                          "device plugin's log", ref=PLUGIN_DOC, **evidence)
    elif len(ok) > wanted:
        yield finding("pod.gpus", "pod", Status.FAIL,
                      f"the pod requested {wanted} GPU(s) and can open {len(ok)}: GPUs not allocated to it are "
                      "reachable (a privileged pod or /dev/dri mounted from the host)",
                      fix="drop privileged and hostPath /dev mounts: the device plugin alone must hand out GPUs, or "
                          "two jobs share them", ref=PLUGIN_DOC, **evidence)
    else:
        yield finding("pod.gpus", "pod", Status.PASS, f"the pod can open the {wanted} GPU(s) it requested "
                      f"(sysfs lists {listed} on the host)", **evidence)


CHECKS = [check_pod_gpus]
