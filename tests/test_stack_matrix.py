"""Every built-in stack through every command that takes a stack, from an installed wheel and a folder outside
the checkout: each cell works (exit 0) or refuses with a reason that is true.

The matrix is generated from rocmkit's own registries, not listed by hand: the built-in stacks
(rocmkit.stacks.builtin_names), the build targets (rocmkit.archs), and the click command registry (every
command with a stack parameter; a new one without a recipe here fails `test_every_stack_command_has_a_recipe`).
`diff` and `certify` take a stack through what other commands make of it (a plan's manifest, its image tag),
so they get recipes too.

The wheel is built once per session from a copy of the sources (`pip wheel --no-deps`) and installed with
`pip install --no-deps --target`; one subprocess (tests/stackmatrix.py) runs every cell with click's CliRunner,
with only that folder on PYTHONPATH and a temporary folder as its working folder (the provisioned venv's
Python supplies the dependencies). Upstreams are kept out of reach the way the lock and outdated tests keep
them local: here every HTTP(S) proxy is a closed port, so registries, git remotes and indexes answer "not
reachable" at once, and the commands must say so (exit 3) rather than hang or pass.

Where a built-in stack's lock lives, every command must agree: the `locked-*` cells run in a folder holding a
lock for every built-in stack (NAME.lock.json, where `rocmkit lock NAME` run there writes it), and `lock`,
`render`, `build` and `bake` must all name or use that lock; the other cells run where there is none (where
`lock --check` must look), and render the committed dockerfiles/. A folder that takes no file (/proc) is exit
2 for `lock`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import click
import pytest

from rocmkit import archs, stacks
from rocmkit.cli import cli
from rocmkit.image.plan import make_plan
from rocmkit.stacks.lock import lock_document, stack_images

REPO = Path(__file__).resolve().parents[1]
STACKS = stacks.builtin_names()
TARGETS = archs.known_build_targets()
DEFAULT_STACK = "verl-vllm"
CLOSED = "http://127.0.0.1:9"  # the discard port: nothing listens, a connection is refused at once
OFFLINE = {"http_proxy": CLOSED, "https_proxy": CLOSED, "HTTP_PROXY": CLOSED, "HTTPS_PROXY": CLOSED,
           "all_proxy": CLOSED, "no_proxy": "", "NO_PROXY": "", "PIP_RETRIES": "0", "PIP_TIMEOUT": "2",
           "PIP_CONFIG_FILE": os.devnull}  # no pip.conf index or find-links either
NO_ENGINE = {"DOCKER_HOST": "unix:///nonexistent/rocmkit-matrix.sock", "ROCMKIT_DOCKER": ""}
LOCKED = "locked"  # the folder, under the working folder, that holds a lock for every built-in stack
UNWRITABLE = "/proc"  # a folder no file can be made in, root or not


def _commands() -> dict[str, click.Command]:
    ctx = click.Context(cli)
    return {n: cli.get_command(ctx, n) for n in cli.list_commands(ctx)}


def takes_a_stack(cmd: click.Command) -> bool:
    return any(p.name in ("stack_name", "stack_names", "stack_file", "stack_files") for p in cmd.params)


def _engine(stack: str) -> str:
    """certify's --engine for a stack: the choice its name starts with (certify's own list), else the default."""
    opt = next(p for p in _commands()["certify"].params if p.name == "engine")
    return next((c for c in opt.type.choices if stack.split("-")[0] == c), opt.default)


def _gpus(stack: str, target: str) -> str:
    """certify's --gpus: 0 on a CPU stack; Miles' short test runs on 4 or 8 GPUs, the others' on one."""
    return "0" if target == archs.CPU else "8" if _engine(stack) == "miles" else "1"


