"""`rocmkit build` against a real Docker engine with BuildKit (marker `docker`; CI provisions the engine and
the base image with .ci/provision/20-docker.sh). The test stack is a stack file of the normal format whose
components are generated local projects given with --source: two that compile for seconds, one pure
Python, one needing a compiled one. Everything is asserted from the image, the engine and the build log;
nothing from wall-clock times."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import stackgen
from provisioned import provisioned

pytestmark = [pytest.mark.docker, pytest.mark.slow]

# Enough generated C for each compiled component to take seconds on a 2-core CI machine.
FUNCTIONS = 500


def _provisioned(var: str, what: str) -> str:
    return provisioned(var, f".ci/provision/20-docker.sh provides {what}", "DOCKER")


def _base_image() -> str:
    return _provisioned("ROCMKIT_TEST_BASE_IMAGE", "the base image")


def rocmkit(*args, timeout=900):
    return subprocess.run([sys.executable, "-m", "rocmkit", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "CI": "true"})


def docker_client():
    import docker

    return docker.from_env(timeout=60)


def run_in_image(ref: str, code: str) -> str:
    out = docker_client().containers.run(ref, ["python", "-c", code], remove=True, network_disabled=True)
    return out.decode()


# ---- what the log says, read independently of rocmkit's own parser ----

_STEP = re.compile(r"^#(\d+) \[(?P<stage>[^\] ]+) (\d+)/(\d+)\] (?P<instr>.*)$")


def steps_from_log(text: str) -> dict[str, dict]:
    """vertex id → {stage, instruction, status} for every step of a Dockerfile stage except FROM."""
    steps: dict[str, dict] = {}
    for line in text.splitlines():
        if line.strip() == "------":
            break  # the failure summary repeats earlier lines
        m = _STEP.match(line)
        if m and m.group(1) not in steps and not m.group("instr").startswith("FROM "):
            steps[m.group(1)] = {"stage": m.group("stage"), "instr": m.group("instr"), "status": "?"}
            continue
        head, _, rest = line.partition(" ")
        vid = head.lstrip("#")
        if vid in steps and (rest == "CACHED" or rest.startswith("DONE ")):
            steps[vid]["status"] = "cached" if rest == "CACHED" else "ran"
    return steps


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    base = _base_image()
    root = tmp_path_factory.mktemp("buildstack")
    specs = stackgen.default_specs(functions=FUNCTIONS)
    for spec in specs:
        stackgen.write_component(root / "src", spec)
    stack = stackgen.write_stack(root / "stack.toml", "buildtest", base, specs)
    made: list[str] = []
    yield {"root": root, "specs": specs, "stack": stack, "made": made}
    client = docker_client()
    for ref in made:
        try:
            client.images.remove(ref)
        except Exception:
            pass


def build_args(project, *extra, source_root=None, log=None):
    src = source_root or project["root"] / "src"
    args = ["build", "--arch", "gfx942", "--stack-file", str(project["stack"]), "--network", "none",
            "--progress", "plain", *stackgen.source_options(src, project["specs"]), *extra]
    if log:
        args += ["--log-file", str(log)]
    return args


@pytest.fixture(scope="module")
def cold(project):
    """The first build: no --tag, so the image gets the plan's default tag."""
    log = project["root"] / "cold.log"
    dry = rocmkit(*build_args(project, "--dry-run", "--json"))
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    r = rocmkit(*build_args(project, "--max-jobs", "2", "--json", log=log))
    assert r.returncode == 0, r.stderr[-4000:]
    doc = json.loads(r.stdout)
    project["made"].append(plan["tag"])
    return {"plan": plan, "doc": doc, "log": log, "stderr": r.stderr}


def test_image_is_tagged_with_the_plan_tag_and_documented(cold):
    doc, plan = cold["doc"], cold["plan"]
    assert doc["schema"] == "rocmkit.build/v1"
    assert doc["image"]["tags"] == [plan["tag"]]
    assert doc["inputs_hash"] == plan["inputs_hash"]
    assert doc["image"]["size_bytes"] > 0 and doc["image"]["id"].startswith("sha256:")
    img = docker_client().images.get(plan["tag"])
    assert img.id == doc["image"]["id"]
    assert Path(doc["build"]["log"]).read_text() == cold["log"].read_text()


