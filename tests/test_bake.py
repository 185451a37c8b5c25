"""`rocmkit bake`: the bake file's structure read back by independent parsers (json; python-hcl2 for HCL,
since buildx is not available on Debian 12), the HCL and JSON forms agreeing, the prepared context, and
bad input. A real build from a prepared context is in test_bake_docker.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import hcl2
import pytest

from rocmkit import stacks
from rocmkit.image.plan import make_plan

REPO = Path(__file__).resolve().parent.parent
DEV = REPO / "tests" / "data" / "stacks" / "dev-example.toml"


def rocmkit(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "rocmkit", *args], capture_output=True, text=True, timeout=120,
                          cwd=cwd, env={**os.environ})


def _unquote(value):
    """python-hcl2 keeps string quotes and marks blocks; reduce its output to plain data."""
    if isinstance(value, str):
        return json.loads(value) if value.startswith('"') else value
    if isinstance(value, list):
        return [_unquote(v) for v in value]
    if isinstance(value, dict):
        return {_unquote(k): _unquote(v) for k, v in value.items() if k != "__is_block__"}
    return value


def hcl_as_bake_json(text: str) -> dict:
    parsed = hcl2.loads(text)
    out: dict = {}
    for kind in ("variable", "group", "target"):
        out[kind] = {}
        for block in parsed.get(kind, []):
            for name, body in block.items():
                out[kind][_unquote(name)] = _unquote(body)
    return out


def test_hcl_and_json_say_the_same(tmp_path):
    hcl = rocmkit("bake", "--stack-file", str(DEV), "--format", "hcl")
    js = rocmkit("bake", "--stack-file", str(DEV), "--format", "json")
    assert hcl.returncode == 0 and js.returncode == 0, hcl.stderr + js.stderr
    assert hcl_as_bake_json(hcl.stdout) == json.loads(js.stdout)


def test_targets_groups_args_tags_labels():
    r = rocmkit("bake", "--stack-file", str(DEV), "--format", "json", "--max-jobs", "12", "--registry", "ghcr.io/org")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    stack = stacks.load_file(DEV)
    assert doc["variable"] == {"REGISTRY": {"default": "ghcr.io/org"}, "MAX_JOBS": {"default": "12"}}
    assert doc["group"]["default"]["targets"] == [stack.name]
    assert doc["group"][stack.name]["targets"] == [f"{stack.name}-{a}" for a in stack.targets]
    for arch in stack.targets:
        plan = make_plan(stack, [arch])
        t = doc["target"][f"{stack.name}-{arch}"]
        assert t["dockerfile"] == f"dockerfiles/{stack.name}-{arch}.Dockerfile"
        assert t["context"] == "." and t["target"] == "final"
        assert t["args"] == {"MAX_JOBS": "${MAX_JOBS}"}
        # The tag `rocmkit build` gives, with the registry part a variable.
        assert t["tags"] == [plan.tag.replace("rocmkit/", "${REGISTRY}/", 1)]
        assert t["labels"] == plan.labels
        assert t["labels"]["org.opencontainers.image.title"] == f"rocmkit/{stack.name}"
        assert t["attest"] == ["type=provenance,mode=max", "type=sbom"]


def test_builtin_stacks_by_default():
    names = stacks.builtin_names()
    r = rocmkit("bake", "--format", "json")
    if not names:
        assert r.returncode == 2 and "no stacks to bake" in r.stderr
        return
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["group"]["default"]["targets"] == sorted(names)
    expected = {f"{s.name}-{a}" for s in stacks.all_builtin() for a in s.targets}
    assert set(doc["target"]) == expected
    for t in doc["target"].values():
        # Every target's Dockerfile is the committed one in dockerfiles/ (kept fresh by `rocmkit render --all`).
        assert (REPO / t["dockerfile"]).is_file(), t["dockerfile"]


def test_context_dir_holds_what_the_targets_need(tmp_path):
    ctx = tmp_path / "ctx"
    r = rocmkit("bake", "--stack-file", str(DEV), "--context-dir", str(ctx))
    assert r.returncode == 0, r.stderr
    doc = hcl_as_bake_json((ctx / "docker-bake.hcl").read_text())
    for t in doc["target"].values():
        dockerfile = ctx / t["context"] / t["dockerfile"]
        assert dockerfile.is_file()
        assert "--mount=type=bind,source=rocmkit-dist" in dockerfile.read_text()
    wheels = list((ctx / "rocmkit-dist").glob("*.whl"))
    assert len(wheels) == 1 and wheels[0].name.startswith("rocmkit-")
    # The CycloneDX library the final stage's SBOM step mounts.
    assert (ctx / "rocmkit-dist" / "sbom-lib" / "cyclonedx" / "__init__.py").is_file()
    # Run again: still one wheel, the bake file regenerated in place.
    r2 = rocmkit("bake", "--stack-file", str(DEV), "--context-dir", str(ctx))
    assert r2.returncode == 0, r2.stderr
    assert len(list((ctx / "rocmkit-dist").glob("*.whl"))) == 1


def test_output_file_not_overwritten_without_force(tmp_path):
    out = tmp_path / "docker-bake.hcl"
    out.write_text("mine\n")
    r = rocmkit("bake", "--stack-file", str(DEV), "-o", str(out))
    assert r.returncode == 2 and "already exists" in r.stderr
    assert out.read_text() == "mine\n"
    r = rocmkit("bake", "--stack-file", str(DEV), "-o", str(out), "--force")
    assert r.returncode == 0 and out.read_text().startswith("# Rendered by rocmkit bake")


@pytest.mark.parametrize("fmt", ["hcl", "json"])
def test_a_users_bake_file_in_the_context_dir_is_kept_without_force(tmp_path, fmt):
    # --context-dir used to replace DIR/docker-bake.hcl whatever wrote it; rocmkit's own file is still regenerated.
    ctx = tmp_path / "ctx"
    ctx.mkdir()
    mine = ctx / f"docker-bake.{fmt}"
    mine.write_text('target "app" {}\n' if fmt == "hcl" else '{"target": {"app": {}}}\n')
    r = rocmkit("bake", "--stack-file", str(DEV), "--context-dir", str(ctx), "--format", fmt)
    assert r.returncode == 2 and "already exists and rocmkit bake did not write it" in r.stderr, r.stderr
    assert mine.read_text().startswith(("target", "{")) and not (ctx / "rocmkit-dist").exists()  # nothing touched
    r = rocmkit("bake", "--stack-file", str(DEV), "--context-dir", str(ctx), "--format", fmt, "--force")
    assert r.returncode == 0, r.stderr
    r = rocmkit("bake", "--stack-file", str(DEV), "--context-dir", str(ctx), "--format", fmt)
    assert r.returncode == 0, r.stderr  # its own file: regenerated without --force


@pytest.mark.parametrize("args, needle", [
    (["--stack", "no-such-stack"], "unknown stack 'no-such-stack'"),
    (["--registry", "bad registry"], "is not a repository prefix"),
    (["--registry", "ghcr.io/Org"], "is not a repository prefix"),
    (["--format", "yaml"], "Invalid value for '--format'"),
    (["--max-jobs", "0"], "Invalid value for '--max-jobs'"),
    (["--stack-file", str(DEV), "--stack-file", str(DEV)], "given twice"),
])
def test_bad_input_exit_2(args, needle):
    r = rocmkit("bake", *args)
    assert r.returncode == 2, r.stderr
    assert needle in r.stderr and "Traceback" not in r.stderr


def test_hcl_escapes_template_sequences():
    from rocmkit.image.bake import _hcl_string

    assert _hcl_string("a ${X} %{y}") == '"a $${X} %%{y}"'
    assert _hcl_string("${REGISTRY}/x") == '"${REGISTRY}/x"'
