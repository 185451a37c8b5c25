"""`rocmkit diff` on manifests made by the real planner, and on two images built by `rocmkit build` (offline,
from a wheelhouse of two tiny wheels) from stacks that differ in one pin."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import tinyindex
from provisioned import provisioned

from rocmkit import stacks
from rocmkit.image.plan import make_plan
from rocmkit.tomlread import load_toml_text

DOCKER = os.environ.get("ROCMKIT_DOCKER", "docker")

STACK = '''\
schema = "rocmkit.stack/v1"
name = "difftest"
description = "Two of these differ in one pin"
targets = ["gfx942"]
rocm = "none"
python = "3.11"

[base]
image = "{base}"
python_from = "image"

[[component]]
name = "tiny"
pip = ["{pin}"]

[[env]]
name = "DIFFTEST_MODE"
value = "{mode}"
why = "a runtime variable the manifest records"
'''


def rocmkit(*args, timeout=900):
    return subprocess.run([sys.executable, "-m", "rocmkit", *args], capture_output=True, text=True, timeout=timeout, check=False,
                          env={**os.environ, "CI": "true"})


def manifest(tmp_path: Path, name: str, *, pin="tinypkg==1.0", mode="a", base="debian:12") -> Path:
    text = STACK.format(base=base, pin=pin, mode=mode)
    stack = stacks.parse_stack(load_toml_text(text, name), name, tmp_path)
    p = tmp_path / f"{name}.json"
    p.write_text(json.dumps(make_plan(stack, ["gfx942"]).manifest))
    return p


def test_manifests_differing_in_one_pin_and_one_variable(tmp_path):
    a = manifest(tmp_path, "a")
    b = manifest(tmp_path, "b", pin="tinypkg==1.1", mode="b")
    r = rocmkit("diff", str(a), str(b), "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == "rocmkit.diff/v1" and doc["identical"] is False
    assert doc["pins"]["components"] == {"changed": {"tiny": {"requirements": [["tinypkg==1.0"], ["tinypkg==1.1"]]}},
                                         "added": {}, "removed": {}}
    assert doc["environment"]["changed"] == {"DIFFTEST_MODE": ["a", "b"]}
    assert doc["environment"]["source"] == "manifest runtime_env"
    for section in ("targets", "base", "other"):
        assert not any(doc[section][k] for k in ("changed", "added", "removed")), section
    assert doc["packages"]["compared"] is False
    text = rocmkit("diff", str(a), str(b))
    assert "~ component tiny: requirements" in text.stdout and "~ DIFFTEST_MODE: a -> b" in text.stdout
    assert text.stdout.rstrip().endswith("different")
    assert rocmkit("diff", str(a), str(b), "--exit-code").returncode == 1


def test_identical_manifests_and_added_removed_components(tmp_path):
    a = manifest(tmp_path, "a")
    r = rocmkit("diff", str(a), str(a), "--exit-code")
    assert r.returncode == 0 and r.stdout.rstrip().endswith("identical")
    doc = json.loads(a.read_text())
    doc["components"].append({"name": "extra", "kind": "pip", "requirements": ["extra==1"], "no_deps": False})
    doc["targets"] = ["gfx942", "gfx950"]
    doc["base_image"] = "debian:12@sha256:" + "0" * 64
    b = tmp_path / "b.json"
    b.write_text(json.dumps(doc))
    out = json.loads(rocmkit("diff", str(a), str(b), "--json").stdout)
    assert list(out["pins"]["components"]["added"]) == ["extra"]
    assert out["targets"]["added"] == {"gfx950": True}
    assert out["base"]["changed"] == {"base_image": ["debian:12", "debian:12@sha256:" + "0" * 64]}


def test_a_file_that_is_no_manifest_is_a_usage_error(tmp_path):
    a = manifest(tmp_path, "a")
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": "rocmkit.doctor/v1"}')
    r = rocmkit("diff", str(a), str(bad))
    assert r.returncode == 2 and f"{bad}: not a rocmkit manifest" in r.stderr and "Traceback" not in r.stderr
    bad.write_text("not json")
    r = rocmkit("diff", str(a), str(bad))
    assert r.returncode == 2 and "not JSON" in r.stderr


# ---- images ----

@pytest.fixture(scope="module")
def images(tmp_path_factory):
    base = provisioned("ROCMKIT_TEST_BASE_IMAGE", ".ci/provision/20-docker.sh provides the base image", "DOCKER")
    root = tmp_path_factory.mktemp("diffimages")
    for v in ("1.0", "1.1"):
        tinyindex.make_wheel(root / "wheels", "tinypkg", v)
    made = []
    try:
        for pin in ("tinypkg==1.0", "tinypkg==1.1"):
            stack = root / f"{pin}.toml"
            stack.write_text(STACK.format(base=base, pin=pin, mode="same"))
            tag = f"rocmkit-test/diff:{uuid.uuid4().hex[:8]}"
            r = rocmkit("build", "--stack-file", str(stack), "--arch", "gfx942", "--network", "none", "--progress",
                        "plain", "--wheelhouse", str(root / "wheels"), "--tag", tag)
            assert r.returncode == 0, r.stderr[-3000:]
            made.append(tag)
        yield made
    finally:
        if made:
            subprocess.run([DOCKER, "rmi", "-f", *made], capture_output=True, check=False)


@pytest.mark.docker
@pytest.mark.slow
def test_two_images_differing_in_one_pin_name_that_pin_and_its_package(images):
    a, b = images
    r = rocmkit("diff", a, b, "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["a"]["kind"] == "image" and doc["a"]["id"].startswith("sha256:")
    assert doc["pins"]["components"] == {"changed": {"tiny": {"requirements": [["tinypkg==1.0"], ["tinypkg==1.1"]]}},
                                         "added": {}, "removed": {}}
    assert doc["packages"] == {"compared": True, "changed": {"tinypkg": ["1.0", "1.1"]}, "added": {}, "removed": {}}
    assert doc["environment"]["source"] == "image ENV"
    for section in ("environment", "targets", "base", "other"):
        assert not any(doc[section][k] for k in ("changed", "added", "removed")), section
    assert doc["pins"]["base_pip"] == {"changed": {}, "added": {}, "removed": {}}
    assert rocmkit("diff", a, a, "--exit-code").returncode == 0
    # The image against a manifest file: pins compared, packages not (a manifest does not list them).
    m = json.loads(subprocess.run([DOCKER, "run", "--rm", "--network=none", a, "cat", "/opt/rocmkit/manifest.json"],
                                  capture_output=True, text=True, check=True).stdout)
    path = Path(os.environ.get("TMPDIR", "/tmp")) / f"rocmkit-diff-{uuid.uuid4().hex[:8]}.json"
    try:
        path.write_text(json.dumps(m))
        mixed = json.loads(rocmkit("diff", str(path), b, "--json").stdout)
        assert mixed["packages"]["compared"] is False
        assert list(mixed["pins"]["components"]["changed"]) == ["tiny"]
        assert not any(mixed["base"][k] for k in ("changed", "added", "removed"))
    finally:
        path.unlink(missing_ok=True)


@pytest.mark.docker
def test_an_image_without_a_manifest_and_a_missing_image_are_usage_errors(tmp_path):
    base = provisioned("ROCMKIT_TEST_BASE_IMAGE", ".ci/provision/20-docker.sh provides the base image", "DOCKER")
    a = manifest(tmp_path, "a")
    r = rocmkit("diff", str(a), base)
    assert r.returncode == 2, r.stderr
    assert f"image {base} has no /opt/rocmkit/manifest.json: it was not built by rocmkit" in r.stderr
    r = rocmkit("diff", str(a), "rocmkit-test/no-such-image:1")
    assert r.returncode == 2 and "neither a file nor an image" in r.stderr and "Traceback" not in r.stderr