def test_image_runs_with_every_wheel_installed(cold, project):
    out = run_in_image(cold["plan"]["tag"], (
        "import json, importlib.metadata as m, alpha, beta, gamma, delta\n"
        "print(json.dumps({n: m.version(n) for n in ('alpha', 'beta', 'gamma', 'delta', 'rocmkit')}))\n"
        "assert delta.value() == delta._u0.value() + alpha.value()\n"))
    versions = json.loads(out)
    assert versions == {"alpha": "1.0.1", "beta": "1.0.1", "gamma": "1.0.1", "delta": "1.0.1", "rocmkit": versions["rocmkit"]}
    # rocmkit itself runs in the image (the final stage installed it offline from its own wheel).
    help_out = docker_client().containers.run(cold["plan"]["tag"], ["rocmkit", "--version"], remove=True,
                                              network_disabled=True).decode()
    assert "rocmkit" in help_out


def test_labels_and_manifest_are_the_plan(cold, project):
    plan, doc = cold["plan"], cold["doc"]
    labels = docker_client().images.get(plan["tag"]).labels
    for key, value in plan["labels"].items():
        assert labels.get(key) == value, key
    assert labels["io.rocmkit.local-sources"].count("sha256:") == 4
    manifest = json.loads(run_in_image(plan["tag"], "print(open('/opt/rocmkit/manifest.json').read())"))
    assert manifest == doc["manifest"]
    assert manifest["inputs_hash"] == plan["inputs_hash"]
    by_name = {c["name"]: c for c in manifest["components"]}
    for stage in plan["stages"]:
        assert by_name[stage["component"]]["local_source"]["digest"] == stage["source"]["digest"]
    sources = run_in_image(plan["tag"], "print(open('/opt/rocmkit/sources.txt').read())")
    for stage in plan["stages"]:
        assert f"{stage['component']} local sha256:{stage['source']['digest']}" in sources


def test_independent_components_built_concurrently(cold):
    info = json.loads(run_in_image(cold["plan"]["tag"],
                                   "import json, alpha, beta; print(json.dumps([alpha.buildinfo(), beta.buildinfo()]))"))
    a, b = info
    # Each component recorded when its own build ran; the two intervals overlap.
    assert max(a["start"], b["start"]) < min(a["end"], b["end"]), info


def test_dependency_built_after_and_against_its_need(cold):
    info = json.loads(run_in_image(cold["plan"]["tag"],
                                   "import json, alpha, delta; print(json.dumps([alpha.buildinfo(), delta.buildinfo(), alpha.value()]))"))
    alpha_info, delta_info, alpha_value = info
    assert delta_info["needs"] == {"alpha": alpha_value}  # delta imported alpha's wheel at build time
    assert delta_info["start"] >= alpha_info["end"]


def test_max_jobs_reaches_the_compile_step(cold):
    info = json.loads(run_in_image(cold["plan"]["tag"],
                                   "import json, alpha, delta; print(json.dumps([alpha.buildinfo(), delta.buildinfo()]))"))
    for component in info:
        assert component["max_jobs"] == "2"
        assert component["parallel"] == 2
    assert cold["doc"]["build"]["max_jobs"] == 2


def test_identical_rebuild_is_fully_cached(cold, project):
    log = project["root"] / "again.log"
    r = rocmkit(*build_args(project, "--max-jobs", "2", "--json", log=log))
    assert r.returncode == 0, r.stderr[-4000:]
    doc = json.loads(r.stdout)
    steps = steps_from_log(log.read_text())
    assert steps, "no steps found in the log"
    not_cached = [s for s in steps.values() if s["status"] != "cached"]
    assert not not_cached, not_cached
    assert doc["image"]["id"] == cold["doc"]["image"]["id"]
    assert doc["image"]["tags"] == cold["doc"]["image"]["tags"]  # identical inputs, identical tag
    assert doc["build"]["rebuilt_stages"] == []


