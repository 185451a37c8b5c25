"""`rocmkit kuberay` (no cluster can run here): the rendered manifests against KubeRay's own RayJob CRD schema (kept as
data, tests/data/kuberay/), the rules KubeRay and AMD's device plugin do not check (init and main containers request
the same GPUs, Ray's GPU count is the request, nodes x GPUs is verl's plan), validation of every value, and the
committed examples."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import jsonschema
import pytest
import yaml
from click.testing import CliRunner

from rocmkit.cli import cli
from rocmkit.cluster import kuberay
from rocmkit.errors import UsageError

REPO = Path(__file__).resolve().parent.parent
CRD = json.loads((Path(__file__).parent / "data" / "kuberay" / "rayjob-crd-v1.7.0.json").read_text())


def spec(**kw):
    base = dict(nodes=3, gpus_per_node=8, image="rocmkit/verl-vllm:rocm7.0.2-gfx942", arch="gfx942",
                ray_version="2.55.1", overrides=("algorithm.adv_estimator=grpo",))
    return kuberay.KubeRaySpec(**{**base, **kw})


def docs(s) -> list[dict]:
    return list(yaml.safe_load_all(kuberay.render(s)))


def rayjob(s) -> dict:
    (job,) = [d for d in docs(s) if d["kind"] == "RayJob"]
    return job


def pods(job: dict) -> list[tuple[dict, dict]]:
    """(group, its pod spec) for the head and every worker group."""
    cluster = job["spec"]["rayClusterSpec"]
    groups = [cluster["headGroupSpec"], *cluster["workerGroupSpecs"]]
    return [(g, g["template"]["spec"]) for g in groups]


def validate_rayjob(job: dict) -> None:
    jsonschema.Draft7Validator(CRD["openAPIV3Schema"]).validate(job)


def test_the_schema_is_kuberays_own():
    assert CRD["kuberay"] == kuberay.KUBERAY_VERSION and CRD["source"].startswith("https://github.com/ray-project/")
    props = CRD["openAPIV3Schema"]["properties"]["spec"]["properties"]
    assert {"preRunningDeadlineSeconds", "activeDeadlineSeconds", "rayClusterSpec", "submitterPodTemplate"} \
        <= set(props)


@pytest.mark.parametrize("kw", [{}, dict(nodes=1), dict(arch="gfx950", image="img:1", gpu_resource="amd.com/cpx_nps4"),
                                dict(service_account="verl", rbac=True, namespace="rl", active_deadline_s=7200,
                                     cpus_per_node=96, memory_per_node="1600Gi", ib_hcas=("mlx5_0",),
                                     node_selector={"pool": "mi300x"}, extra_env={"NCCL_DEBUG": "INFO"},
                                     volumes={"rl-data": "/data", "hf.cache": "/root/.cache/huggingface"}),
                                dict(preflight=False)], ids=lambda kw: ",".join(kw) or "defaults")
def test_rayjob_validates_against_kuberays_crd(kw):
    validate_rayjob(rayjob(spec(**kw)))


def test_the_schema_catches_what_kuberay_would_refuse():
    job = rayjob(spec())
    job["spec"]["rayClusterSpec"]["headGroupSpec"]["rayStartParams"]["num-gpus"] = 8  # KubeRay's are strings
    with pytest.raises(jsonschema.ValidationError):
        validate_rayjob(job)
    job = rayjob(spec())
    job["spec"]["preRunningDeadlineSeconds"] = 0
    with pytest.raises(jsonschema.ValidationError):
        validate_rayjob(job)


@pytest.mark.parametrize("kw", [{}, dict(gpu_resource="amd.com/spx_nps1"), dict(nodes=1, gpus_per_node=4)])
def test_every_ray_pod_asks_for_the_same_gpus_and_ray_counts_them(kw):
    s = spec(**kw)
    job = rayjob(s)
    for group, pod in pods(job):
        (main,) = pod["containers"]
        (init,) = pod["initContainers"]
        assert init["name"] == "rocmkit-preflight"
        assert init["resources"] == main["resources"]  # same GPUs: AMD's device plugin allocates per container
        gpus = main["resources"]["limits"][s.gpu_resource]
        assert gpus == str(s.gpus_per_node)
        # set explicitly: KubeRay derives it only from a limit whose name ends in "gpu"
        assert group["rayStartParams"]["num-gpus"] == gpus
        assert init["command"][:4] == ["rocmkit", "doctor", "--pod-gpus", gpus]
        assert {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "64Gi"}} in pod["volumes"]
        env = {e["name"]: e["value"] for e in main["env"]}
        assert env["RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES"] == "1" and env["HSA_NO_SCRATCH_RECLAIM"] == "1"
        assert "HIP_VISIBLE_DEVICES" not in env and init["env"] == main["env"]


@pytest.mark.parametrize("nodes", [1, 2, 5])
def test_nodes_times_gpus_is_verls_plan(nodes):
    s = spec(nodes=nodes)
    job = rayjob(s)
    cluster = job["spec"]["rayClusterSpec"]
    pods_total = 1 + sum(g["replicas"] for g in cluster["workerGroupSpecs"])
    assert all(g["minReplicas"] == g["maxReplicas"] == g["replicas"] for g in cluster["workerGroupSpecs"])
    argv = shlex.split(job["spec"]["entrypoint"])
    assert argv[:3] == ["python3", "-m", "verl.trainer.main_ppo"]
    planned = dict(a.split("=", 1) for a in argv[3:])
    assert pods_total == int(planned["trainer.nnodes"]) == nodes
    assert int(planned["trainer.n_gpus_per_node"]) * nodes == pods_total * s.gpus_per_node


@pytest.mark.parametrize("arch,ids", [("gfx942", {"74a1", "74a5", "74b5"}), ("gfx950", {"75a0", "75a3"})])
def test_pods_run_only_on_nodes_of_the_images_arch(arch, ids):
    other = {"75a0", "75a3"} if arch == "gfx942" else {"74a1", "74a5"}
    for _, pod in pods(rayjob(spec(arch=arch))):
        (term,) = pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        (expr,) = term["matchExpressions"]
        assert expr["key"] == "amd.com/gpu.device-id" and expr["operator"] == "In"
        assert ids <= set(expr["values"]) and not other & set(expr["values"])


def test_job_deadlines_and_cleanup():
    job = rayjob(spec(active_deadline_s=14400))["spec"]
    assert job["activeDeadlineSeconds"] == 14400 and job["preRunningDeadlineSeconds"] == 1800
    assert job["backoffLimit"] == 0 and job["shutdownAfterJobFinishes"] is True
    assert "activeDeadlineSeconds" not in rayjob(spec())["spec"]


def test_configmap_carries_the_plan_and_rbac_is_optional():
    d = docs(spec(service_account="verl", rbac=True))
    assert [x["kind"] for x in d] == ["ConfigMap", "ServiceAccount", "Role", "RoleBinding", "RayJob"]
    plan = json.loads(d[0]["data"]["plan.json"])
    assert plan["nodes"] == 3 and plan["gpus_per_node"] == 8 and plan["arch"] == "gfx942"
    assert all(p["serviceAccountName"] == "verl" for _, p in pods(d[-1]))
    assert [x["kind"] for x in docs(spec())] == ["ConfigMap", "RayJob"]


def test_values_stay_strings_in_the_yaml():
    evil = 'trainer.project_name="\n- kind: Secret\n  x: $(rm -rf /)'
    job = rayjob(spec(overrides=(evil,), extra_env={"X": "a: b\n- c"}))
    assert shlex.split(job["spec"]["entrypoint"])[-1] == evil
    _, pod = pods(job)[0]
    assert {"name": "X", "value": "a: b\n- c"} in pod["containers"][0]["env"]


def test_yaml_round_trips():
    for value in [{"a": [], "b": {}, "c": [{"d": [1, True, "x"]}, ["y"]], "e.f/g": "0"}, []]:
        assert yaml.safe_load(kuberay.dump_yaml(value)) == value


@pytest.mark.parametrize("kw,message", [
    (dict(nodes=0), "--nodes"),
    (dict(gpus_per_node=0), "--gpus-per-node"),
    (dict(image="bad image; rm"), "--image"),
    (dict(arch="sm90"), "--arch sm90: not an AMD GPU arch"),
    (dict(arch="gfx1100"), "unknown arch"),
    (dict(job_name="Verl_Job"), "--job-name"),
    (dict(job_name="a" * 48), "at most 47"),
    (dict(job_name="1verl"), "a letter, then"),
    (dict(namespace="a b"), "--namespace"),
    (dict(gpu_resource="gpu"), "--gpu-resource"),
    (dict(memory_per_node="lots"), "--memory-per-node"),
    (dict(shm_size="64 GB"), "--shm-size"),
    (dict(ib_hcas=("mlx5_0;x",)), "--ib-hcas"),
    (dict(extra_env={"lower": "1"}), "--env"),
    (dict(node_selector={"pool": "a b"}), "--node-selector"),
    (dict(volumes={"Data": "/data"}), "--pvc Data"),
    (dict(volumes={"data": "data"}), "an absolute path"),
    (dict(volumes={"data": "/dev/shm"}), "an absolute path"),
    (dict(volumes={"data": "/x/../etc"}), "an absolute path"),
    (dict(pre_running_deadline_s=0), "--pre-running-deadline"),
    (dict(active_deadline_s=600), "--active-deadline 600 is not after"),
    (dict(rbac=True), "--rbac makes a ServiceAccount"),
    (dict(overrides=("trainer.nnodes=4",)), "fills trainer.nnodes"),
    (dict(overrides=("not an override",)), "key=value"),
    (dict(ray_version="latest"), "--ray-version"),
])
def test_bad_values_are_usage_errors(kw, message):
    with pytest.raises(UsageError, match=message):
        kuberay.render(spec(**kw))


def test_committed_examples_are_current():
    for name, s in kuberay.example_specs().items():
        path = REPO / "kuberay" / name
        assert path.exists(), f"run `rocmkit kuberay --examples kuberay` ({name} missing)"
        assert path.read_text() == kuberay.render(s), \
            f"kuberay/{name} is stale: run `rocmkit kuberay --examples kuberay`"
        for d in yaml.safe_load_all(path.read_text()):
            if d["kind"] == "RayJob":
                validate_rayjob(d)


def test_cli_writes_the_manifests(tmp_path):
    out = tmp_path / "job.yaml"
    r = CliRunner().invoke(cli, ["kuberay", "--nodes", "2", "--image", "rocmkit/verl-vllm:rocm7.0.2-gfx950-ab12",
                                 "--ray-version", "2.55.1", "--no-verl-check", "-o", str(out), "--",
                                 "algorithm.adv_estimator=grpo"])
    assert r.exit_code == 0, r.output
    job = [d for d in yaml.safe_load_all(out.read_text()) if d["kind"] == "RayJob"][0]
    validate_rayjob(job)
    assert "75a3" in json.dumps(job)  # the arch came from the image's tag
    r = CliRunner().invoke(cli, ["kuberay", "--nodes", "2", "--image", "img:1", "--ray-version", "2.55.1",
                                 "--no-verl-check"])
    assert r.exit_code == 2 and "the arch of img:1 is unknown" in r.output


def test_cli_refuses_partition_resource_names_it_cannot_read():
    r = CliRunner().invoke(cli, ["kuberay", "--nodes", "2", "--image", "img:1", "--arch", "gfx942",
                                 "--gpu-resource", "amd.com/", "--ray-version", "2.55.1", "--no-verl-check"])
    assert r.exit_code == 2 and "--gpu-resource" in r.output


@pytest.mark.slow
def test_the_jobs_overrides_are_checked_by_verl_before_the_manifests_are_written(tmp_path):
    """As `rocmkit slurm`: with a `rocmkit tune` plan, rollout TP 3 on a node of 8 GPUs is refused by verl's checker
    (exit 2, nothing written); the plan alone is written; no verl to check with (the image is not in this host's
    engine) is exit 3."""
    from test_slurm import verl_python

    runner = CliRunner()
    plan = runner.invoke(cli, ["tune", "--model", "Qwen2.5-7B-Instruct", "--gpu", "MI300X", "--json"])
    (tmp_path / "plan.json").write_text(plan.stdout)
    out = tmp_path / "job.yaml"
    args = ["kuberay", "--nodes", "1", "--image", "rocmkit-test/no-such-image:never", "--arch", "gfx942",
            "--ray-version", "2.55.1", "--tune", str(tmp_path / "plan.json"), "-o", str(out)]
    tp3 = "actor_rollout_ref.rollout.tensor_model_parallel_size=3"
    r = runner.invoke(cli, [*args, "--verl-python", verl_python(), "--", tp3])
    assert r.exit_code == 2 and not out.exists(), r.output
    assert f"the overrides after --: {tp3}: a rollout replica" in r.stderr and "--no-verl-check" in r.stderr
    r = runner.invoke(cli, [*args, "--verl-python", verl_python()])
    assert r.exit_code == 0 and out.exists(), r.output
    assert "accepts the job's overrides" in r.stderr
    r = runner.invoke(cli, [*args, "--force"])
    assert r.exit_code == 3 and "no verl to check the job's overrides with" in r.stderr, r.output


@pytest.mark.parametrize("name", sorted(kuberay.example_specs()))
def test_core_objects_and_pod_templates_validate_against_kubernetes_schemas(name):
    """The ConfigMap, the RBAC objects and every Ray pod template (as a Pod) against Kubernetes' own OpenAPI schemas
    (kubernetes-validate's offline copies, strict: an unknown field fails)."""
    kv = pytest.importorskip("kubernetes_validate", reason="the test extra's kubernetes-validate is not installed")
    for d in docs(kuberay.example_specs()[name]):
        if d["kind"] == "RayJob":
            for _, pod in pods(d):
                kv.validate({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": pod}, "1.33",
                            strict=True)
        else:
            kv.validate(d, "1.33", strict=True)
    with pytest.raises(kv.ValidationError):
        kv.validate({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": 1}}, "1.33",
                    strict=True)


def test_claims_are_mounted_in_every_ray_container_not_the_preflight():
    for _, pod in pods(rayjob(spec(volumes={"rl-data": "/data", "models": "/models"}))):
        assert {"name": "data-0", "persistentVolumeClaim": {"claimName": "rl-data"}} in pod["volumes"]
        mounts = {m["mountPath"]: m["name"] for m in pod["containers"][0]["volumeMounts"]}
        assert mounts["/data"] == "data-0" and mounts["/models"] == "data-1"
        assert "/data" not in {m["mountPath"] for m in pod["initContainers"][0]["volumeMounts"]}


def cel_rule_paths(schema: dict, path: tuple = ()) -> list[tuple]:
    """The object paths (keys, "[]" for list items) where the CRD carries x-kubernetes-validations (CEL) rules."""
    found = [path] if "x-kubernetes-validations" in schema else []
    for key, sub in schema.get("properties", {}).items():
        found += cel_rule_paths(sub, path + (key,))
    if "items" in schema:
        found += cel_rule_paths(schema["items"], path + ("[]",))
    return found


def has_path(obj, path: tuple) -> bool:
    if not path:
        return True
    if path[0] == "[]":
        return isinstance(obj, list) and any(has_path(x, path[1:]) for x in obj)
    return isinstance(obj, dict) and path[0] in obj and has_path(obj[path[0]], path[1:])


def test_no_cel_rule_of_the_crd_applies_to_what_rocmkit_sets():
    """jsonschema does not evaluate the CRD's CEL rules (the API server does); none sits on a field rocmkit sets."""
    paths = cel_rule_paths(CRD["openAPIV3Schema"])
    assert ("spec", "managedBy") in paths and ("spec", "deletionStrategy") in paths  # the rules are found
    for s in [spec(), spec(service_account="verl", rbac=True, active_deadline_s=7200), *kuberay.example_specs().values()]:
        job = rayjob(s)
        assert [p for p in paths if has_path(job, p)] == []


@pytest.mark.parametrize("s", [spec(), spec(nodes=1), *kuberay.example_specs().values()], ids=lambda s: s.job_name)
def test_kuberays_own_controller_rules(s):
    """What KubeRay v1.7.0's controller refuses beyond the schema (ray-operator/controllers/ray/utils/validation.go:
    ValidateRayJobMetadata, ValidateRayJobSpec, ValidateRayClusterSpec, validateRayGroupResources), for the fields
    rocmkit sets."""
    import re

    job = rayjob(s)
    name, js = job["metadata"]["name"], job["spec"]
    assert len(name) <= 47 and re.match(r"^[a-z]([-a-z0-9]*[a-z0-9])?$", name)  # DNS-1035
    assert js["submissionMode"] == "K8sJobMode" and not js.get("suspend")  # SidecarMode forbids a submitter template
    assert js.get("activeDeadlineSeconds", 1) > 0 and js["preRunningDeadlineSeconds"] > 0
    assert js["backoffLimit"] >= 0 and js["ttlSecondsAfterFinished"] >= 0
    for group, pod in pods(job):
        assert pod["containers"]
        assert "resources" not in group  # not with num-gpus in rayStartParams
        assert "redis-password" not in group["rayStartParams"]
        assert not {"RAY_REDIS_ADDRESS", "REDIS_PASSWORD"} & {e["name"] for e in pod["containers"][0]["env"]}
    for group in js["rayClusterSpec"]["workerGroupSpecs"]:
        assert 0 <= group["minReplicas"] <= group["maxReplicas"]
