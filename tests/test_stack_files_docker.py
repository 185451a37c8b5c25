"""Patches and assets in a real build (marker `docker`; the engine and base image of .ci/provision/20-docker.sh):
a patched `--source` component and a wheel asset served by a local HTTP server build into an image that
has both. The stage-side `git apply --check` of a cloned component is not built here: a clone needs the
network the test engine lacks (its rendered order is tested in test_stack_patches_assets.py)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
from provisioned import provisioned
from test_stack_patches_assets import Server, asset_toml, make_patch, make_source, write_stack

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _base_image() -> str:
    return provisioned("ROCMKIT_TEST_BASE_IMAGE", ".ci/provision/20-docker.sh provides the base image", "DOCKER")


def _wheel(tmp_path: Path) -> Path:
    """A real wheel of a one-module project, made by pip on the host."""
    proj = tmp_path / "prebuilt-src"
    (proj / "prebuilt").mkdir(parents=True)
    (proj / "prebuilt" / "__init__.py").write_text("VALUE = 42\n")
    (proj / "pyproject.toml").write_text(textwrap.dedent("""\
        [build-system]
        requires = ["setuptools"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "prebuilt"
        version = "1.0"
        """))
    out = tmp_path / "served"
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out),
                    str(proj)], check=True, timeout=300)
    (wheel,) = out.glob("prebuilt-1.0-*.whl")
    return wheel


def test_patched_component_and_asset_are_in_the_image(tmp_path):
    base = _base_image()
    src = make_source(tmp_path)
    make_patch(src, tmp_path / "patches" / "greet.patch")
    wheel = _wheel(tmp_path)
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    tag = f"rocmkit-test/stackfiles:{uuid.uuid4().hex[:12]}"
    with Server(wheel.parent) as server:
        stack = write_stack(tmp_path / "s.toml", patches=["patches/greet.patch"], base=base,
                            assets=asset_toml(f"{server.url}/{wheel.name}", sha))
        r = subprocess.run([sys.executable, "-m", "rocmkit", "build", "--stack-file", str(stack), "--arch", "cpu",
                            "--source", f"greet={src}", "--network", "none", "--progress", "plain", "--tag", tag,
                            "--json"], capture_output=True, text=True, timeout=900, env={**os.environ, "CI": "true"})
    try:
        assert r.returncode == 0, r.stderr[-4000:]
        out = subprocess.run(["docker", "run", "--rm", "--network", "none", tag, "python", "-c",
                              "import greet, prebuilt; print(greet.greet(), prebuilt.VALUE);"
                              "print(open('/opt/rocmkit/sources.txt').read())"],
                             capture_output=True, text=True, check=True, timeout=120).stdout
        assert out.splitlines()[0] == "hello, rocm 42"
        assert f"greet patch patches/greet.patch sha256:{hashlib.sha256((tmp_path / 'patches' / 'greet.patch').read_bytes()).hexdigest()}" in out
        assert f"prebuilt {server.url}/{wheel.name} sha256:{sha}" in out
        manifest = json.loads(r.stdout)["manifest"]
        assert manifest["assets"][0]["sha256"] == sha
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, timeout=120)
