"""The base check in real builds (marker `docker`; the engine and base image of .ci/provision/20-docker.sh),
issue 70: a base that holds another TransformerEngine than the stack declares fails the build at its first
step, naming the component and both versions, for a small stack and for every built-in stack × arch whose
TransformerEngine comes from the base (verl-vllm: rocm/primus:v26.4's TE 2.14.0.dev0+e6ede467).

No ROCm base is reachable here, so the test bases are the provisioned Debian image with generated
distributions (a dist-info folder per component at the version wanted), a `/opt/rocm/.info/version` and the
stack's `python3.X` name for its Python: exactly what the check reads, built locally with `docker build`."""

from __future__ import annotations

import io
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

from rocmkit import stacks

pytestmark = [pytest.mark.docker, pytest.mark.slow]

OTHER_TE = "2.13.0"  # what the drifted base holds instead of the stack's TransformerEngine


def _client():
    import docker

    return docker.from_env(timeout=300)


def _base_image() -> str:
    return provisioned("ROCMKIT_TEST_BASE_IMAGE", ".ci/provision/20-docker.sh provides the base image", "DOCKER")


@pytest.fixture
def images():
    made: list[str] = []
    yield made
    client = _client()
    for ref in reversed(made):  # the built images first, then the bases they were built on
        try:
            client.images.remove(ref, force=True)
        except Exception:  # never built (a failed build), or already gone
            pass


def make_base(made: list[str], dists: dict[str, str], rocm: str | None = None, python: str | None = None) -> str:
    """The provisioned image plus generated distributions (name -> version), ROCm's version file and a
    python3.X name for the image's Python 3.11 (the check runs `python3.X` as the stack's Python)."""
    site = "/usr/lib/python3/dist-packages"
    steps = [f"mkdir -p {site}/{n.replace('-', '_')}-{v}.dist-info && printf 'Metadata-Version: 2.1\\nName: %s\\n"
             f"Version: %s\\n' {n} {v} > {site}/{n.replace('-', '_')}-{v}.dist-info/METADATA" for n, v in dists.items()]
    if rocm:
        steps.append(f"mkdir -p /opt/rocm/.info && echo {rocm}-1 > /opt/rocm/.info/version")
    if python and python != "3.11":
        steps.append(f"ln -s /usr/bin/python3.11 /usr/local/bin/python{python}")
    dockerfile = f"FROM {_base_image()}\nRUN {' && '.join(steps) or 'true'}\n"
    tag = f"rocmkit-test/provides-base:{uuid.uuid4().hex[:12]}"
    # Through the engine's API (its classic builder), whichever docker client is first on PATH.
    _client().images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=tag, network_mode="none", rm=True)
    made.append(tag)
    return tag


def build(made: list[str], *args: str, base: str, log: Path) -> subprocess.CompletedProcess:
    tag = f"rocmkit-test/provides:{uuid.uuid4().hex[:12]}"
    r = subprocess.run([sys.executable, "-m", "rocmkit", "build", *args, "--base-image", base, "--network", "none",
                        "--progress", "plain", "--tag", tag, "--log-file", str(log), "--json"],
                       capture_output=True, text=True, timeout=1200, env={**os.environ, "CI": "true"})
    made.append(tag)
    return r


def drift_lines(text: str) -> list[str]:
    return sorted(set(re.findall(r"rocmkit: (component \S+: the stack declares [^\n;]*)", text)))


def test_a_base_with_another_te_fails_at_the_first_step_and_the_declared_one_builds(tmp_path, images):
    stack = tmp_path / "stack.toml"
    stack.write_text(textwrap.dedent("""\
        schema = "rocmkit.stack/v1"
        name = "providetest"
        description = "a stack that takes TransformerEngine from its base"
        targets = ["cpu"]
        rocm = "none"
        python = "3.11"
        component = []

        [base]
        image = "example/not-used:1"

        [[base.provides]]
        name = "transformer-engine"
        distribution = "transformer_engine"
        version = "2.14.0.dev0+e6ede467"
        """))
    drifted = make_base(images, {"transformer_engine": OTHER_TE})
    r = build(images, "--stack-file", str(stack), "--arch", "cpu", base=drifted, log=tmp_path / "bad.log")
    assert r.returncode == 1, r.stderr[-3000:]
    assert drift_lines(r.stderr) == [("component transformer-engine: the stack declares 2.14.0.dev0+e6ede467, "
                                      f"the base image holds {OTHER_TE}")]
    # The check itself, right after the step that writes it; rocmkit's error line quotes the check's words.
    assert re.search(r"^error: build failed in stage base, step 3/\d+: component transformer-engine: the stack "
                     r"declares 2\.14\.0\.dev0\+e6ede467, the base image holds 2\.13\.0$", r.stderr,
                     re.MULTILINE), r.stderr[-2000:]
    log = (tmp_path / "bad.log").read_text()
    assert "-m venv" not in log.split("rocmkit: component", 1)[0].split("basecheck.py base", 1)[1]

    held = make_base(images, {"transformer_engine": "2.14.0.dev0+e6ede467"})
    r = build(images, "--stack-file", str(stack), "--arch", "cpu", base=held, log=tmp_path / "good.log")
    assert r.returncode == 0, r.stderr[-3000:]
    ref = json.loads(r.stdout)["image"]["tags"][0]
    client = _client()
    out = client.containers.run(ref, ["cat", "/opt/rocmkit/base-versions.txt", "/opt/rocmkit/constraints.txt"],
                                remove=True, network_disabled=True).decode()
    assert "transformer-engine 2.14.0.dev0+e6ede467 transformer_engine" in out
    assert "transformer_engine==2.14.0.dev0+e6ede467" in out.lower().replace("-", "_")  # held for pip
    labels = client.images.get(ref).labels
    assert labels["io.rocmkit.base-provides"] == "transformer-engine=2.14.0.dev0+e6ede467"


def _te_from_base():
    """Every built-in stack × arch whose TransformerEngine comes from the base at a declared version."""
    out = []
    for s in stacks.all_builtin():
        te = next((p for p in s.base.provides if p.name == "transformer-engine" and not p.mutable), None)
        out += [(s, arch) for arch in s.targets] if te else []
    return out


def test_verl_vllm_is_among_the_stacks_whose_te_the_base_provides():
    assert {("verl-vllm", "gfx942"), ("verl-vllm", "gfx950")} <= {(s.name, a) for s, a in _te_from_base()}


@pytest.mark.parametrize("stack, arch", _te_from_base(), ids=lambda v: getattr(v, "name", v))
def test_a_built_in_stacks_build_fails_against_a_base_with_another_te(stack, arch, tmp_path, images):
    """The stack's own rendered Dockerfile (FROM the test base), against a base that holds everything the stack
    declares but another TransformerEngine: the first step fails, naming TE and both versions, and nothing
    else."""
    dists = {p.distribution: p.version for p in stack.base.provides if not p.mutable}
    dists["transformer_engine"] = OTHER_TE
    base = make_base(images, dists, rocm=stack.rocm if not stack.base.rocm_wheels else None, python=stack.python)
    r = build(images, "--stack", stack.name, "--arch", arch, base=base, log=tmp_path / "build.log")
    assert r.returncode == 1, r.stderr[-3000:]
    declared = next(p.version for p in stack.base.provides if p.name == "transformer-engine")
    assert drift_lines(r.stderr) == [(f"component transformer-engine: the stack declares {declared}, "
                                      f"the base image holds {OTHER_TE}")], r.stderr[-3000:]
    assert "build failed in stage base, step 3/" in r.stderr
