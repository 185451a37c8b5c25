"""`rocmkit venv`: a stack installed into a venv the way its image installs it. The refusals are cheap and run
everywhere; one real venv from CI's verl-cpu wheelhouse (a small stack of its pins) runs where CI provisioned it.
The full verl-cpu venv is CI's own: .ci/provision/50-cpu-stacks.sh makes it with this command (the README's line,
tests/test_readme.py), and tests/test_certify_runs.py certifies verl on the CPU in it."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from provisioned import provisioned
from rocmkit import stacks
from rocmkit.image import venv as hostvenv

REPO = Path(__file__).resolve().parents[1]


def rocmkit(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "rocmkit", "venv", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)


def stack_file(tmp_path: Path, replace: dict[str, str] | None = None, name: str = "verl-cpu") -> Path:
    text = (REPO / "rocmkit" / "resources" / "stacks" / f"{name}.toml").read_text()
    for old, new in (replace or {}).items():
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / "stack.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize("name", [n for n in stacks.builtin_names() if stacks.load(n).has_rocm])
def test_a_rocm_stack_is_refused_naming_the_stack_and_why_before_anything_is_made(tmp_path, name):
    dest = tmp_path / "v"
    r = rocmkit("--stack", name, str(dest))
    assert r.returncode == 2, r.stderr
    assert f"error: stack {name} runs on ROCm " in r.stderr and "no pip-only install for a venv" in r.stderr
    assert f"rocmkit build --stack {name}" in r.stderr and "verl-cpu" in r.stderr.split("hint:")[1]
    assert not dest.exists()


def test_the_cpu_stacks_have_a_pip_only_install_and_git_or_downloads_do_not():
    cpu = stacks.load("verl-cpu")
    assert hostvenv.refusal(cpu) is None and hostvenv.refusal(stacks.load("trl-cpu")) is None
    git = next(s for s in stacks.all_builtin() if s.git_components)
    plain = dataclasses.replace(git, rocm="none", base=dataclasses.replace(git.base, provides=()))
    why = hostvenv.refusal(plain)
    assert why.startswith(f"stack {git.name} compiles ") and "from git" in why
    assert git.git_components[0].name in why


def test_a_python_of_another_version_is_refused(tmp_path):
    other = stack_file(tmp_path, {'python = "3.11"': 'python = "3.9"'})
    dest = tmp_path / "v"
    r = rocmkit("--stack-file", str(other), str(dest), "--python", sys.executable)
    assert r.returncode == 2, r.stderr
    assert f"is Python {sys.version_info[0]}.{sys.version_info[1]}; stack verl-cpu wants Python 3.9" in r.stderr
    assert "--python /path/to/python3.9" in r.stderr and not dest.exists()


def test_no_stack_and_an_existing_dest_are_refused(tmp_path):
    r = rocmkit(str(tmp_path / "v"))
    assert r.returncode == 2 and "--stack NAME" in r.stderr and "rocmkit venv --stack verl-cpu" in r.stderr
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    for force in ([], ["--force"]):
        r = rocmkit("--stack", "verl-cpu", str(mine), "--python", sys.executable, *force)
        assert r.returncode == 2 and f"{mine} exists" in r.stderr, r.stderr
        assert (mine / "notes.txt").read_text() == "keep"  # --force replaces only a venv


def test_the_steps_are_the_images_in_its_order():
    """The pip calls follow the rendered Dockerfile: the base pins with the stack's extra index, the components in
    one resolution under the held PyTorch, the removals, the no-deps component, rocmkit; a wheelhouse replaces every
    index with --no-index --find-links."""
    stack = stacks.load("verl-cpu")
    c = Path("/v/rocmkit-constraints.txt")
    online = hostvenv.steps(stack, wheelhouse=None, constraints=c, rocmkit=[("rocmkit.whl",)])
    assert [s.name for s in online] == ["base", "components", "remove", "no-deps verl", "rocmkit"]
    base, together, remove, nodeps, own = online
    assert base.args[-3:] == ("--extra-index-url", "https://download.pytorch.org/whl/cpu", "torch==2.13.0+cpu")
    assert "-c" not in base.args and ("-c", str(c)) == together.args[together.args.index("-c"):][:2]
    assert together.args[-18:] == tuple(r for comp in stack.pip_components if not comp.no_deps for r in comp.pip)
    assert remove.args == ("uninstall", "--disable-pip-version-check", "-y", "torchvision", "torchaudio", "torchcodec")
    assert nodeps.args[-2:] == ("--no-deps", "verl==0.9.1") and own.args[-1] == "rocmkit.whl"
    assert all("--timeout" in s.args for s in online if s.args[0] == "install")
    dockerfile = (REPO / "dockerfiles" / "verl-cpu-cpu.Dockerfile").read_text()
    assert "pip install " + " ".join(together.args[-18:]).replace("'", "").replace(
        "ray[default]==2.60.0", "'ray[default]==2.60.0'") in dockerfile
    offline = hostvenv.steps(stack, wheelhouse=Path("/wh"), constraints=c, rocmkit=[("rocmkit.whl",)])
    for step in offline:
        if step.args[0] == "install":
            assert "--extra-index-url" not in step.args and step.args[step.args.index("--no-index"):][:3] == (
                "--no-index", "--find-links", "/wh")


def test_a_failed_step_is_named_with_its_pip_line_and_leaves_no_venv(tmp_path):
    """Real pip, offline: a base pin the wheelhouse lacks fails the base step; the error names the step and the pip
    line, and the venv is gone."""
    from rocmkit.image.selfwheel import build_self_wheel

    wheels = tmp_path / "wh"
    build_self_wheel(wheels)
    bad = stack_file(tmp_path, {'python = "3.11"': f'python = "{sys.version_info[0]}.{sys.version_info[1]}"',
                                'pip = ["torch==2.13.0+cpu"]': 'pip = ["rocmkit-no-such-package==1.0"]'})
    dest = tmp_path / "v"
    r = rocmkit("--stack-file", str(bad), str(dest), "--wheelhouse", str(wheels), "--python", sys.executable,
                timeout=600)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "error: venv for stack verl-cpu: step base failed (exit 1): " in r.stderr
    assert "-m pip install" in r.stderr and "rocmkit-no-such-package==1.0" in r.stderr
    assert "the venv was removed" in r.stderr and not dest.exists()


def test_a_small_stack_of_verl_cpus_pins_makes_a_finished_venv_with_rocmkits_image_wheel(tmp_path):
    """Real pip from CI's verl-cpu wheelhouse: base pin, components with a removal, a no-deps component, then
    rocmkit's own wheel with its image requirements; the record is written last, `--force` replaces the venv."""
    wheelhouse = provisioned("ROCMKIT_VERL_CPU_WHEELHOUSE", ".ci/provision/50-cpu-stacks.sh makes the wheelhouse",
                             "VERL_CPU")
    text = f'''schema = "rocmkit.stack/v1"
name = "small-cpu"
description = "a few of verl-cpu's pins"
targets = ["cpu"]
rocm = "none"
python = "{sys.version_info[0]}.{sys.version_info[1]}"
post = []

[base]
image = "python:3.11-slim-bookworm"
python_from = "image"
pip = ["packaging==25.0"]

[[component]]
name = "runtime"
pip = ["pylatexenc==2.11", "codetiming==1.4.0"]
remove = ["codetiming"]
remove_why = "to see a removal"

[[component]]
name = "dill"
pip = ["dill==0.4.1"]
no_deps = true
'''
    path = tmp_path / "small.toml"
    path.write_text(text)
    dest = tmp_path / "v"
    for extra in ([], ["--force"]):
        r = rocmkit("--stack-file", str(path), str(dest), "--wheelhouse", wheelhouse, "--python", sys.executable,
                    "--rocmkit", "wheel", "--json", *extra, timeout=900)
        assert r.returncode == 0, r.stderr[-3000:]
        doc = json.loads(r.stdout)
        assert [s["name"] for s in doc["steps"]] == ["base", "components", "remove", "no-deps dill", "rocmkit"]
        assert doc["rocmkit"]["from"] == "wheel" and json.loads((dest / hostvenv.RECORD).read_text()) == doc
    assert "step 3/5 remove: removed after the install: to see a removal" in r.stderr
    got = subprocess.run([str(dest / "bin" / "python"), "-m", "pip", "list", "--format=json"], capture_output=True,
                         text=True, timeout=120)
    names = {p["name"].lower(): p["version"] for p in json.loads(got.stdout)}
    assert names["packaging"] == "25.0" and names["pylatexenc"] == "2.11" and names["dill"] == "0.4.1"
    assert "codetiming" not in names and "matplotlib" not in names  # the image's requirements, not the host CLI's
    v = subprocess.run([str(dest / "bin" / "rocmkit"), "--version"], capture_output=True, text=True, timeout=120,
                       env={"PATH": "/usr/bin:/bin"})
    assert v.returncode == 0 and "rocmkit, version" in v.stdout