def test_changing_one_component_rebuilds_only_its_stage_and_final(cold, project, tmp_path):
    # A copy of the sources at a new place, with beta changed: alpha, gamma and delta keep their content.
    src = tmp_path / "src"
    shutil.copytree(project["root"] / "src", src)
    shutil.rmtree(src / "beta")
    # A fresh stamp each run, so an engine that kept an earlier run's cache still has to build it. Five functions,
    # not FUNCTIONS: what is judged is which stages ran, not how long beta compiles (FUNCTIONS is for the cold
    # build, where the overlap of alpha and beta must be seen); beta's 500 took 23 of this test's 33 s.
    stackgen.write_component(src, stackgen.ComponentSpec("beta", units=2, functions=5, revision=2,
                                                         extra_files={"stamp.txt": uuid.uuid4().hex}))
    log = tmp_path / "change.log"
    tag = f"rocmkit-test/build:change-{uuid.uuid4().hex[:8]}"
    r = rocmkit(*build_args(project, "--max-jobs", "2", "--json", "--tag", tag, source_root=src, log=log))
    assert r.returncode == 0, r.stderr[-4000:]
    project["made"].append(tag)
    steps = steps_from_log(log.read_text())
    ran = {s["stage"] for s in steps.values() if s["status"] == "ran"}
    cached = {s["stage"] for s in steps.values() if s["status"] == "cached"}
    assert ran == {"build-beta", "final"}, steps
    assert {"base", "build-alpha", "build-gamma", "build-delta"} <= cached
    assert json.loads(r.stdout)["image"]["tags"] == [tag]
    assert run_in_image(tag, "import beta; print(beta.REVISION)").strip() == "2"


def test_failing_component_names_its_stage_and_tags_nothing(tmp_path):
    base = _base_image()
    specs = [stackgen.ComponentSpec("gamma"), stackgen.ComponentSpec("broken", units=1, functions=5, fail=True)]
    for spec in specs:
        stackgen.write_component(tmp_path / "src", spec)
    stack = stackgen.write_stack(tmp_path / "stack.toml", "failtest", base, specs)
    args = ["build", "--arch", "gfx942", "--stack-file", str(stack), "--network", "none", "--progress", "plain",
            *stackgen.source_options(tmp_path / "src", specs)]
    tag = f"rocmkit-test/build:fail-{uuid.uuid4().hex[:8]}"
    default_tag = json.loads(rocmkit(*args, "--dry-run", "--json").stdout)["tag"]
    log = tmp_path / "fail.log"
    r = rocmkit(*args, "--max-jobs", "auto", "--tag", tag, "--log-file", str(log))
    assert r.returncode == 1, r.stderr[-3000:]
    assert "error: build failed in stage build-broken (component broken)" in r.stderr
    assert "---- last lines of build-broken ----" in r.stderr
    assert "component broken on purpose" in r.stderr.split("---- last lines of build-broken ----")[1]
    assert f"hint: full log: {log}" in r.stderr
    assert "Traceback" not in r.stderr
    # --max-jobs auto was sized from the engine and reached the build.
    m = re.search(r"max jobs (\d+) \(auto: ", r.stderr)
    assert m, r.stderr[:2000]
    assert f"MAX_JOBS={m.group(1)}" in log.read_text().splitlines()[0]
    client = docker_client()
    from docker.errors import ImageNotFound

    for ref in (tag, default_tag):
        with pytest.raises(ImageNotFound):
            client.images.get(ref)


def test_cache_to_a_registry_needs_buildx(project):
    from rocmkit.runtime import docker_client

    cli = docker_client.find_cli(None)
    if cli.mode == "buildx":
        pytest.skip("this client has buildx: registry caches are passed through")
    r = rocmkit(*build_args(project, "--cache-to", "type=registry,ref=localhost:5000/cache"))
    assert r.returncode == 3, r.stderr
    assert "--cache-to type=registry,ref=localhost:5000/cache" in r.stderr and "buildx" in r.stderr


