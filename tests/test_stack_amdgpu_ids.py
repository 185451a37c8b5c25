"""`[amdgpu_ids]`: the Instinct lines of libdrm's amdgpu.ids that the gfx950 stacks append to the image's
table (ROCm/ROCm#5992: an older table names an MI355X "AMD Radeon Graphics"). The shipped lines are the real
ones of tests/data/libdrm-amdgpu-ids-instinct.fixture.txt (libdrm data/amdgpu.ids, its header names the
commit); the rendered RUN step is run under sh against a scratch copy of the two libdrm paths."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from rocmkit import stacks
from rocmkit.errors import InputFileError
from rocmkit.image.plan import make_plan
from rocmkit.image.render import render_dockerfile
from rocmkit.stacks import load_file

FIXTURE = Path(__file__).parent / "data" / "libdrm-amdgpu-ids-instinct.fixture.txt"
SHIPPED = Path(stacks.__file__).parent.parent / "resources" / "stacks" / "files" / "libdrm-amdgpu-ids-instinct.txt"


def _lines(path: Path) -> list[str]:
    return [x for x in path.read_text().splitlines() if x and not x.startswith("#") and x.count(",\t") == 2]


def test_shipped_lines_are_the_fixtures_instinct_lines_verbatim():
    fixture = _lines(FIXTURE)
    shipped = _lines(SHIPPED)
    assert shipped == [x for x in fixture if "Instinct" in x]
    assert "75A3,\t00,\tAMD Instinct MI355X" in shipped and "75A0,\t00,\tAMD Instinct MI350X" in shipped
    head = FIXTURE.read_text().splitlines()[0]
    commit = re.search(r"@ ([0-9a-f]{40})", head)[1]
    assert commit in SHIPPED.read_text()  # the source travels with the lines


def _libdrm_from_pip_rocm10(s) -> bool:
    """ROCm >= 10 from pip (TheRock): its libdrm has the amdgpu.ids table built in, so SGLang's, vLLM's and ATOM's
    rocm1000 Dockerfiles append nothing (their fix-ups: rocm-sdk init, /opt/rocm, libamd_smi, libc.so, amdsmi)."""
    return (s.base.rocm_from_pip or bool(s.base.rocm_wheels)) and int(s.rocm.split(".")[0]) >= 10


GFX950 = [n for n in stacks.builtin_names() if "gfx950" in stacks.load_builtin(n).targets]


@pytest.mark.parametrize("name", [n for n in GFX950 if not _libdrm_from_pip_rocm10(stacks.load_builtin(n))])
def test_every_gfx950_stack_appends_the_lines(name):
    s = stacks.load_builtin(name)
    assert s.amdgpu_ids and s.amdgpu_ids.file == "files/libdrm-amdgpu-ids-instinct.txt" and "5992" in s.amdgpu_ids.why
    text = render_dockerfile(make_plan(s, ["gfx950"]))
    for d, r, n in s.amdgpu_ids.entries:
        assert re.search(rf"^      {d} {r} '?{re.escape(n)}'? \\$", text, re.M), (d, r, n)
    assert "/usr/share/libdrm/amdgpu.ids /opt/amdgpu/share/libdrm/amdgpu.ids" in text
    m = make_plan(s, ["gfx950"]).manifest["amdgpu_ids"]
    assert m["sha256"] == s.amdgpu_ids.sha256 and m["entries"] == len(s.amdgpu_ids.entries)


@pytest.mark.parametrize("name", [n for n in GFX950 if _libdrm_from_pip_rocm10(stacks.load_builtin(n))])
def test_a_gfx950_stack_on_pip_rocm10_appends_nothing(name):
    s = stacks.load_builtin(name)
    assert s.amdgpu_ids is None
    text = render_dockerfile(make_plan(s, ["gfx950"]))
    assert "AMD Instinct MI355X" not in text and "amdgpu_ids" not in make_plan(s, ["gfx950"]).manifest


def _run_step(text: str, root: Path) -> str:
    lines = text.splitlines()
    start = next(i for i, x in enumerate(lines) if x.startswith("RUN printf '%s,\\t%s,\\t%s\\n'"))
    end = next(i for i in range(start, len(lines)) if "rm -f /tmp/rocmkit-amdgpu.ids" in lines[i])
    body = "\n".join(lines[start:end + 1])[len("RUN "):]
    for a, b in (("/usr/share/libdrm", f"{root}/usr/share/libdrm"), ("/opt/amdgpu", f"{root}/opt/amdgpu"),
                 ("/tmp/rocmkit-amdgpu", f"{root}/rk")):
        body = body.replace(a, b)
    return subprocess.run(["sh", "-ec", body], check=True, capture_output=True, text=True).stdout


def test_the_rendered_step_appends_only_what_the_table_lacks(tmp_path):
    text = render_dockerfile(make_plan(stacks.load_builtin("miles-rocm720"), ["gfx950"]))
    table = tmp_path / "opt/amdgpu/share/libdrm/amdgpu.ids"
    table.parent.mkdir(parents=True)
    (tmp_path / "usr/share/libdrm").mkdir(parents=True)
    (tmp_path / "usr/share/libdrm/amdgpu.ids").symlink_to(table)  # one table behind two paths: edited once
    table.write_text("# old\n1.0.0\n74A1,\t00,\tAMD Instinct MI300X\n")
    out = _run_step(text, tmp_path)
    assert out.count("line(s) added") == 1
    got = _lines(table)
    assert got[0] == "74A1,\t00,\tAMD Instinct MI300X" and got.count("74A1,\t00,\tAMD Instinct MI300X") == 1
    assert set(got) == set(_lines(SHIPPED))
    _run_step(text, tmp_path)  # again: nothing more
    assert _lines(table) == got


def test_a_table_is_made_where_the_image_has_none(tmp_path):
    text = render_dockerfile(make_plan(stacks.load_builtin("miles-rocm720"), ["gfx950"]))
    _run_step(text, tmp_path)
    made = (tmp_path / "usr/share/libdrm/amdgpu.ids").read_text().splitlines()
    assert made[0] == "1.0.0" and made[1:] == _lines(SHIPPED)


STACK = """schema = "rocmkit.stack/v1"
name = "ids"
description = "d"
targets = ["gfx950"]
rocm = "7.2.0"
python = "3.12"
[base]
image = "rocm/dev-ubuntu-22.04:7.2-complete"
python_from = "image"
[[component]]
name = "x"
pip = ["x==1.0"]
[amdgpu_ids]
file = "ids.txt"
why = "w"
"""


@pytest.mark.parametrize("content,error", [
    ("75a3,\t00,\tAMD Instinct MI355X\n", "ids.txt:1: not an amdgpu.ids line"),
    ("75A3, 00, AMD Instinct MI355X\n", "not an amdgpu.ids line"),
    ("75A3,\t00,\tAMD Instinct MI355X\n75A3,\t00,\tAMD Instinct MI355X\n", "twice"),
    ("# only a comment\n", "no amdgpu.ids line"),
    (None, "no such file"),
])
def test_bad_tables_are_refused_naming_the_line(tmp_path, content, error):
    (tmp_path / "s.toml").write_text(STACK)
    if content is not None:
        (tmp_path / "ids.txt").write_text(content)
    with pytest.raises(InputFileError, match=re.escape(error)):
        load_file(tmp_path / "s.toml")