def _cells_stack(s: str) -> list[dict]:
    info = stacks.load_builtin(s)
    out = [{"id": f"stacks/{s}", "cmd": "stacks", "argv": ["stacks", s]},
           {"id": f"bake/{s}", "cmd": "bake", "argv": ["bake", "--stack", s, "-o", f"out/{s}.hcl"]},
           {"id": f"lock-check/{s}", "cmd": "lock", "argv": ["lock", "--check", s]},
           {"id": f"outdated/{s}", "cmd": "outdated", "argv": ["outdated", s]},
           {"id": f"wheelhouse/{s}", "cmd": "wheelhouse", "argv": ["wheelhouse", "--stack", s, f"out/wh-{s}"]},
           {"id": f"venv/{s}", "cmd": "venv", "argv": ["venv", "--stack", s, f"out/venv-{s}"]},
           {"id": f"slurm/{s}", "cmd": "slurm",
            "argv": ["slurm", "--stack", s, "--nodes", "2", "--image", "registry.example/rocmkit/x:1", "--no-verl-check",
                     *(["--engine", "miles"] if _engine(s) == "miles" else []), "-o", f"out/{s}.sbatch"]},
           {"id": f"kuberay/{s}", "cmd": "kuberay",
            "argv": ["kuberay", "--stack", s, "--arch", "gfx942", "--nodes", "2", "--image", "registry.example/rocmkit/x:1",
                     "--no-verl-check", "-o", f"out/{s}.yaml"]}]
    for t in TARGETS:
        st = f"{s}/{t}"
        out += [{"id": f"render/{st}", "cmd": "render", "argv": ["render", "--stack", s, "--arch", t, "-o",
                                                                  f"out/{s}-{t}.Dockerfile"]},
                {"id": f"build/{st}", "cmd": "build", "argv": ["build", "--stack", s, "--arch", t, "--dry-run", "--json"],
                 "save": f"out/{s}-{t}.manifest.json:manifest"}]
    locked = {"cwd": LOCKED}
    # `lock` runs where a lock is, `lock --check` where none is (cells that ask registries and git remotes, even
    # offline, cost a second each): the lock each compares with is in its report
    out += [{"id": f"locked-lock/{s}", "cmd": "lock", "argv": ["lock", "--json", s], **locked},
            {"id": f"locked-bake/{s}", "cmd": "bake", "argv": ["bake", "--stack", s, "--format", "json"], **locked},
            {"id": f"unwritable-lock/{s}", "cmd": "lock", "argv": ["lock", s], "cwd": UNWRITABLE}]
    for t in info.targets:
        st = f"{s}/{t}"
        out += [{"id": f"locked-render/{st}", "cmd": "render", "argv": ["render", "--stack", s, "--arch", t], **locked},
                {"id": f"locked-build/{st}", "cmd": "build",
                 "argv": ["build", "--stack", s, "--arch", t, "--dry-run", "--json"], **locked}]
    for t in info.targets:
        st = f"{s}/{t}"
        out += [{"id": f"diff/{st}", "cmd": "diff",
                 "argv": ["diff", f"out/{DEFAULT_STACK}-gfx942.manifest.json", f"out/{s}-{t}.manifest.json"]},
                {"id": f"certify/{st}", "cmd": "certify", "env": NO_ENGINE,
                 "argv": ["certify", "--dry-run", "--engine", _engine(s), "--gpus", _gpus(s, t),
                          "--image", make_plan(info, [t]).tag, "--out", f"out/cert-{s}-{t}"]}]
    return out


def all_cells() -> list[dict]:
    cells = [c for s in STACKS for c in _cells_stack(s)]
    # diff reads the manifests that build --dry-run --json wrote: every build cell first.
    return sorted(cells, key=lambda c: c["cmd"] == "diff")


CELLS = {c["id"]: c for c in all_cells()}


@pytest.fixture(scope="session")
def installed(tmp_path_factory) -> Path:
    """rocmkit's wheel, built once from a copy of the sources and installed into a folder of its own."""
    src = tmp_path_factory.mktemp("src")
    skip = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", "build")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    for name in ("rocmkit", "templates"):
        shutil.copytree(REPO / name, src / name, ignore=skip)
    dist, target = tmp_path_factory.mktemp("dist"), tmp_path_factory.mktemp("site")
    # With setuptools and wheel in the test venv (the provisioned one has them), build without an isolated
    # environment: seconds, and no index needed; otherwise pip fetches them as pyproject's build-system says.
    local = all(importlib.util.find_spec(m) for m in ("setuptools", "wheel"))
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", *(["--no-build-isolation"] if local else []),
                        "-q", "-w", str(dist), str(src)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    wheel = next(dist.glob("rocmkit-*.whl"))
    r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-deps", "-q", "--target", str(target),
                        str(wheel)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    return target


