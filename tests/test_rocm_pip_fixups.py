"""The fix-ups rendered for ROCm from pip (TheRock's _rocm_sdk_core/_rocm_sdk_devel), run under sh on a fake SDK
tree: a site-packages whose core and (expanded) devel trees each hold a libamd_smi, an amd_smi package in
core's share/, and a `rocm_sdk` whose `init` expands devel as TheRock's does. The real python and pip run them;
only the absolute paths of the image (/opt/rocm, /usr/lib64, ...) are moved into the test's folder."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from rocmkit.image.plan import make_plan
from rocmkit.image.render import render_dockerfile
from rocmkit.stacks import load_file

EXAMPLE = Path(__file__).parent / "data" / "stacks" / "pip-rocm.toml"
START, END = "# ---- ROCm from pip (TheRock)", "# ---- end of the pip ROCm fix-ups"
LIB = "libamd_smi.so.26.0.0"

# What `python -m rocm_sdk` does here: `path --root` names devel; `init` expands devel, which (as TheRock's
# does) brings its own copy of libamd_smi.
ROCM_SDK_MAIN = '''
import pathlib, shutil, sys
site = pathlib.Path(__file__).resolve().parent.parent
devel = site / "_rocm_sdk_devel"
if sys.argv[1:] == ["path", "--root"]:
    print(devel)
elif sys.argv[1:] == ["init"]:
    (devel / "lib").mkdir(parents=True, exist_ok=True)
    if not (devel / "lib" / "libamd_smi.so").exists():
        shutil.copy(site / "_rocm_sdk_core" / "lib" / "LIB", devel / "lib" / "libamd_smi.so")
else:
    sys.exit("unexpected: %s" % sys.argv[1:])
'''.replace("LIB", LIB)


def fixup_steps(text: str) -> list[str]:
    """The RUN commands between the fix-ups' markers, continuation lines joined and mounts dropped."""
    block = text[text.index(START):text.index(END)]
    joined = re.sub(r"\\\n\s*", " ", block)
    runs = [ln[len("RUN "):] for ln in joined.splitlines() if ln.startswith("RUN ")]
    return [re.sub(r"--mount=\S+\s+", "", r) for r in runs]


def fake_sdk(root: Path) -> Path:
    site = root / "site"
    core = site / "_rocm_sdk_core"
    (core / "lib").mkdir(parents=True)
    (core / "__init__.py").write_text("")
    (core / "lib" / LIB).write_bytes(b"\x7fELF libamd_smi")
    (core / "lib" / "libamd_smi.so.26").symlink_to(LIB)
    (core / "lib" / "libamd_smi.so").symlink_to("libamd_smi.so.26")
    pkg = core / "share" / "amd_smi"
    (pkg / "amdsmi").mkdir(parents=True)
    (pkg / "amdsmi" / "__init__.py").write_text("")
    (pkg / "setup.py").write_text('from setuptools import setup\nsetup(name="amdsmi", version="26.0.0", '
                                  'packages=["amdsmi"])\n')
    (site / "rocm_sdk").mkdir()
    (site / "rocm_sdk" / "__init__.py").write_text("")
    (site / "rocm_sdk" / "__main__.py").write_text(ROCM_SDK_MAIN)
    (root / "lib/x86_64-linux-gnu").mkdir(parents=True)
    (root / "lib/x86_64-linux-gnu/libc.so").write_text("/* GNU ld script */\n")
    (root / "opt").mkdir()
    (root / "bin").mkdir()
    # `python` is this test's interpreter (a launcher, not a link: a venv's python finds its venv from the path
    # it was started by).
    (root / "bin" / "python").write_text(f'#!/bin/sh\nexec {sys.executable} "$@"\n')
    (root / "bin" / "python").chmod(0o755)
    return site