def test_the_editable_step_names_the_checkout_it_locks_and_no_other_step_does():
    plan = hostvenv.steps(stacks.load("verl-cpu"), wheelhouse=Path("/wh"), constraints=Path("/c.txt"),
                          rocmkit=[("click>=8.1",), ("--no-deps", "--no-build-isolation", "-e", "/src/rocmkit")])
    assert [(s.name, s.editable) for s in plan if s.editable] == [("rocmkit", Path("/src/rocmkit"))]


EDITABLE = '''
import json, subprocess, sys, time
from pathlib import Path
from rocmkit.image.venv import checkout_lock
tree, prefix, out = sys.argv[1:4]
waited = []
with checkout_lock(Path(tree), say=waited.append):
    t0 = time.time()
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "--no-index",
                        "--no-deps", "--no-build-isolation", "--prefix", prefix, "-e", tree],
                       capture_output=True, text=True, timeout=300)
    t1 = time.time()
Path(out).write_text(json.dumps({"rc": r.returncode, "log": r.stdout + r.stderr, "held": [t0, t1], "waited": waited}))
'''


def test_two_editable_installs_from_one_checkout_at_once_take_turns_and_both_are_whole(tmp_path):
    """Real pip and setuptools, two processes started together: `pip install -e` of one checkout (laid out as
    rocmkit's: a package-dir mapping, an entry point) inside `checkout_lock`, as `rocmkit venv`'s editable step runs
    it. Both succeed, one waited for the other (their installs never overlapped), each install's metadata is whole
    and points at the checkout, and the lock left no file there."""
    tree = tmp_path / "tree"
    (tree / "pkgx").mkdir(parents=True)
    (tree / "templates").mkdir()
    (tree / "pkgx" / "__init__.py").write_text("def main():\n    print('pkgx')\n")
    (tree / "templates" / "__init__.py").write_text("")
    (tree / "pyproject.toml").write_text(
        '[build-system]\nrequires = ["setuptools>=64"]\nbuild-backend = "setuptools.build_meta"\n'
        '[project]\nname = "pkgx"\nversion = "1.0"\ndependencies = ["click>=8.1"]\n'
        '[project.scripts]\npkgx = "pkgx:main"\n'
        '[tool.setuptools]\npackages = ["pkgx", "pkgx.templates"]\npackage-dir = { "pkgx.templates" = "templates" }\n')
    before = sorted(p.relative_to(tree) for p in tree.rglob("*"))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    runs = [subprocess.Popen([sys.executable, "-c", EDITABLE, str(tree), str(tmp_path / f"p{i}"),
                              str(tmp_path / f"r{i}.json")], env=env) for i in (1, 2)]
    assert [p.wait(timeout=600) for p in runs] == [0, 0]
    got = [json.loads((tmp_path / f"r{i}.json").read_text()) for i in (1, 2)]
    for g in got:
        assert g["rc"] == 0, g["log"][-3000:]
    (a0, a1), (b0, b1) = sorted(g["held"] for g in got)
    assert a1 <= b0, "the two editable installs overlapped"
    assert sum(bool(g["waited"]) for g in got) <= 1
    for i in (1, 2):
        site = next((tmp_path / f"p{i}").glob("lib/python*/site-packages"))
        info = site / "pkgx-1.0.dist-info"
        assert "Name: pkgx\n" in (info / "METADATA").read_text() and "Requires-Dist: click>=8.1" in (
            info / "METADATA").read_text()
        assert "pkgx = pkgx:main" in (info / "entry_points.txt").read_text()
        recorded = {line.split(",")[0] for line in (info / "RECORD").read_text().splitlines()}
        assert all((site / name).exists() for name in recorded if not name.startswith("..")), recorded
        finder = "".join(p.read_text() for p in site.glob("__editable__*pkgx*"))
        assert str(tree / "pkgx") in finder and str(tree / "templates") in finder
    after = sorted(p.relative_to(tree) for p in tree.rglob("*"))
    # setuptools may leave pkgx.egg-info or build/ (older ones did, in the checkout); whole where it does; no lock file
    left = [p for p in after if p not in before and p.parts[0] not in ("pkgx.egg-info", "build")
            and "__pycache__" not in p.parts]
    assert not left, left
    if (tree / "pkgx.egg-info").exists():
        assert "Name: pkgx" in (tree / "pkgx.egg-info" / "PKG-INFO").read_text()
        assert "pkgx/__init__.py" in (tree / "pkgx.egg-info" / "SOURCES.txt").read_text()


HOLD = '''
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDONLY | os.O_DIRECTORY)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(60)
'''


def test_a_lock_held_past_the_deadline_fails_naming_the_checkout(tmp_path):
    """A holder that never lets go (stopped, frozen) is waited for until the step's deadline, then named: never a
    wait without end. Another process really holds the flock on the checkout folder."""
    from rocmkit.errors import Failed
    from rocmkit.image.venv import checkout_lock

    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        said: list[str] = []
        t0 = time.monotonic()
        with pytest.raises(Failed) as exc:
            with checkout_lock(tmp_path, say=said.append, timeout_s=1.5):
                pytest.fail("the lock was taken while another process held it")
        assert 1.5 <= time.monotonic() - t0 < 10
        assert f"waited 1.5 s for another editable install from {tmp_path}" in exc.value.message
        assert said == [f"  waiting for another editable install from {tmp_path} to end (a lock on the checkout, "
                        "at most 1.5 s)"]
    finally:
        holder.kill()
        holder.wait()
    with checkout_lock(tmp_path, say=said.append, timeout_s=1.5):  # its holder gone, the kernel freed it
        pass
