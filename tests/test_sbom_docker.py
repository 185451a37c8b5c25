"""The SBOM of a real image: a small test stack (a local pure-Python git component and a pip pin) built
offline (--network none) on ROCMKIT_TEST_BASE_IMAGE with `rocmkit build`; the SBOM is read back from the
image through the engine and checked against what the image itself reports (dpkg-query, pip, its manifest)."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import tarfile
import uuid

import pytest
import stackgen
from provisioned import provisioned

pytestmark = [pytest.mark.docker, pytest.mark.slow]
import cyclonedx  # noqa: F401,E402 - rocmkit[test] brings it; a missing test dependency fails, never skips


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def sh(client, ref: str, script: str) -> str:
    return client.containers.run(ref, ["sh", "-c", script], remove=True, network_disabled=True).decode()


def read_from_image(client, ref: str, path: str) -> bytes:
    container = client.containers.create(ref, ["true"], network_disabled=True)
    try:
        stream, _ = container.get_archive(path)
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream))) as tar:
            return tar.extractfile(tar.getmembers()[0]).read()
    finally:
        container.remove(force=True)


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    import docker

    base = provisioned("ROCMKIT_TEST_BASE_IMAGE", ".ci/provision/20-docker.sh provides the base image", "DOCKER")
    root = tmp_path_factory.mktemp("sbomstack")
    spec = stackgen.ComponentSpec("probe-lib")  # pure Python: builds in seconds
    stackgen.write_component(root / "src", spec)
    stack = stackgen.write_stack(root / "stack.toml", "sbomtest", base, [spec], targets=("gfx942",))
    with open(stack, "a") as f:  # a pip component the base image already holds, so the build stays offline
        f.write('\n[[component]]\nname = "cli-lib"\npip = ["click==8.1.3"]\n')
    ref = f"rocmkit-test/sbom:{uuid.uuid4().hex[:12]}"
    host_copy = root / "out" / "image.cdx.json"
    r = subprocess.run([sys.executable, "-m", "rocmkit", "build", "--stack-file", str(stack), "--arch", "gfx942",
                        "--network", "none", "--progress", "plain", "--tag", ref, "--json",
                        "--source", f"probe-lib={root / 'src' / 'probe-lib'}", "--sbom-out", str(host_copy),
                        "--log-file", str(root / "build.log")],
                       capture_output=True, text=True, timeout=900, env={**os.environ, "CI": "true"})
    client = docker.from_env(timeout=60)
    try:
        assert r.returncode == 0, r.stderr[-4000:]
        yield {"ref": ref, "doc": json.loads(r.stdout), "host_copy": host_copy, "client": client}
    finally:
        try:
            client.images.remove(ref)
        except Exception:
            pass


def test_image_copy_equals_host_copy_and_validates(built):
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator

    assert built["doc"]["sbom"] == {"image_path": "/opt/rocmkit/sbom.cdx.json", "host_path": str(built["host_copy"])}
    in_image = read_from_image(built["client"], built["ref"], "/opt/rocmkit/sbom.cdx.json")
    assert in_image == built["host_copy"].read_bytes()
    error = JsonStrictValidator(SchemaVersion.V1_6).validate_str(in_image.decode())
    assert error is None, str(error)


def test_lists_every_manifest_component_and_the_images_packages(built):
    client, ref = built["client"], built["ref"]
    sbom = json.loads(built["host_copy"].read_text())
    manifest = json.loads(read_from_image(client, ref, "/opt/rocmkit/manifest.json"))
    comps = sbom["components"]
    tagged = {p["value"]: c for c in comps for p in c.get("properties", []) if p["name"] == "rocmkit:component"}
    assert sorted(tagged) == sorted(c["name"] for c in manifest["components"]) == ["cli-lib", "probe-lib"]
    assert tagged["cli-lib"]["purl"] == "pkg:pypi/click@8.1.3"
    local = next(c for c in manifest["components"] if c["name"] == "probe-lib")["local_source"]["digest"]
    assert tagged["probe-lib"]["purl"] == f"pkg:generic/probe-lib?checksum=sha256:{local}"
    # Python distributions: what pip in the image lists, name and version.
    pip = {_norm(n): v for n, v in (line.split("==") for line in
                                    sh(client, ref, "pip list --format=freeze --disable-pip-version-check").split())}
    pypi = {_norm(c["name"]): c["version"] for c in comps if c["purl"].startswith("pkg:pypi/")}
    assert pypi == pip and "probe-lib" in pypi
    # dpkg packages, as dpkg-query lists them, with the distro's codename.
    debs = set(sh(client, ref, "dpkg-query -W -f '${Package} ${Version}\\n'").split("\n")) - {""}
    sbom_debs = {f"{c['name']} {c['version']}" for c in comps if c["purl"].startswith("pkg:deb/debian/")}
    assert sbom_debs == debs and all("distro=bookworm" in c["purl"] for c in comps if c["purl"].startswith("pkg:deb/"))
    (base,) = [c for c in comps if c["type"] == "container"]
    assert base["name"] == manifest["base_image"] and base["purl"].startswith("pkg:docker/")
    assert sbom["metadata"]["component"]["version"] == manifest["inputs_hash"][:12]


def test_image_python_does_not_gain_cyclonedx(built):
    out = sh(built["client"], built["ref"],
             "python -c 'import importlib.util as u; print([m for m in (\"cyclonedx\", \"packageurl\", "
             "\"py_serializable\") if u.find_spec(m)])'")
    assert out.strip() == "[]"
