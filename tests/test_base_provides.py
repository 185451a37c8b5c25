"""`[[base.provides]]` (issue 70): what a stack takes from its base image is declared with the exact version,
validated like every other stack value, and checked by the build's first step, whose script is run here on
this machine's Python against generated distributions (the docker test builds it against a real base)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rocmkit import stacks
from rocmkit.errors import InputFileError
from rocmkit.image import basecheck
from rocmkit.image.plan import make_plan
from rocmkit.image.render import render_dockerfile
from rocmkit.tomlread import load_toml_text

TE = "2.14.0.dev0+e6ede467"

STACK = """
schema = "rocmkit.stack/v1"
name = "provided"
description = "a stack on a base that holds TransformerEngine"
targets = ["gfx942"]
rocm = "7.14.0"
python = "3.12"

[base]
image = "example/base:1"
python_from = "{python_from}"
{provides}

[[component]]
name = "extras"
pip = ["{pip}"]
"""

TE_ENTRY = f"""
[[base.provides]]
name = "transformer-engine"
distribution = "transformer_engine"
version = "{TE}"
source_note = "the base's table"
"""


def parse(provides: str = TE_ENTRY, python_from: str = "image", pip: str = "six==1.16.0"):
    text = STACK.format(provides=provides, python_from=python_from, pip=pip)
    return stacks.parse_stack(load_toml_text(text, "provided.toml"), "provided.toml", None)


def test_a_declared_component_is_read_into_the_stack():
    (p,) = parse().base.provides
    assert (p.name, p.distribution, p.version, p.mutable) == ("transformer-engine", "transformer_engine", TE, False)


@pytest.mark.parametrize("entry, field, says", [
    ('name = "te"\ndistribution = "transformer_engine"', "base.provides[0] (te).version", "missing required field"),
    ('name = "te"\ndistribution = "transformer_engine"\nversion = "2.0;rm -rf /"', "version", "invalid value"),
    ('name = "te"\ndistribution = "transformer_engine"\nversion = "2.0$(id)"', "version", "invalid value"),
    ('name = "te"\ndistribution = "transformer engine"\nversion = "2.0"', "distribution", "invalid value"),
    ('name = "te"\ndistribution = "transformer_engine"\nversion = "2.14.0-dev0"', "version",
     "not written as its metadata writes it"),
    ('name = "te"\ndistribution = "transformer_engine"\nversion = "2.0"\nmutable = { reason = "x" }', "mutable",
     "one of version, release or mutable"),
    ('name = "te"\ndistribution = "te"\nversion = "2.0"\nflavour = "x"', "flavour", "unknown field"),
])
def test_a_bad_entry_names_its_field(entry, field, says):
    with pytest.raises(InputFileError) as exc:
        parse("[[base.provides]]\n" + entry)
    assert field in exc.value.message and says in exc.value.message


def test_the_normalised_version_is_offered():
    with pytest.raises(InputFileError) as exc:
        parse('[[base.provides]]\nname = "te"\ndistribution = "te"\nversion = "2.14.0-dev0"')
    assert "'2.14.0.dev0'" in exc.value.hint


def test_contradictions_are_refused():
    with pytest.raises(InputFileError, match="two entries with the distribution"):
        parse(TE_ENTRY + TE_ENTRY.replace('name = "transformer-engine"', 'name = "te"'))
    with pytest.raises(InputFileError, match="also installed by this stack"):
        parse(pip="transformer-engine==2.0")
    wheel = STACK.format(provides=TE_ENTRY, python_from="image", pip="six==1.16.0") + (
        '\n[[component]]\nname = "te-wheel"\n'
        'wheel = { pin = "transformer_engine==2.0", index_url = "https://example.com/simple" }\n')
    with pytest.raises(InputFileError, match="also installed by this stack"):
        stacks.parse_stack(load_toml_text(wheel, "provided.toml"), "provided.toml", None)
    with pytest.raises(InputFileError, match="also a component of this stack"):
        parse(TE_ENTRY.replace('name = "transformer-engine"', 'name = "extras"'))
    with pytest.raises(InputFileError, match="deadsnakes"):
        parse(python_from="deadsnakes")


def test_a_mutable_entry_needs_its_reason_and_is_said_loudly():
    s = parse('[[base.provides]]\nname = "aiter"\ndistribution = "amd-aiter"\n'
              'mutable = { reason = "no file names it" }')
    (p,) = s.base.provides
    assert p.mutable and p.mutable_reason == "no file names it" and p.pin() == "amd-aiter (MUTABLE)"
    plan = make_plan(s, ["gfx942"])
    assert any("base component aiter is MUTABLE" in w and "no file names it" in w for w in plan.warnings)
    assert plan.labels["io.rocmkit.base-provides"] == "aiter=MUTABLE"
    assert "aiter" in plan.labels["io.rocmkit.mutable-components"].split(",")


def test_the_plan_records_what_the_base_must_hold():
    plan = make_plan(parse(), ["gfx942"])
    assert plan.manifest["base_provides"] == [{"name": "transformer-engine", "distribution": "transformer_engine",
                                               "version": TE}]
    assert plan.labels["io.rocmkit.base-provides"] == f"transformer-engine={TE}"
    # A stack that declares nothing keeps its manifest (so its inputs hash and tag) as they were.
    assert "base_provides" not in make_plan(parse(provides=""), ["gfx942"]).manifest


def _runs(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(("RUN ", "FROM "))]


def test_the_check_is_the_first_step_of_the_base_and_the_last_of_final():
    text = render_dockerfile(make_plan(parse(), ["gfx942"]))
    runs = _runs(text)
    assert runs[0].startswith("FROM example/base:1 AS base") and runs[1] == "RUN mkdir -p /opt/rocmkit \\"
    assert runs[2].startswith("RUN python3.12 /opt/rocmkit/basecheck.py base")
    assert f"RUN python3.12 /opt/rocmkit/basecheck.py base rocm - 7.14.0 transformer-engine transformer_engine {TE}" \
        in text
    final = text.index("FROM base AS final")
    recheck = text.index(f"RUN python /opt/rocmkit/basecheck.py final transformer-engine transformer_engine {TE}")
    # After every install of the final stage (rocmkit's own included), before the manifest is written.
    assert final < text.rindex("pip install", 0, recheck) and "pip install" not in text[recheck:]
    assert "/opt/rocmkit/manifest.json" in text[recheck:]
    # Held by the constraint file at what the base holds, however pip spells the name.
    assert "grep -iE '^(torch|torchvision|torchaudio|transformer[-_.]engine)=='" in text


def test_every_built_in_gpu_stack_checks_its_base_rocm_first():
    for s in stacks.all_builtin():
        if s.on_cpu:
            continue
        for arch in s.targets:
            text = render_dockerfile(make_plan(s, [arch]))
            wanted = s.base.rocm_wheels is None
            assert (f"basecheck.py base rocm - {s.rocm}" in text) is wanted, (s.name, arch)


# ---- the script itself, on this machine's Python, against generated distributions ----

def _dist(site: Path, name: str, version: str) -> None:
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")


def _check(tmp_path: Path, site: Path, *args: str, when: str = "base",
           env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    script = tmp_path / "rocmkit" / "basecheck.py"
    script.parent.mkdir(exist_ok=True)
    script.write_text("\n".join(basecheck.script_lines()) + "\n")
    # -S: only the generated distributions are on the path, not this venv's.
    return subprocess.run([sys.executable, "-S", str(script), when, *args], capture_output=True, text=True,
                          timeout=60, env={"PYTHONPATH": str(site), "PATH": os.environ.get("PATH", ""), **(env or {})})


def test_the_script_fails_naming_the_component_and_both_versions(tmp_path):
    site = tmp_path / "site"
    _dist(site, "transformer_engine", "2.13.0")
    r = _check(tmp_path, site, "transformer-engine", "transformer_engine", TE, "flash-attention", "flash_attn", "2.8.3")
    assert r.returncode == 1
    assert f"component transformer-engine: the stack declares {TE}, the base image holds 2.13.0" in r.stderr
    assert "component flash-attention: the stack declares 2.8.3, the base image holds none (absent)" in r.stderr
    assert "rocmkit lock" in r.stderr  # the hint: pin the base by digest


def test_the_script_passes_and_records_what_it_read(tmp_path):
    site = tmp_path / "site"
    _dist(site, "transformer_engine", TE)
    _dist(site, "torch", "2.12.0+rocm7.14.0a20260608")
    _dist(site, "amd_aiter", "0.1.6.dev3+gb5e03ed19")
    r = _check(tmp_path, site, "transformer-engine", "transformer-engine", TE, "torch", "torch", "2.12.0",
               "aiter", "amd-aiter", "-")
    assert r.returncode == 0, r.stderr
    recorded = (tmp_path / "rocmkit" / "base-versions.txt").read_text().splitlines()
    assert recorded == [f"transformer-engine {TE} transformer-engine", "torch 2.12.0+rocm7.14.0a20260608 torch",
                        "aiter 0.1.6.dev3+gb5e03ed19 amd-aiter"]
    # A local label declared must match exactly; without one, any local build of that version does.
    assert _check(tmp_path, site, "torch", "torch", "2.12.0+rocm7.2").returncode == 1


def test_the_final_check_says_an_install_replaced_it(tmp_path):
    site = tmp_path / "site"
    _dist(site, "transformer_engine", "2.0.0")
    r = _check(tmp_path, site, "transformer-engine", "transformer_engine", TE, when="final")
    assert r.returncode == 1 and f"the stack declares {TE}, the image holds 2.0.0" in r.stderr
    assert "a later install replaced" in r.stderr


@pytest.mark.skipif(os.path.exists("/opt/rocm/.info/version"), reason="this machine's own ROCm would be read")
def test_the_script_reads_rocm_from_therocks_sdk_by_its_release(tmp_path):
    site = tmp_path / "site"
    _dist(site, "rocm_sdk_core", "7.14.0a20260608")
    assert _check(tmp_path, site, "rocm", "-", "7.14.0").returncode == 0
    assert _check(tmp_path, site, "rocm", "-", "7.14").returncode == 0
    assert _check(tmp_path, site, "rocm", "-", "7.1").returncode == 1
    r = _check(tmp_path, site, "rocm", "-", "7.2.0")
    assert r.returncode == 1 and "component rocm: the stack declares 7.2.0, the base image holds 7.14.0a20260608" \
        in r.stderr
    r = _check(tmp_path, tmp_path / "empty", "rocm", "-", "7.2.0")
    assert "holds none (absent)" in r.stderr


def test_a_locked_built_in_stack_checks_the_base_it_pins_by_digest(tmp_path, monkeypatch):
    """verl-vllm with a lock beside it (`rocmkit lock` writes NAME.lock.json in the current folder): FROM names
    rocm/primus:v26.4 by digest, and the check still runs first (a digest fixes the content; the check says
    whether that content is what the stack declares)."""
    import json

    digest = "sha256:" + "b" * 64
    monkeypatch.chdir(tmp_path)
    stack = stacks.load_builtin("verl-vllm")
    (tmp_path / "verl-vllm.lock.json").write_text(json.dumps({
        "schema": "rocmkit.lock/v1", "stack": "verl-vllm", "images": {"rocm/primus:v26.4": digest},
        "git": {c.name: {"git": c.git, "commit": c.commit, "tag": c.tag} for c in stack.git_components}}))
    locked = stacks.load_builtin("verl-vllm")
    assert locked.lock is not None and not locked.lock.stale
    text = render_dockerfile(make_plan(locked, ["gfx942"]))
    runs = _runs(text)
    assert runs[0] == f"FROM rocm/primus:v26.4@{digest} AS base"
    assert runs[2].startswith("RUN python3.12 /opt/rocmkit/basecheck.py base rocm - 7.14.0 ")
    assert f"transformer-engine transformer_engine {TE}" in runs[2]


def test_stacks_shows_what_comes_from_the_base():
    from click.testing import CliRunner

    from rocmkit.cli import cli

    out = CliRunner().invoke(cli, ["stacks", "verl-vllm"]).output
    assert f"from base  transformer-engine   transformer_engine=={TE} checked by the build" in out
    assert "from base  aiter                amd-aiter (MUTABLE)                      recorded by the build" in out


def test_a_release_entry_matches_any_build_of_that_release(tmp_path):
    """`release = "2.9.1"` where a source gives only an image tag's numbers: AMD's builds carry dev and local
    labels (2.9.1.dev20251204+rocm7.0.2.lw.git351ff442) that no published file gives for that image."""
    s = parse('[[base.provides]]\nname = "torch"\ndistribution = "torch"\nrelease = "2.9.1"')
    (p,) = s.base.provides
    assert p.release == "2.9.1" and not p.mutable and p.pin() == "torch release 2.9.1"
    plan = make_plan(s, ["gfx942"])
    assert plan.labels["io.rocmkit.base-provides"] == "torch=2.9.1.*"
    assert "RUN python3.12 /opt/rocmkit/basecheck.py base rocm - 7.14.0 torch torch release:2.9.1" in \
        render_dockerfile(plan)
    with pytest.raises(InputFileError, match="one of version, release or mutable"):
        parse('[[base.provides]]\nname = "torch"\ndistribution = "torch"\nrelease = "2.9.1"\nversion = "2.9.1"')
    with pytest.raises(InputFileError) as exc:
        parse('[[base.provides]]\nname = "torch"\ndistribution = "torch"\nrelease = "2.9.1+rocm"')
    assert "release numbers only" in exc.value.hint
    site = tmp_path / "site"
    _dist(site, "torch", "2.9.1.dev20251204+rocm7.0.2.lw.git351ff442")
    assert _check(tmp_path, site, "torch", "torch", "release:2.9.1").returncode == 0
    r = _check(tmp_path, site, "torch", "torch", "release:2.10.0")
    assert r.returncode == 1 and ("component torch: the stack declares release 2.10.0, the base image holds "
                                  "2.9.1.dev20251204+rocm7.0.2.lw.git351ff442") in r.stderr


@pytest.mark.skipif(os.path.exists("/opt/rocm/.info/version"), reason="this machine's own ROCm would be read")
@pytest.mark.parametrize("written", ["7.0.2-56", "7.0.2.70002-56~22.04", "7.0.2"])
def test_the_script_reads_a_rocm_trees_version_file(tmp_path, written):
    """ROCm installed as a tree (its .info/version, here found through ROCM_PATH) by its release, whatever build
    suffix follows."""
    tree = tmp_path / "rocm-7.0.2"
    (tree / ".info").mkdir(parents=True)
    (tree / ".info" / "version").write_text(written + "\n")
    env = {"ROCM_PATH": str(tree)}
    assert _check(tmp_path, tmp_path / "empty", "rocm", "-", "7.0.2", env=env).returncode == 0
    r = _check(tmp_path, tmp_path / "empty", "rocm", "-", "7.2.0", env=env)
    assert r.returncode == 1 and f"component rocm: the stack declares 7.2.0, the base image holds {written}" in r.stderr
    recorded = (tmp_path / "rocmkit" / "base-versions.txt").read_text()
    assert recorded == f"rocm {written} {tree}/.info/version\n"

