"""A component from a prebuilt wheel in a real build (marker `docker`; the engine and base image of
.ci/provision/20-docker.sh): a tiny wheel served over HTTP on the loopback builds into an image offline,
its sha256 verified; a wrong sha256 fails the build naming the component and the URL; the image's pip
constraint file holds the wheel's pin and a later `pip install` of another version fails."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest
from provisioned import provisioned
from test_stack_patches_assets import Server
from tinyindex import make_wheel

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def _base_image() -> str:
    return provisioned("ROCMKIT_TEST_BASE_IMAGE", ".ci/provision/20-docker.sh provides the base image", "DOCKER")


def _stack(path: Path, base: str, url: str, sha256: str) -> Path:
    path.write_text(textwrap.dedent(f"""\
        schema = "rocmkit.stack/v1"
        name = "wheeltest"
        description = "a component from a prebuilt wheel, held by the constraint file"
        targets = ["cpu"]
        rocm = "none"
        python = "3.11"
        constraints = ["tinydep==3.0"]

        [base]
        image = "{base}"

        [[component]]
        name = "prebuilt"
        wheel = {{ url = "{url}", sha256 = "{sha256}" }}
        constrain = true
        """))
    return path


def _build(stack: Path, tag: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rocmkit", "build", "--stack-file", str(stack), "--arch", "cpu",
                           "--network", "none", "--progress", "plain", "--tag", tag, "--json"],
                          capture_output=True, text=True, timeout=900, env={**os.environ, "CI": "true"})


def _run(tag: str, *argv: str, mount: Path | None = None, env: dict[str, str] | None = None):
    args = ["docker", "run", "--rm", "--network", "none"]
    if mount:
        args += ["-v", f"{mount}:/w:ro"]
    for k, v in (env or {}).items():
        args += ["-e", f"{k}={v}"]
    return subprocess.run(args + [tag, *argv], capture_output=True, text=True, timeout=300)


def test_component_from_a_prebuilt_wheel_builds_verified_and_held(tmp_path):
    base = _base_image()
    served, other = tmp_path / "served", tmp_path / "other"
    wheel = make_wheel(served, "prebuilt", "1.0")
    newer = make_wheel(other, "prebuilt", "2.0")
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    tag = f"rocmkit-test/wheelcomp:{uuid.uuid4().hex[:12]}"
    with Server(served) as server:
        url = f"{server.url}/{wheel.name}"
        # A wrong sha256 fails before the engine is asked for anything, naming the component and the URL.
        bad = _build(_stack(tmp_path / "bad.toml", base, url, hashlib.sha256(b"not it").hexdigest()), tag + "-bad")
        assert bad.returncode == 1, bad.stderr[-2000:]
        assert f"component prebuilt: wheel {url}: sha256 {sha} differs from the stack's" in bad.stderr
        assert "Traceback" not in bad.stderr
        r = _build(_stack(tmp_path / "good.toml", base, url, sha), tag)
    try:
        assert r.returncode == 0, r.stderr[-4000:]
        manifest = json.loads(r.stdout)["manifest"]
        assert manifest["components"] == [{"name": "prebuilt", "kind": "wheel", "requirement": "prebuilt==1.0",
                                           "url": url, "sha256": sha, "constrain": True}]
        assert manifest["constraints"]["pins"] == ["prebuilt==1.0", "tinydep==3.0"]

        out = _run(tag, "sh", "-c", 'python -c "import prebuilt; print(prebuilt.VERSION)"; echo "$PIP_CONSTRAINT"; '
                                    "cat /opt/rocmkit/constraints.txt; cat /opt/rocmkit/sbom.cdx.json")
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert lines[:2] == ["1.0", "/opt/rocmkit/constraints.txt"]
        assert lines[2:4] == ["prebuilt==1.0", "tinydep==3.0"]
        sbom = json.loads("\n".join(lines[lines.index("{"):]))
        comp = next(c for c in sbom["components"] if c["name"] == "prebuilt")
        assert {"name": "rocmkit:wheel-url", "value": url} in comp["properties"]
        assert comp["hashes"] == [{"alg": "SHA-256", "content": sha}]
        assert {"name": "rocmkit:constraints-file", "value": "/opt/rocmkit/constraints.txt"} in \
            sbom["metadata"]["component"]["properties"]

        # The constraint file is enforced: another version of the pinned wheel cannot replace it...
        held = _run(tag, "pip", "install", "--no-index", f"/w/{newer.name}", mount=other)
        assert held.returncode != 0
        assert "The user requested (constraint) prebuilt==1.0" in held.stdout + held.stderr, held.stdout + held.stderr
        # ...and it is the constraint that refuses it: without it the same install goes through.
        free = _run(tag, "sh", "-c", f"pip install -q --no-index /w/{newer.name} && python -c "
                                     "'import prebuilt; print(prebuilt.VERSION)'", mount=other,
                    env={"PIP_CONSTRAINT": ""})
        assert free.returncode == 0, free.stderr
        assert free.stdout.strip().splitlines()[-1] == "2.0"
    finally:
        subprocess.run(["docker", "rmi", "-f", tag], capture_output=True, timeout=120)


def test_the_final_stage_checks_the_wheel_again(tmp_path):
    """A build context assembled by other means (here: the verified file swapped after the host's check) fails
    in the engine, naming the component and the URL, before pip sees the file."""
    from rocmkit.image.build import prepare_context
    from rocmkit.image.plan import make_plan
    from rocmkit.image.render import render_dockerfile
    from rocmkit.runtime.docker_client import probe_cli
    from rocmkit.stacks import load_file

    base = _base_image()
    wheel = make_wheel(tmp_path / "served", "prebuilt", "1.0")
    other = make_wheel(tmp_path / "other", "prebuilt", "2.0")
    with Server(wheel.parent) as server:
        url = f"{server.url}/{wheel.name}"
        sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
        plan = make_plan(load_file(_stack(tmp_path / "s.toml", base, url, sha)), ["cpu"])
        dockerfile = prepare_context(plan, render_dockerfile(plan), tmp_path / "ctx")
    (tmp_path / "ctx" / "assets" / wheel.name).write_bytes(other.read_bytes())
    cli = probe_cli(os.environ.get("ROCMKIT_DOCKER", "docker"))  # the client rocmkit builds with, as it runs it
    assert not isinstance(cli, str), cli
    r = subprocess.run(cli.build_argv() + ["--progress=plain", "--network", "none", "--target", "final", "-f",
                                           str(dockerfile), str(tmp_path / "ctx")],
                       capture_output=True, text=True, timeout=900, env=cli.build_env())
    assert r.returncode != 0
    # What the RUN printed (BuildKit's "#<step> <seconds> <line>"), not the command echoed in the step's title.
    said = [line.split(" ", 2)[2] for line in (r.stdout + r.stderr).splitlines()
            if re.match(r"^#\d+ \d+\.\d+ ", line)]
    assert f"component prebuilt: wheel {url}: sha256 differs from the stack: {sha}" in said, r.stderr[-3000:]
