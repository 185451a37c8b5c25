"""Rendering: every stack × arch renders, lints clean, matches dockerfiles/, and has the layout the
issue asks for (stages, arch variables, MAX_JOBS, cache and bind mounts, manifest, labels)."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from rocmkit import stacks
from rocmkit.cli import cli
from rocmkit.image.plan import make_plan
from rocmkit.image.render import dockerfile_name, render_all, render_dockerfile

REPO = Path(__file__).resolve().parent.parent
EXAMPLE = Path(__file__).parent / "data" / "stacks" / "dev-example.toml"
PIP_ROCM = Path(__file__).parent / "data" / "stacks" / "pip-rocm.toml"


def all_rendered() -> list[tuple[str, str]]:
    out = [(p.name, text) for p, text in render_all(REPO / "dockerfiles").items()]
    example = stacks.load_file(EXAMPLE)
    out.append(("dev-example-gfx942", render_dockerfile(make_plan(example, ["gfx942"]))))
    wheels = stacks.load_file(PIP_ROCM)  # ROCm from wheels, wheel components, constraint pins
    out += [(f"pip-rocm-{a}", render_dockerfile(make_plan(wheels, [a]))) for a in ("gfx942", "gfx950")]
    return out


def manifest_of(text: str) -> dict:
    line = next(ln for ln in text.splitlines() if ln.startswith("RUN printf '%s\\n' "))
    quoted = line[len("RUN printf '%s\\n' "):line.rindex(" > ")]
    return json.loads(shlex.split(quoted)[0])


def instructions(text: str) -> list[str]:
    """Dockerfile instructions with continuation lines joined and comments dropped."""
    joined = re.sub(r"\\\n", " ", text)
    return [ln for ln in joined.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]


@pytest.mark.parametrize("name,text", all_rendered(), ids=lambda v: v if isinstance(v, str) and len(v) < 60 else "")
def test_rendered_dockerfile_lints_clean(find_tool, tmp_path, name, text):
    path = tmp_path / "Dockerfile"
    path.write_text(text)
    result = subprocess.run([find_tool("hadolint"), "--config", str(REPO / ".hadolint.yaml"), str(path)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, f"{name}:\n{result.stdout}{result.stderr}"


def test_dockerfiles_folder_matches_what_rocmkit_renders():
    wanted = render_all(REPO / "dockerfiles")
    present = sorted((REPO / "dockerfiles").glob("*.Dockerfile"))
    assert sorted(wanted) == present, "run `rocmkit render --all` and commit dockerfiles/"
    for path, text in wanted.items():
        assert path.read_text() == text, f"{path.name} is stale: run `rocmkit render --all`"


def test_every_stack_arch_pair_is_rendered():
    names = {p.name for p in render_all(REPO / "dockerfiles")}
    for s in stacks.all_builtin():
        for arch in s.targets:
            assert dockerfile_name(s.name, [arch]) in names


@pytest.mark.parametrize("name,text", all_rendered(), ids=lambda v: v if isinstance(v, str) and len(v) < 60 else "")
def test_layout(name, text):
    ins = instructions(text)
    froms = [i for i in ins if i.startswith("FROM ")]
    manifest = manifest_of(text)
    targets = ";".join(manifest["targets"])
    git = [c for c in manifest["components"] if c["kind"] == "git"]
    # one build stage per compiled component, then the final stage; every one starts from base
    assert len(froms) == len(git) + 2
    assert froms[-1] == "FROM base AS final"
    for c in git:
        assert f"FROM base AS build-{c['name']}" in froms
    # MAX_JOBS: a global default that is not the upstream 512, declared in every build stage
    assert re.search(r"^ARG MAX_JOBS=(\d+)$", text, re.M) and "MAX_JOBS=512" not in text
    assert "$(MAX_JOBS)" not in text
    assert text.count("\nARG MAX_JOBS\n") == len(git)
    assert text.count("export MAX_JOBS NVTE_MAX_BUILD_JOBS=") == len(git)
    # arch variables: all the same list, ;-separated; a CPU image sets none, so nothing compiles for a GPU
    if targets == "cpu":
        assert not any(i.startswith("ENV PYTORCH_ROCM_ARCH=") for i in ins) and "GPU_ARCHS" not in text
    else:
        env_line = next(i for i in ins if i.startswith("ENV PYTORCH_ROCM_ARCH="))
        for var in ("PYTORCH_ROCM_ARCH", "GPU_ARCHS", "NVTE_ROCM_ARCH", "AMDGPU_TARGET"):
            assert f'{var}="{targets}"' in env_line
    # wheels reach the final stage only through bind mounts; caches are cache mounts
    final = text[text.index("FROM base AS final"):]
    assert "COPY --from" not in text
    for c in git:
        assert f"--mount=type=bind,from=build-{c['name']},source=/wheels" in final
    assert "--mount=type=cache,target=/root/.cache/pip" in text
    # pip cannot swap ROCm torch: the constraint exists before any build stage
    assert text.index("ENV PIP_CONSTRAINT=") < text.index("FROM base AS build-") if git else True
    # every pin in the manifest and the labels
    assert manifest["schema"] == "rocmkit.manifest/v1"
    assert 'io.rocmkit.inputs-hash="' + manifest["inputs_hash"] + '"' in text
    for c in git:
        ref = c["commit"] or c["mutable_ref"]
        assert ref in text
    label = next(i for i in ins if i.startswith("LABEL "))
    assert "org.opencontainers.image.title=" in label


def test_runtime_env_carries_a_reason_for_each_variable():
    for name, text in all_rendered():
        lines = text.splitlines()
        final = lines.index("FROM base AS final")
        for i, line in enumerate(lines[final:], final):
            if line.startswith("ENV "):
                assert lines[i - 1].startswith("# "), f"{name}: {line} has no reason above it"


def test_multi_arch_image_gets_semicolon_lists():
    s = stacks.load_file(EXAMPLE)
    import dataclasses

    s = dataclasses.replace(s, components=tuple(dataclasses.replace(c, single_arch=False) for c in s.components))
    text = render_dockerfile(make_plan(s, ["gfx942", "gfx950"]))
    assert 'GPU_ARCHS="gfx942;gfx950"' in text
    assert 'HIPCC_COMPILE_FLAGS_APPEND="--offload-arch=gfx942 --offload-arch=gfx950"' in text


def test_tag_pins_are_verified_in_the_build():
    text = render_dockerfile(make_plan(stacks.load_file(EXAMPLE), ["gfx942"]))
    assert "git rev-parse 'refs/tags/v1.0.0^{commit}')\" = \"0123456789abcdef0123456789abcdef01234567\"" in text
    assert "WARNING: MUTABLE ref main" in text


def test_render_cli_errors_and_output(tmp_path):
    runner = CliRunner()
    r = runner.invoke(cli, ["render", "--stack-file", str(EXAMPLE), "--arch", "gfx1234"])
    assert r.exit_code == 2 and "unknown arch 'gfx1234'" in r.output and "gfx942" in r.output
    r = runner.invoke(cli, ["render", "--stack-file", str(EXAMPLE), "--arch", "gfx90a"])
    assert r.exit_code == 2 and "does not support arch gfx90a" in r.output
    r = runner.invoke(cli, ["render", "--stack-file", str(EXAMPLE)])
    assert r.exit_code == 2 and "--arch is required" in r.output
    out = tmp_path / "x.Dockerfile"
    r = runner.invoke(cli, ["render", "--stack-file", str(EXAMPLE), "--arch", "gfx942", "-o", str(out)])
    assert r.exit_code == 0 and out.read_text().startswith("# Rendered by rocmkit")
    assert "warning: component gamma is MUTABLE" in r.output
    r = runner.invoke(cli, ["render", "--stack-file", str(EXAMPLE), "--arch", "gfx942", "-o", str(out)])
    assert r.exit_code == 2 and "already exists" in r.output


def test_render_all_writes_checks_and_prunes(tmp_path):
    runner = CliRunner()
    out = tmp_path / "dockerfiles"
    (out).mkdir()
    (out / "gone-stack-gfx942.Dockerfile").write_text("# Rendered by rocmkit from stack gone\n")
    (out / "mine.Dockerfile").write_text("FROM scratch\n")  # not rocmkit's: left alone
    r = runner.invoke(cli, ["render", "--all", "--out-dir", str(out), "--check"])
    assert r.exit_code == 1 and "no longer rendered" in r.output
    r = runner.invoke(cli, ["render", "--all", "--out-dir", str(out)])
    assert r.exit_code == 0, r.output
    assert not (out / "gone-stack-gfx942.Dockerfile").exists() and (out / "mine.Dockerfile").exists()
    r = runner.invoke(cli, ["render", "--all", "--out-dir", str(out), "--check"])
    assert r.exit_code == 0 and "up to date" in r.output


def test_build_only_components_and_extras_render(tmp_path):
    import dataclasses

    s = stacks.load_file(EXAMPLE)
    comps = tuple(dataclasses.replace(c, install=False) if c.name == "beta" else
                  dataclasses.replace(c, extras=("srt_hip",)) if c.name == "gamma" else c for c in s.components)
    text = render_dockerfile(make_plan(dataclasses.replace(s, components=comps), ["gfx942"]))
    final = text[text.index("FROM base AS final"):]
    assert "/tmp/wheels/beta/*.whl" not in final  # build-only: mounted for its record, never installed
    assert '"$(echo /tmp/wheels/gamma/*.whl)[srt_hip]"' in final
    assert "/deps/beta/*.whl" in text  # still offered to the stage that needs it
    assert "ENV PATH=/opt/rocm/bin:/opt/rocm/llvm/bin:$PATH" in text