def test_vf_configs_post_step_puts_vf_copies_in_the_image(tmp_path):
    """A stack with post = ["vf-configs"] runs `rocmkit vf-configs --strict` in the final stage over an
    installed package shaped like SGLang: every MI300X config gets its MI300X_VF copy beside it."""
    from rocmkit.cli import COMMANDS

    if "vf-configs" not in COMMANDS:
        pytest.skip("`rocmkit vf-configs` (issue 5) is not in this tree yet")
    base = _base_image()
    spec = stackgen.sglang_spec()
    stackgen.write_component(tmp_path / "src", spec)
    stack = stackgen.write_stack(tmp_path / "stack.toml", "vftest", base, [spec], post=("vf-configs",))
    tag = f"rocmkit-test/build:vf-{uuid.uuid4().hex[:8]}"
    r = rocmkit("build", "--arch", "gfx942", "--stack-file", str(stack), "--network", "none", "--progress", "plain",
                "--tag", tag, *stackgen.source_options(tmp_path / "src", [spec]))
    assert r.returncode == 0, r.stderr[-4000:]
    try:
        listing = run_in_image(tag, (
            "import os, sglang\n"
            "root = os.path.dirname(sglang.__file__)\n"
            "for d, _, fs in os.walk(root):\n"
            "    for f in fs:\n"
            "        if f.endswith('.json') and f != 'buildinfo.json':\n"
            "            print(os.path.relpath(os.path.join(d, f), root))\n")).splitlines()
        from rocmkit.host import vfconfigs

        expected = set()
        for rel in stackgen.SGLANG_CONFIGS:
            expected.add(rel)
            folder, _, name = rel.rpartition("/")
            for pair in vfconfigs.pairs_for("sglang"):  # every product with a VF (MI300X, MI325X, ...)
                vf = vfconfigs.vf_name(name, pair)
                if vf:
                    expected.add(f"{folder}/{vf}")
        assert set(listing) == expected
    finally:
        docker_client().images.remove(tag)


def _registry() -> str:
    return _provisioned("ROCMKIT_TEST_REGISTRY", "a local registry")


def _registry_tags(reg: str, repo: str) -> list[str]:
    import urllib.error
    import urllib.request

    host = reg.replace("localhost", "127.0.0.1")
    try:
        with urllib.request.urlopen(f"http://{host}/v2/{repo}/tags/list", timeout=10) as resp:
            return json.loads(resp.read()).get("tags") or []
    except urllib.error.HTTPError as exc:
        if exc.code == 404:  # the repository does not exist
            return []
        raise


def test_push_after_success_with_inline_cache(cold, project):
    reg = _registry()
    name = f"{reg}/rocmkit-test/buildtest"
    tag = f"{name}:{uuid.uuid4().hex[:8]}"
    r = rocmkit(*build_args(project, "--max-jobs", "2", "--tag", tag, "--push", "--cache-to", "type=inline", "--json"))
    assert r.returncode == 0, r.stderr[-4000:]
    project["made"].append(tag)
    doc = json.loads(r.stdout)
    assert doc["pushed"][0]["tag"] == tag and doc["pushed"][0]["digest"].startswith("sha256:")
    assert tag.rsplit(":", 1)[1] in _registry_tags(reg, "rocmkit-test/buildtest")


def test_failed_build_pushes_nothing(tmp_path):
    reg = _registry()
    base = _base_image()
    specs = [stackgen.ComponentSpec("broken", units=1, functions=5, fail=True)]
    stackgen.write_component(tmp_path / "src", specs[0])
    stack = stackgen.write_stack(tmp_path / "stack.toml", "failpush", base, specs)
    label = uuid.uuid4().hex[:8]
    r = rocmkit("build", "--arch", "gfx942", "--stack-file", str(stack), "--network", "none", "--progress", "plain",
                "--tag", f"{reg}/rocmkit-test/failpush:{label}", "--push",
                *stackgen.source_options(tmp_path / "src", specs))
    assert r.returncode == 1, r.stderr[-3000:]
    assert "pushing" not in r.stderr
    assert label not in _registry_tags(reg, "rocmkit-test/failpush")