@pytest.fixture(scope="session")
def results(installed, tmp_path_factory) -> dict:
    work = tmp_path_factory.mktemp("elsewhere")
    (work / LOCKED).mkdir()
    for name in STACKS:
        (work / LOCKED / f"{name}.lock.json").write_text(json.dumps(lock_document(
            stacks.load_builtin(name), {ref: fake_digest(ref) for ref in stack_images(stacks.load_builtin(name))})))
    cells_file = work.parent / "cells.json"
    out_file = work.parent / "results.json"
    cells_file.write_text(json.dumps(list(CELLS.values())))
    # pip's own settings go too: a PIP_FIND_LINKS wheelhouse (CI provisions one) would let `wheelhouse` succeed
    # offline for one machine and not another.
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "ROCMKIT_DEBUG") and not k.upper().startswith(("PIP_", "UV_"))}
    env.update(OFFLINE, PYTHONPATH=str(installed), CI="true", HOME=str(work), ROCMKIT_LOG_DIR=str(work / "logs"))
    r = subprocess.run([sys.executable, str(REPO / "tests" / "stackmatrix.py"), str(cells_file), str(out_file)],
                       cwd=work, env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(out_file.read_text())
    doc["__work__"] = str(work)
    return doc


def fake_digest(ref: str) -> str:
    """A digest for a base image that no registry was asked: what the locked cells must find in what they make."""
    return "sha256:" + hashlib.sha256(ref.encode()).hexdigest()


def test_every_stack_command_has_a_recipe():
    with_stack = {n for n, c in _commands().items() if takes_a_stack(c)}
    recipes = {c["cmd"] for c in CELLS.values()}
    assert with_stack <= recipes, f"commands that take a stack with no matrix recipe: {with_stack - recipes}"


def test_the_installed_wheel_is_what_ran(results, installed):
    assert Path(results["__rocmkit__"]).is_relative_to(installed), results["__rocmkit__"]
    assert not Path(results["__work__"]).is_relative_to(REPO)


def expected(cell: dict) -> tuple[int, tuple[str, ...]]:
    """The exit code a cell must have and the phrases its stderr must hold, decided from the stack's own data
    (its targets, git components, Python, Ray pin) and from where the test runs it (offline, no engine)."""
    cmd, rest = cell["id"].split("/", 1)
    name, _, target = rest.partition("/")
    stack = stacks.load_builtin(name)
    if cmd == "unwritable-lock":  # refused before any registry is asked
        return 2, (f"{UNWRITABLE}/{name}.lock.json: cannot write it",
                   f"run `rocmkit lock {name}` in a folder you can write to")
    if cmd == "locked-lock":  # the lock it would replace is the working folder's, kept
        return 3, ("could not reach", "no lock file was written")
    cmd = cmd.removeprefix("locked-")
    if cmd in ("render", "build") and target not in stack.targets:
        kind = "target" if target == archs.CPU else "arch"
        return 2, (f"stack {name} does not support {kind} {target}", f"{name} supports: {', '.join(stack.targets)}")
    if cmd == "lock-check":
        return 1, ("no lock yet: rocmkit ships none for its built-in stacks",)
    if cmd == "outdated":
        return 3, (f"no upstream of {name} answered: no pin was checked",)
    if cmd == "wheelhouse":
        if stack.git_components:
            return 2, (f"stack {name} builds {len(stack.git_components)} component(s) from git",)
        here = f"{sys.version_info.major}.{sys.version_info.minor}"
        if stack.python != here:
            return 2, (f"is Python {here}; stack {name} wants {stack.python}",)
        return 1, (f"pip wheel for stack {name} failed",)  # offline: the index is a closed port
    if cmd == "venv":
        from rocmkit.image.venv import refusal

        if refusal(stack):
            return 2, (f"error: stack {name} ", "it has no pip-only install for a venv", f"rocmkit build --stack {name}")
        here = f"{sys.version_info.major}.{sys.version_info.minor}"
        if stack.python != here and not shutil.which(f"python{stack.python}"):
            return 3, (f"stack {name} wants Python {stack.python}",)
        # offline: the base step cannot reach the index, and the venv it began is removed
        return 1, (f"venv for stack {name}: step base failed", "the venv was removed")
    if cmd in ("slurm", "kuberay") and stack.pinned_version("ray") is None:
        return 2, (f"stack {name} pins no Ray version", f"base image {stack.base.image}", "--ray-version")
    if cmd == "certify":
        return 3, ("no Docker engine reachable at unix:///nonexistent/rocmkit-matrix.sock",)
    return 0, ()


@pytest.mark.parametrize("cell", list(CELLS))
def test_cell(results, cell):
    r = results[cell]
    assert r["traceback"] is None, r["traceback"]
    code, phrases = expected(CELLS[cell])
    assert r["exit"] == code, r["stderr"][-3000:]
    for phrase in phrases:
        assert phrase in r["stderr"], r["stderr"][-3000:]
    if code:
        assert "error: " in r["stderr"], r["stderr"][-3000:]


@pytest.mark.parametrize("cell", [c for c in CELLS if c.startswith("render/") and expected(CELLS[c])[0] == 0])
def test_installed_render_is_the_committed_dockerfile(results, cell):
    """What the installed wheel renders from another folder is byte for byte the Dockerfile committed in
    dockerfiles/ (rendered from the checkout): no path, file or resource differs between the two."""
    out = Path(results["__work__"]) / CELLS[cell]["argv"][-1]
    name, target = cell.split("/")[1:]
    assert out.read_text() == (REPO / "dockerfiles" / f"{name}-{target}.Dockerfile").read_text(), \
        f"the installed wheel renders {name}-{target} otherwise than dockerfiles/ holds (stale: `rocmkit render --all`)"


def test_lock_wrote_nothing_into_the_installed_package(results, installed):
    assert not list((installed / "rocmkit" / "resources" / "stacks").glob("*.lock.json"))


def _locked_json(results, cell: str) -> dict:
    return json.loads(results[cell]["stdout"])


@pytest.mark.parametrize("name", STACKS)
def test_every_command_finds_a_builtin_stacks_lock_in_the_working_folder(results, name):
    """`lock` writes a built-in stack's lock where it, `lock --check`, render, build and bake read it:
    NAME.lock.json in the folder they run in, not rocmkit's installed package."""
    where = Path(results["__work__"]) / LOCKED / f"{name}.lock.json"
    # where the working folder holds none, that is where the check looked, and where `lock` would write it
    unlocked = Path(results["__work__"]) / f"{name}.lock.json"
    assert f"{name} ({unlocked}): FAILED" in results[f"lock-check/{name}"]["stdout"]
    wrote = _locked_json(results, f"locked-lock/{name}")["stacks"][0]
    assert wrote["lock_file"] == str(where) and wrote["lock_read"] == str(where) and not wrote["written"]
    assert "old lock kept" in wrote["result"], wrote["result"]
    # the lock it read matches its stack: only the upstreams it could not reach keep it from being rewritten
    assert not {f["kind"] for f in wrote["findings"]} & {"stale", "unlocked", "moved", "missing"}, wrote["findings"]
    stack = stacks.load_builtin(name)
    bake = _locked_json(results, f"locked-bake/{name}")["target"]
    for t in stack.targets:
        image = stack.base.image_for([t])
        pinned = image if "@" in image else f"{image}@{fake_digest(image)}"
        assert f"FROM {pinned} AS " in results[f"locked-render/{name}/{t}"]["stdout"]
        plan = _locked_json(results, f"locked-build/{name}/{t}")
        assert plan["base_image_digest"] == (None if "@" in image else fake_digest(image))
        plain = json.loads((Path(results["__work__"]) / "out" / f"{name}-{t}.manifest.json").read_text())
        assert "base_image_digest" not in plain  # the working folder itself holds no lock
        # bake's tag is build's: the inputs hash covers the digest, so both read the same lock
        assert [tag.split(":", 1)[1] for tag in bake[f"{name}-{t}"]["tags"]] == [plan["tag"].split(":", 1)[1]]
