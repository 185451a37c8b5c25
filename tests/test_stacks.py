"""Stack files: the built-in ones load; every kind of bad input is a clear error naming file and field."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from rocmkit import stacks
from rocmkit.cli import cli
from rocmkit.errors import InputFileError, UsageError

EXAMPLE = Path(__file__).parent / "data" / "stacks" / "dev-example.toml"


def write_variant(tmp_path: Path, old: str, new: str) -> Path:
    text = EXAMPLE.read_text()
    assert old in text, f"test bug: {old!r} not in example"
    path = tmp_path / "stack.toml"
    path.write_text(text.replace(old, new, 1))
    return path


def test_example_loads_with_every_field():
    s = stacks.load_file(EXAMPLE)
    assert s.name == "dev-example"
    assert [c.name for c in s.git_components] == ["alpha", "beta", "gamma"]
    gamma = s.component("gamma")
    assert gamma.mutable and gamma.mutable_ref == "main" and gamma.commit is None
    assert s.pinned_version("ray") == "2.53.0"
    assert s.pinned_version("Tensordict") == "0.6.2"  # names compare canonically
    assert s.base.image_for(["gfx950"]) != s.base.image_for(["gfx942"])
    assert s.post == ("vf-configs",)


def test_builtin_stacks_load_and_pin_everything():
    names = stacks.builtin_names()
    assert "verl-vllm" in names
    for s in stacks.all_builtin():
        for c in s.git_components:
            assert c.commit or c.mutable, f"{s.name}/{c.name} has neither commit nor mutable declaration"
        assert s.targets


@pytest.mark.parametrize("old,new,field,problem", [
    ('commit = "0123456789abcdef0123456789abcdef01234567"', 'commit = "0123456"', "component[0] (alpha).commit",
     "is not a full commit"),
    ('commit = "0123456789abcdef0123456789abcdef01234567"', 'commit = "main"', "component[0] (alpha).commit",
     "is not a full commit"),
    ('commit = "0123456789abcdef0123456789abcdef01234567"\n', "", "component[0] (alpha).commit", "missing required"),
    ('pip = ["ray[default]==2.53.0"]', 'pip = ["ray[default]>=2.53.0"]', "component[3] (ray).pip[0]",
     "not pinned to one exact version"),
    ('pip = ["ray[default]==2.53.0"]', 'pip = ["ray==2.*"]', "component[3] (ray).pip[0]", "not pinned"),
    ('subdir = "python"', 'subdir = "python; rm -rf /"', "component[1] (beta).subdir", "invalid value"),
    ('subdir = "python"', 'subdir = "../outside"', "component[1] (beta).subdir", "must not leave"),
    ('value = "rocm"', 'value = "rocm\\nRUN curl evil"', "component[0] (alpha).env[0].value", "invalid value"),
    ('value = "rocm"', "value = 'ro\"cm'", "component[0] (alpha).env[0].value", "invalid value"),
    ('value = "rocm"', 'value = "$(id)"', "component[0] (alpha).env[0].value", "invalid value"),
    ('git = "https://github.com/example/alpha.git"', 'git = "git@github.com:example/alpha.git"',
     "component[0] (alpha).git", "invalid value"),
    ('targets = ["gfx942", "gfx950"]', 'targets = ["gfx942", "gfx1234"]', "targets[1]", "unknown arch"),
    ('rocm = "7.0.2"', 'rocm = "seven"', "rocm", "invalid value"),
    ('needs = ["alpha", "beta"]', 'needs = ["alpha", "delta"]', "component (gamma).needs", "not a git component"),
    ('build = "setup-py"', 'build = "make"', "component[2] (gamma).build", "unknown build kind"),
    ('submodules = true', 'submodule = true', "component[0] (alpha).submodule", "unknown field"),
    ('schema = "rocmkit.stack/v1"', 'schema = "rocmkit.stack/v9"', "schema", "unsupported schema"),
    ('apt = ["cmake", "ninja-build"]', 'apt = ["cmake", "ninja-build && curl x"]', "base.apt[1]", "invalid value"),
    ('description = "A small', 'description = "A \\"quoted\\" small', "description", "invalid value"),
])
def test_bad_stack_files_name_file_and_field(tmp_path, old, new, field, problem):
    path = write_variant(tmp_path, old, new)
    with pytest.raises(InputFileError) as exc:
        stacks.load_file(path)
    assert str(path) in exc.value.message
    assert field in exc.value.message, exc.value.message
    assert problem in exc.value.message, exc.value.message


def test_dependency_cycle_is_named(tmp_path):
    path = write_variant(tmp_path, 'submodules = true', 'submodules = true\nneeds = ["gamma"]')
    with pytest.raises(InputFileError, match="dependency cycle: .*gamma.*alpha.*gamma|cycle: alpha -> gamma -> alpha"):
        stacks.load_file(path)


def test_top_level_key_after_a_table_gets_a_hint(tmp_path):
    text = EXAMPLE.read_text().replace('post = ["vf-configs"]\n', "") + '\npost = ["vf-configs"]\n'
    path = tmp_path / "s.toml"
    path.write_text(text)
    with pytest.raises(InputFileError) as exc:
        stacks.load_file(path)
    assert "env[0].post: unknown field" in exc.value.message
    assert "top-level key" in exc.value.hint


def test_invalid_toml_and_missing_file(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("name = [unclosed\n")
    with pytest.raises(InputFileError, match="not valid TOML"):
        stacks.load_file(bad)
    with pytest.raises(UsageError, match="no such file"):
        stacks.load_file(tmp_path / "missing.toml")


def test_unknown_builtin_stack_lists_the_known_ones():
    with pytest.raises(UsageError) as exc:
        stacks.load_builtin("nope")
    assert "verl-vllm" in exc.value.hint


def test_stacks_command_lists_and_shows(tmp_path):
    runner = CliRunner()
    result = runner.invoke(cli, ["stacks"])
    assert result.exit_code == 0, result.output
    assert "verl-vllm" in result.output
    result = runner.invoke(cli, ["stacks", "verl-vllm", "--json"])
    assert result.exit_code == 0
    import json

    doc = json.loads(result.output)
    assert doc["schema"] == "rocmkit.stacks/v1"
    assert doc["stacks"][0]["name"] == "verl-vllm"
    result = runner.invoke(cli, ["stacks", "nope"])
    assert result.exit_code == 2
    assert "error: unknown stack 'nope'" in result.output


def test_build_only_and_extras_fields(tmp_path):
    s = stacks.load_file(write_variant(tmp_path, 'name = "beta"', 'name = "beta"\ninstall = false\nextras = ["srt_hip"]'))
    beta = s.component("beta")
    assert beta.install is False and beta.extras == ("srt_hip",)  # gamma needs beta, so build-only is allowed
    path = write_variant(tmp_path, 'name = "alpha"', 'name = "alpha"\ninstall = false')
    text = path.read_text().replace('needs = ["alpha", "beta"]', 'needs = ["beta"]')
    path.write_text(text)
    with pytest.raises(InputFileError, match="install = false, but no component needs it"):
        stacks.load_file(path)
    with pytest.raises(InputFileError, match="amdsmi_from_rocm"):
        stacks.load_file(_with(tmp_path, ('rocm = "7.0.2"', 'rocm = "none"'),
                               ("ccache = true", "ccache = true\namdsmi_from_rocm = true")))


def _with(tmp_path, *pairs):
    text = EXAMPLE.read_text()
    for old, new in pairs:
        text = text.replace(old, new, 1)
    p = tmp_path / "s2.toml"
    p.write_text(text)
    return p


@pytest.mark.parametrize("name, first", [("verl-vllm", "patches/vllm-rocm-zero-remapped-vram.patch"),
                                         ("trl-vllm", "files/libdrm-amdgpu-ids-instinct.txt")])
def test_a_copied_builtin_stack_names_the_files_it_lacks_and_how_to_copy_them(tmp_path, name, first):
    # a built-in stack copied out for editing failed with only "no such patch file ... beside the stack file"
    from importlib import resources

    shipped = Path(str(resources.files("rocmkit.resources.stacks")))
    copy = tmp_path / "mine" / f"{name}.toml"
    copy.parent.mkdir()
    copy.write_text((shipped / f"{name}.toml").read_text())
    with pytest.raises(InputFileError) as exc:
        stacks.load_file(copy)
    assert exc.value.path == str(copy) and "no such" in exc.value.message and repr(first) in exc.value.message
    assert f"(looked for {copy.parent / first})" in exc.value.message
    assert f"`cp -r {shipped / 'files'} {shipped / 'patches'} {copy.parent}/`" in exc.value.hint
    # the command the hint gives makes the copy load, with the built-in stack's very files
    import shlex
    import subprocess

    subprocess.run(shlex.split(exc.value.hint.split("`")[1]), check=True, timeout=60)
    mine, builtin = stacks.load_file(copy), stacks.load_builtin(name)
    assert [p.sha256 for c in mine.components for p in c.patches] == [p.sha256 for c in builtin.components
                                                                        for p in c.patches]
    assert mine.amdgpu_ids.sha256 == builtin.amdgpu_ids.sha256


def test_a_missing_file_rocmkit_does_not_ship_says_where_it_was_looked_for(tmp_path):
    path = write_variant(tmp_path, 'commit = "', 'patches = ["patches/mine.patch"]\ncommit = "')
    with pytest.raises(InputFileError) as exc:
        stacks.load_file(path)
    assert f"no such patch file 'patches/mine.patch' beside the stack file (looked for {tmp_path}/patches/mine.patch)" \
        in exc.value.message and "cp -r" not in (exc.value.hint or "")


def test_the_list_says_what_mutable_means():
    r = CliRunner().invoke(cli, ["stacks"])
    assert r.exit_code == 0 and "MUTABLE]" in r.output
    assert "[N MUTABLE]: N components pinned by a branch, a tag or a short commit hash, not a full commit" in r.output
    assert "--source NAME=DIR" in r.output
    r = CliRunner().invoke(cli, ["stacks", "miles"])
    assert "[MUTABLE]: a component pinned by a branch" in r.output