def run_steps(steps: list[str], root: Path) -> str:
    env = {**os.environ, "PATH": f"{root / 'bin'}:{os.environ['PATH']}", "PYTHONPATH": str(root / "site"),
           "PIP_TARGET": str(root / "target"), "PIP_NO_INDEX": "1", "PIP_NO_BUILD_ISOLATION": "0",
           "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    out = []
    for step in steps:
        for a, b in (("/opt/rocm", f"{root}/opt/rocm"), ("/usr/lib64", f"{root}/usr/lib64"),
                     ("/lib/x86_64-linux-gnu", f"{root}/lib/x86_64-linux-gnu"),
                     ("/tmp/rocmkit-amd_smi", f"{root}/amd_smi-copy")):
            step = step.replace(a, b)
        done = subprocess.run(["sh", "-ec", step], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, f"{step}\n{done.stdout}{done.stderr}"
        out.append(done.stdout)
    return "".join(out)


def real_copies(site: Path) -> set[Path]:
    return {p.resolve() for d in ("_rocm_sdk_core", "_rocm_sdk_devel") for p in (site / d / "lib").glob("libamd_smi.so*")}


def test_the_fixups_leave_one_libamd_smi_link_rocm_and_libc_and_install_amdsmi(tmp_path):
    steps = fixup_steps(render_dockerfile(make_plan(load_file(EXAMPLE), ["gfx950"])))
    assert steps[0] == "python -m rocm_sdk init"  # the wheels were installed by this image: expand devel first
    site = fake_sdk(tmp_path)
    out = run_steps(steps, tmp_path)
    devel_lib = site / "_rocm_sdk_devel" / "lib" / "libamd_smi.so"
    assert devel_lib.is_symlink() and devel_lib.resolve() == (site / "_rocm_sdk_core" / "lib" / LIB)
    assert real_copies(site) == {site / "_rocm_sdk_core" / "lib" / LIB}  # two copies before, one now
    assert f"libamd_smi: {devel_lib} ->" in out
    assert (tmp_path / "opt/rocm").resolve() == site / "_rocm_sdk_devel"
    assert os.readlink(tmp_path / "usr/lib64/libc.so") == f"{tmp_path}/lib/x86_64-linux-gnu/libc.so"
    assert (tmp_path / "target" / "amdsmi" / "__init__.py").is_file()
    assert not (tmp_path / "amd_smi-copy").exists()
    # Again, as a rebuilt layer would: nothing more is linked, nothing fails.
    assert "libamd_smi:" not in run_steps(steps[:-1], tmp_path)


def test_an_image_whose_rocm_is_already_pip_keeps_its_rocm_link_and_skips_init(tmp_path):
    text = EXAMPLE.read_text()
    text = text[:text.index("[base.rocm_wheels]")] + "rocm_from_pip = true\n" + \
        text[text.index("[[component]]"):]
    stack_file = tmp_path / "s.toml"
    stack_file.write_text(text)
    steps = fixup_steps(render_dockerfile(make_plan(load_file(stack_file), ["gfx942"])))
    assert "rocm_sdk init" not in " ".join(steps)
    root = tmp_path / "root"
    root.mkdir()
    site = fake_sdk(root)
    subprocess.run([sys.executable, "-m", "rocm_sdk", "init"], env={**os.environ, "PYTHONPATH": str(site)},
                   check=True)  # the base image did this
    (root / "opt" / "rocm").mkdir()  # and has its own /opt/rocm
    run_steps(steps, root)
    assert (root / "opt" / "rocm").is_dir() and not (root / "opt" / "rocm").is_symlink()
    assert real_copies(site) == {site / "_rocm_sdk_core" / "lib" / LIB}


@pytest.mark.parametrize("edit,error", [
    (lambda t: t.replace("[base.rocm_wheels]", "rocm_from_pip = true\n\n[base.rocm_wheels]"), "already puts ROCm"),
    (lambda t: t[:t.index("[base.rocm_wheels]")].replace('rocm = "7.14.0"', 'rocm = "none"') + "rocm_from_pip = true\n"
     + t[t.index("[[component]]"):], "needs a ROCm stack"),
])
def test_rocm_from_pip_mistakes_are_refused_naming_the_field(tmp_path, edit, error):
    from rocmkit.errors import InputFileError

    path = tmp_path / "s.toml"
    path.write_text(edit(EXAMPLE.read_text()))
    with pytest.raises(InputFileError) as exc:
        load_file(path)
    assert "base.rocm_from_pip" in str(exc.value) and error in str(exc.value)
