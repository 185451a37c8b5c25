"""The SBOM generator on real data without an engine: this host's dpkg database and Python distributions,
the manifests of built-in stacks, and the vendored CycloneDX library run by a Python that lacks it. Every
document is checked with CycloneDX's own strict schema validator."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from rocmkit import stacks
from rocmkit.image.plan import make_plan
from rocmkit.image.sbom import _norm, bom, installed_distributions, read_dpkg_status, read_os_release, to_json

import cyclonedx  # noqa: F401,E402 - rocmkit[test] brings it; a missing test dependency fails, never skips
ROOT = Path(__file__).resolve().parent.parent


def validate(text: str) -> None:
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    error = JsonStrictValidator(SchemaVersion.V1_6).validate_str(text)
    assert error is None, str(error)


def by_component(doc: dict) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for c in doc["components"]:
        for p in c.get("properties", []):
            if p["name"] == "rocmkit:component":
                out.setdefault(p["value"], []).append(c)
    return out


@pytest.mark.parametrize("name", ["verl-vllm"])  # git components on GitHub, pip pins, a ROCm base
def test_builtin_stack_manifest_on_this_hosts_packages(name):
    stack = stacks.load_builtin(name)
    manifest = make_plan(stack, [stack.targets[0]]).manifest
    dists = installed_distributions([])
    debs = read_dpkg_status(Path("/"))
    text = to_json(bom(manifest, dists, debs, read_os_release(Path("/"))))
    validate(text)
    doc = json.loads(text)
    found = by_component(doc)
    assert sorted(found) == sorted(c["name"] for c in manifest["components"])
    for c in manifest["components"]:
        if c["kind"] == "git":
            (entry,) = found[c["name"]]
            assert c["commit"] in entry["purl"] and entry["version"] == c["commit"]
            assert entry["purl"].startswith("pkg:github/") if "github.com" in c["git"] else "vcs_url=" in entry["purl"]
        else:
            names = {_norm(e["name"]) for e in found[c["name"]]}
            assert len(names) == len(c["requirements"])
    purls = [c["purl"] for c in doc["components"]]
    assert sum(p.startswith("pkg:deb/") for p in purls) == len(debs) > 0
    assert sum(p.startswith("pkg:pypi/") for p in purls) >= len(dists)
    (base,) = [c for c in doc["components"] if c["type"] == "container"]
    assert base["purl"].startswith("pkg:docker/") and base["name"] == manifest["base_image"]
    assert doc["metadata"]["component"]["version"] == manifest["inputs_hash"][:12]


def test_base_image_by_digest_is_an_oci_purl():
    digest = "sha256:" + "ab" * 32
    for manifest in ({"base_image": "rocm/dev-ubuntu-22.04:7.0.2-complete", "base_image_digest": digest},
                     {"base_image": f"rocm/dev-ubuntu-22.04:7.0.2-complete@{digest}"}):
        text = to_json(bom({**manifest, "components": []}, {}, [], None))
        validate(text)
        (base,) = json.loads(text)["components"]
        assert base["purl"] == ("pkg:oci/dev-ubuntu-22.04@sha256:" + "ab" * 32
                                + "?repository_url=docker.io/rocm/dev-ubuntu-22.04&tag=7.0.2-complete")


@pytest.mark.skipif(not shutil.which("dpkg-query"), reason="no dpkg on this host")
def test_dpkg_status_reads_what_dpkg_query_lists():
    out = subprocess.run(["dpkg-query", "-W", "-f", "${db:Status-Status} ${Package} ${Architecture} ${Version}\n"],
                         capture_output=True, text=True, check=True).stdout
    installed = sorted((p, a, v) for s, p, a, v in (line.split(" ", 3) for line in out.splitlines()) if s == "installed")
    assert sorted((d.name, d.arch, d.version) for d in read_dpkg_status(Path("/"))) == installed


def test_vendored_library_runs_where_cyclonedx_is_not_installed(tmp_path):
    """What the final stage does: a Python without the library, the vendored copy on PYTHONPATH; the copy's
    own distributions are not listed as the image's."""
    from rocmkit.image.sbomlib import vendor

    python = shutil.which("python3", path="/usr/bin")
    clean = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if not python or subprocess.run([python, "-c", "import cyclonedx"], capture_output=True, env=clean).returncode == 0:
        pytest.skip("needs a system python3 without cyclonedx")
    lib = vendor(tmp_path / "sbom-lib")
    stack = stacks.load_builtin("verl-cpu")
    manifest = make_plan(stack, [stack.targets[0]]).manifest
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    out = tmp_path / "sbom.cdx.json"
    r = subprocess.run([python, "-m", "rocmkit.image.sbom", "--manifest", str(tmp_path / "manifest.json"),
                        "--exclude", str(lib), str(out)], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": f"{lib}{os.pathsep}{ROOT}"})
    assert r.returncode == 0, r.stderr
    text = out.read_text()
    validate(text)
    names = {_norm(c["name"]) for c in json.loads(text)["components"] if c["purl"].startswith("pkg:pypi/")}
    assert "cyclonedx-python-lib" not in names and "packageurl-python" not in names
    assert sorted(by_component(json.loads(text))) == sorted(c["name"] for c in manifest["components"])


def test_sbom_out_is_never_overwritten(tmp_path):
    existing = tmp_path / "sbom.json"
    existing.write_text("mine")
    r = subprocess.run([sys.executable, "-m", "rocmkit", "build", "--stack", "verl-cpu", "--sbom-out", str(existing)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "already exists" in r.stderr and "Traceback" not in r.stderr
    assert existing.read_text() == "mine"
