"""`rocmkit kuberay --check-cluster` on API objects (tests/data/kuberay/cluster/, README there): no cluster runs here,
so the check is judged on `kubectl get -o json` answers, and the kubectl reading path on a stand-in kubectl that
prints them."""

from __future__ import annotations

import json
import shutil
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from rocmkit.cli import cli
from rocmkit.cluster import k8s_check
from rocmkit.cluster.kuberay import KubeRaySpec

DATA = Path(__file__).parent / "data" / "kuberay"
SCHEMA = json.loads((DATA / "rayjob-crd-v1.7.0.json").read_text())["openAPIV3Schema"]


def crd(schema=SCHEMA, served=True) -> dict:
    return {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "rayjobs.ray.io"},
            "spec": {"group": "ray.io", "names": {"kind": "RayJob", "plural": "rayjobs"}, "scope": "Namespaced",
                     "versions": [{"name": "v1", "served": served, "storage": True,
                                   "schema": {"openAPIV3Schema": schema}}]}}


def objects(**replace) -> dict:
    out = {name: json.loads((DATA / "cluster" / name).read_text()) for name in k8s_check.QUERIES if name != "crd.json"}
    out["crd.json"] = crd()
    out.update(replace)
    return out


def spec(**kw):
    return KubeRaySpec(**{**dict(nodes=2, gpus_per_node=8, image="img:1", arch="gfx942", ray_version=None), **kw})


def by_id(findings):
    return {f.id: f for f in findings}


def test_the_recorded_cluster():
    found = by_id(k8s_check.check(spec(), objects()))
    assert found["cluster.kuberay.crd"].status.value == "pass"
    assert found["cluster.kuberay.operator"].evidence["version"] == "v1.7.1"
    assert found["cluster.device_plugin"].title.endswith("5 of 5 pod(s) ready")
    # mi300x-2 has 7 of its 8 GPUs allocatable: an unhealthy GPU
    assert found["cluster.gpus.allocatable"].status.value == "fail"
    assert "mi300x-2 (7 of 8)" in found["cluster.gpus.allocatable"].title
    nodes = found["cluster.nodes"]
    assert nodes.status.value == "pass" and nodes.evidence["fit"] == ["mi300x-0", "mi300x-1"]
    assert nodes.evidence["excluded"]["mi300x-3"] == ["taint maintenance:NoSchedule"]
    assert "is not gfx942" in nodes.evidence["excluded"]["mi355x-0"][0]


@pytest.mark.parametrize("kw,fit", [(dict(nodes=3), 2), (dict(arch="gfx950", image="img:1"), 1),
                                    (dict(node_selector={"pool": "a"}), 0)])
def test_too_few_nodes_fit(kw, fit):
    f = by_id(k8s_check.check(spec(**kw), objects()))["cluster.nodes"]
    assert len(f.evidence["fit"]) == fit
    assert f.status.value == ("pass" if fit >= spec(**kw).nodes else "fail")


def test_a_kuberay_without_the_fields_the_job_sets():
    schema = json.loads(json.dumps(SCHEMA))
    del schema["properties"]["spec"]["properties"]["preRunningDeadlineSeconds"]
    f = by_id(k8s_check.check(spec(), objects(**{"crd.json": crd(schema)})))["cluster.kuberay.crd"]
    assert f.status.value == "fail" and f.evidence["missing"] == ["preRunningDeadlineSeconds"]
    f = by_id(k8s_check.check(spec(), objects(**{"crd.json": None})))["cluster.kuberay.crd"]
    assert f.status.value == "fail" and "not installed" in f.title
    f = by_id(k8s_check.check(spec(), objects(**{"crd.json": crd(served=False)})))["cluster.kuberay.crd"]
    assert f.status.value == "fail"


def test_device_plugin_not_ready_and_no_operator():
    ds = objects()["daemonsets.json"]
    ds["items"][0]["status"]["numberReady"] = 4
    found = by_id(k8s_check.check(spec(), objects(**{"daemonsets.json": ds, "deployments.json": {"items": []}})))
    assert found["cluster.device_plugin"].status.value == "fail" and "4 of 5" in found["cluster.device_plugin"].title
    assert found["cluster.kuberay.operator"].status.value == "fail"


def test_partition_resources_are_counted_by_their_name():
    f = by_id(k8s_check.check(spec(gpu_resource="amd.com/cpx_nps4"), objects()))["cluster.nodes"]
    assert f.status.value == "fail" and "no node offers amd.com/cpx_nps4" in f.title


def write_cluster(folder: Path, **replace) -> Path:
    folder.mkdir()
    for name, obj in objects(**replace).items():
        if obj is not None:
            (folder / name).write_text(json.dumps(obj))
    return folder


def test_cli_reads_the_cluster_files(tmp_path):
    folder = write_cluster(tmp_path / "c")
    args = ["kuberay", "--nodes", "2", "--image", "img:1", "--arch", "gfx942", "--check-cluster"]
    r = CliRunner().invoke(cli, [*args, "--cluster-json", str(folder), "--json"])
    assert r.exit_code == 1, r.output  # the unhealthy GPU of mi300x-2
    doc = json.loads(r.output)
    assert doc["schema"] == "rocmkit.kuberay-check/v1" and doc["exit_code"] == 1
    healthy = objects()["nodes.json"]
    healthy["items"][2]["status"]["allocatable"]["amd.com/gpu"] = "8"
    folder = write_cluster(tmp_path / "h", **{"nodes.json": healthy})
    r = CliRunner().invoke(cli, [*args, "--cluster-json", str(folder)])
    assert r.exit_code == 0, r.output
    assert "3 node(s) can take a pod of the job" in r.output


def test_cli_reads_through_kubectl(tmp_path, monkeypatch):
    """The kubectl path, with a stand-in kubectl that answers as the API server would (and NotFound for the CRD)."""
    folder = write_cluster(tmp_path / "c", **{"crd.json": None})
    fake = tmp_path / "bin" / "kubectl"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\ncase \"$2\" in\n"
                    "  crd) echo 'Error from server (NotFound): customresourcedefinitions \"rayjobs.ray.io\" not "
                    "found' >&2; exit 1;;\n"
                    f"  nodes) cat {folder}/nodes.json;;\n  daemonsets) cat {folder}/daemonsets.json;;\n"
                    f"  deployments) cat {folder}/deployments.json;;\nesac\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{fake.parent}:{__import__('os').environ['PATH']}")
    assert shutil.which("kubectl") == str(fake)
    r = CliRunner().invoke(cli, ["kuberay", "--nodes", "2", "--image", "img:1", "--arch", "gfx942", "--check-cluster"])
    assert r.exit_code == 1 and "KubeRay is not installed" in r.output


def test_cli_without_kubectl_is_exit_3(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    r = CliRunner().invoke(cli, ["kuberay", "--nodes", "2", "--image", "img:1", "--arch", "gfx942", "--check-cluster"])
    assert r.exit_code == 3 and "no kubectl" in r.output


def test_cluster_json_needs_check_cluster(tmp_path):
    r = CliRunner().invoke(cli, ["kuberay", "--nodes", "2", "--image", "img:1", "--arch", "gfx942",
                                 "--cluster-json", str(tmp_path)])
    assert r.exit_code == 2 and "--check-cluster" in r.output
