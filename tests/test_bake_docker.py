"""A bake target builds for real from a context prepared by `rocmkit bake --context-dir` (marker `docker`).

This engine has no buildx, so the target's settings (context, dockerfile, target, args) are read from the
bake JSON and handed to the docker client rocmkit picks; the image's labels must be the target's."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid

import pytest

pytestmark = [pytest.mark.docker, pytest.mark.slow]


def test_bake_target_builds_from_prepared_context(tmp_path, base_image):
    base = base_image
    from rocmkit.runtime.docker_client import find_cli

    # A pip pin the base image already satisfies (Debian's python3-click), so the build needs no network.
    stack = tmp_path / "bake.toml"
    stack.write_text(f'''schema = "rocmkit.stack/v1"
name = "baketest"
description = "Bake test stack: one pin already satisfied in the base image"
targets = ["gfx942"]
rocm = "none"
python = "3.11"

[base]
image = "{base}"
python_from = "image"
apt = []

[[component]]
name = "click"
pip = ["click==8.1.3"]
''')
    ctx = tmp_path / "ctx"
    r = subprocess.run([sys.executable, "-m", "rocmkit", "bake", "--stack-file", str(stack), "--context-dir", str(ctx),
                        "--format", "json", "--max-jobs", "3"], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    doc = json.loads((ctx / "docker-bake.json").read_text())
    target = doc["target"]["baketest-gfx942"]
    max_jobs = doc["variable"]["MAX_JOBS"]["default"]
    cli = find_cli(None)
    tag = f"rocmkit-test/bake:{uuid.uuid4().hex[:8]}"
    argv = cli.build_argv() + ["--progress=plain", "--network", "none", "-f", target["dockerfile"],
                               "--target", target["target"], "-t", tag]
    argv += ["--build-arg", f"MAX_JOBS={target['args']['MAX_JOBS'].replace('${MAX_JOBS}', max_jobs)}"]
    if cli.mode == "buildx":
        argv.append("--load")
    build = subprocess.run(argv + [target["context"]], cwd=ctx, env=cli.build_env(), capture_output=True, text=True,
                           timeout=600)
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    import docker

    client = docker.from_env(timeout=60)
    try:
        img = client.images.get(tag)
        for key, value in target["labels"].items():
            assert img.labels.get(key) == value, key
        out = client.containers.run(tag, ["rocmkit", "--version"], remove=True, network_disabled=True).decode()
        assert "rocmkit" in out
    finally:
        client.images.remove(tag)
