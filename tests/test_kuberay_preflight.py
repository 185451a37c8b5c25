"""The doctor's pod mode (`doctor --pod-gpus N`, the rocmkit-preflight init container of `rocmkit kuberay`) on
pod-shaped trees from the project's generator: sysfs and the KFD topology list every GPU of the host, /dev/dri holds
only the render nodes AMD's device plugin allocated to the pod."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from treegen import HostSpec, write_tree

from rocmkit.cli import cli
from rocmkit.cluster import kuberay


def doctor(root, *args):
    return CliRunner().invoke(cli, ["doctor", "--root", str(root), *args])


def pod_tree(tmp_path, allocated: int, **kw):
    """A pod on an 8-GPU MI300X node given the first `allocated` GPUs."""
    return write_tree(tmp_path / "pod", HostSpec(container=True, missing_render=tuple(range(allocated, 8)), **kw))


def test_a_pod_given_fewer_gpus_than_it_asked_for_is_stopped(tmp_path):
    root = pod_tree(tmp_path, 6)
    report = tmp_path / "preflight.json"
    r = doctor(root, "--pod-gpus", "8", "--only", "pod", "--report", str(report))
    assert r.exit_code == 1, r.output
    assert "the pod requested 8 GPU(s) and can open 6 (sysfs lists 8 on the host)" in r.output
    (f,) = json.loads(report.read_text())["findings"]
    assert f["id"] == "pod.gpus" and f["status"] == "fail" and f["evidence"]["openable"] == 6


def test_a_pod_given_what_it_asked_for_passes_the_preflight(tmp_path):
    root = pod_tree(tmp_path, 4)
    s = kuberay.KubeRaySpec(nodes=2, gpus_per_node=4, image="img:1", arch="gfx942", ray_version="2.55.1")
    (init,) = kuberay.manifests(s)[-1]["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["initContainers"]
    args = init["command"][2:]  # the init container's own doctor options
    report = tmp_path / "preflight.json"
    args[args.index("--report") + 1] = str(report)
    r = doctor(root, *args)
    assert r.exit_code == 0, r.output
    doc = json.loads(report.read_text())
    assert doc["schema"].startswith("rocmkit.doctor") and not [f for f in doc["findings"] if f["status"] == "fail"]
    assert {"pod.gpus", "gpu.arch"} <= {f["id"] for f in doc["findings"]}


def test_absent_render_nodes_of_other_pods_gpus_are_not_failures(tmp_path):
    root = pod_tree(tmp_path, 4)
    # without pod mode they are missing render nodes (a warning in a captured tree, a failure on a live host)
    assert doctor(root, "--only", "gpu.render", "--strict").exit_code == 1
    r = doctor(root, "--pod-gpus", "4", "--only", "gpu.render,pod", "--json")
    assert r.exit_code == 0, r.output
    found = {f["id"]: f for f in json.loads(r.output)["findings"]}
    assert "not allocated to this pod" in found["gpu.render"]["title"] and found["pod.gpus"]["status"] == "pass"


def test_a_pod_reaching_more_gpus_than_it_asked_for_fails(tmp_path):
    r = doctor(pod_tree(tmp_path, 8), "--pod-gpus", "2", "--only", "pod")
    assert r.exit_code == 1 and "can open 8: GPUs not allocated to it are reachable" in r.output


def test_partitions_count_as_the_plugins_units(tmp_path):
    # amd.com/cpx_nps4-style resources: one unit is one CPX partition (one KFD node, one render node)
    root = write_tree(tmp_path / "cpx", HostSpec(container=True, mode="CPX", memory_mode="NPS4",
                                                  missing_render=tuple(range(1, 8))))
    r = doctor(root, "--pod-gpus", "8", "--only", "pod", "--json")
    assert r.exit_code == 0, r.output
    (f,) = json.loads(r.output)["findings"]
    assert f["evidence"]["openable"] == 8 and f["evidence"]["listed_by_sysfs"] == 64


@pytest.mark.parametrize("extra", [["--image", "img:1"], ["--compare", "a", "b"]])
def test_pod_mode_is_for_this_host_only(tmp_path, extra):
    for name in ("a", "b"):
        (tmp_path / name).write_text("{}")
    r = CliRunner().invoke(cli, ["doctor", "--pod-gpus", "2", *[str(tmp_path / e) if e in "ab" else e for e in extra]])
    assert r.exit_code == 2 and "--pod-gpus and --report" in r.output


def test_two_pods_reports_compare(tmp_path):
    """The preflight's --report documents are doctor runs: `doctor --compare` names what one pod lacks."""
    reports = []
    for name, allocated in (("a", 4), ("b", 3)):
        root = write_tree(tmp_path / name, HostSpec(container=True, missing_render=tuple(range(allocated, 8))))
        reports.append(tmp_path / f"{name}.json")
        doctor(root, "--pod-gpus", "4", "--only", "pod", "--report", str(reports[-1]))
    r = CliRunner().invoke(cli, ["doctor", "--compare", *map(str, reports)])
    assert r.exit_code == 1 and "pod.gpus (pass → fail)" in r.output
