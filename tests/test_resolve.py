"""`rocmkit stacks --resolve`: pip's real resolver, against a local HTTP index of tiny wheels (fast,
deterministic: how conflicts are named, stack lines, unreachable sources, git requirements) and, in two
tests, against the real PyPI (verl's [megatron] extra as published; nvidia-modelopt vs setuptools 79)."""

from __future__ import annotations

import functools
import json
import subprocess
import sys
import threading
import zipfile
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from rocmkit import stacks
from rocmkit.stacks.resolve import parse_pip_failure, resolve

PY = f"{sys.version_info.major}.{sys.version_info.minor}"

# name -> {version: [Requires-Dist, ...]}
WHEELS = {
    "setupx": {"79.0.1": [], "80.9.0": []},
    "modelx": {"0.44.0": ["setupx>=80"]},
    "bridgex": {"0.5.0": ["cudaonly>=1"]},  # cudaonly is on no index: bridgex installs only without deps
    "corex": {"0.18.0": ["numx"]},
    "numx": {"2.2.6": []},
    "torchx": {"1.0+local": []},  # served by no index: stood in when its find-links page is unreachable
    "visionx": {"0.5": ["torchx==1.0+local"]},
}


def _wheel(directory: Path, name: str, version: str, requires: list[str]) -> None:
    info = f"{name}-{version}.dist-info"
    meta = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(f"Requires-Dist: {r}\n" for r in requires)
    with zipfile.ZipFile(directory / f"{name}-{version}-py3-none-any.whl", "w") as z:
        z.writestr(f"{name}/__init__.py", "")
        z.writestr(f"{info}/METADATA", meta)
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    """A PEP 503 index (http.server's folder listings) of the WHEELS, on a real local HTTP server."""
    root = tmp_path_factory.mktemp("index")
    for name, versions in WHEELS.items():
        if name == "torchx":
            continue
        d = root / "simple" / name
        d.mkdir(parents=True)
        for version, requires in versions.items():
            _wheel(d, name, version, requires)
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(root)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/simple/"
    server.shutdown()


def _stack(tmp_path: Path, base_pip: list[str], components: str, extra_base: str = "") -> Path:
    path = tmp_path / "s.toml"
    path.write_text(f'''schema = "rocmkit.stack/v1"
name = "resolvetest"
description = "resolve test"
targets = ["cpu"]
rocm = "none"
python = "{PY}"

[base]
image = "python:{PY}-slim"
python_from = "image"
pip = {json.dumps(base_pip)}
{extra_base}
{components}''')
    return path


def _line(path: Path, text: str) -> str:
    n = next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if f'"{text}"' in ln)
    return f"{path}:{n}"


def test_a_two_sided_conflict_names_both_pins_and_their_stack_lines(tmp_path, index):
    path = _stack(tmp_path, ["setupx==79.0.1"], '[[component]]\nname = "modelx"\npip = ["modelx==0.44.0"]\n')
    r = resolve(stacks.load_file(path), index_url=index)
    assert r.status == "conflict", r.pip_tail
    sides = {s["requirement"]: s for c in r.conflicts for s in c["sides"]}
    assert sides["setupx==79.0.1"]["by"] == "the stack"
    assert sides["setupx==79.0.1"]["where"] == _line(path, "setupx==79.0.1")
    assert sides["setupx>=80"]["by"] == "modelx==0.44.0"
    assert sides["setupx>=80"]["where"] == _line(path, "modelx==0.44.0")


def test_a_component_pin_replaces_the_base_pin_of_the_same_package(tmp_path, index):
    # As the final stage's pip install upgrades what the base installed (modelopt's setuptools>=80 case).
    path = _stack(tmp_path, ["setupx==79.0.1"],
                  '[[component]]\nname = "modelx"\npip = ["modelx==0.44.0", "setupx==80.9.0"]\n')
    r = resolve(stacks.load_file(path), index_url=index)
    assert r.status == "ok", r.conflicts
    assert r.resolved["setupx"] == "80.9.0" and r.resolved["modelx"] == "0.44.0"


def test_a_version_the_index_lacks_is_named_with_its_stack_line(tmp_path, index):
    path = _stack(tmp_path, [], '[[component]]\nname = "bridgex"\npip = ["bridgex==0.5.2"]\n')
    r = resolve(stacks.load_file(path), index_url=index)
    assert r.status == "conflict"
    [c] = r.conflicts
    assert c["message"] == "bridgex: no version 0.5.2 on the index (available: 0.5.0)"
    assert c["sides"][0]["where"] == _line(path, "bridgex==0.5.2")


def test_no_deps_pins_are_checked_without_their_dependencies(tmp_path, index):
    comps = ('[[component]]\nname = "bridgex"\npip = ["bridgex==0.5.0"]\nno_deps = true\n'
             '[[component]]\nname = "corex"\npip = ["corex==0.18.0"]\n')
    r = resolve(stacks.load_file(_stack(tmp_path, [], comps)), index_url=index)
    assert r.status == "ok", r.conflicts
    assert {"bridgex", "corex", "numx"} <= set(r.resolved) and "cudaonly" not in r.resolved


def test_pins_only_an_unreachable_page_serves_are_listed_not_checked(tmp_path, index):
    # Port 9 on localhost: connection refused, as repo.radeon.com is unreachable from here.
    path = _stack(tmp_path, ["torchx==1.0+local"], '[[component]]\nname = "visionx"\npip = ["visionx==0.5"]\n',
                  extra_base='pip_find_links = "https://127.0.0.1:9/rocm/"')
    r = resolve(stacks.load_file(path), index_url=index)
    assert r.status == "partial", (r.conflicts, r.pip_tail)
    [n] = r.not_checked
    assert n["requirement"] == "torchx==1.0+local" and n["where"] == _line(path, "torchx==1.0+local")
    assert "https://127.0.0.1:9/rocm/" in n["why"] and "not checked" in n["why"]
    assert r.resolved["visionx"] == "0.5"  # the rest was checked against the stand-in
    assert "RESOLVES ONLY WHAT IT COULD CHECK (1 pin(s) NOT CHECKED)" in r.lines()[0]  # never a plain "resolves"


def test_git_requirements_are_read_from_a_local_source_and_said_unread_without_one(tmp_path, index):
    comps = ('[[component]]\nname = "modelx"\npip = ["modelx==0.44.0"]\n'
             '[[component]]\nname = "gitc"\ngit = "https://github.com/example/gitc.git"\n'
             'commit = "0123456789abcdef0123456789abcdef01234567"\nrequirements = ["requirements/rocm.txt"]\n')
    stack = stacks.load_file(_stack(tmp_path, [], comps))
    r = resolve(stack, index_url=index)
    # what was read resolves, but the verdict is not "resolves": the unread component is in it, with how to read it
    assert r.status == "unread" and r.unread() == ["gitc"], r.conflicts
    [note] = r.git_requirements
    assert note["read"] is False and note["detail"] == "requirements not read (requirements/rocm.txt: no source given)"
    assert note["how"] == ("`git clone https://github.com/example/gitc.git ./gitc && git -C ./gitc checkout "
                           "0123456789abcdef0123456789abcdef01234567`, then add --source gitc=./gitc")
    head = r.lines()[0]
    assert "RESOLVES ONLY WHAT IT READ" in head and "NOT READ (gitc)" in head and ": resolves" not in head
    assert any(line.startswith("  git gitc: requirements not read") and "--source gitc=./gitc" in line
               for line in r.lines())
    src = tmp_path / "gitc"
    (src / "requirements").mkdir(parents=True)
    (src / "requirements" / "rocm.txt").write_text("numx\nsetupx<80\n")
    r = resolve(stack, {"gitc": str(src)}, index_url=index)
    assert r.git_requirements[0]["read"] is True and r.unread() == []
    assert r.status == "conflict"
    sides = {s["requirement"]: s for c in r.conflicts for s in c["sides"]}
    assert sides["setupx<80"]["where"] == f"{src}/requirements/rocm.txt:2", r.conflicts
    assert sides["setupx>=80"]["by"] == "modelx==0.44.0"


def test_the_cli_exits_4_when_git_requirements_were_not_read_and_0_once_they_are(tmp_path, index):
    """CI tells a full resolve (0) from one that left git components' requirements unread (4, said in the verdict
    and with the commands that read them), from a conflict (1) and from unreachable pins (3)."""
    comps = ('[[component]]\nname = "modelx"\npip = ["modelx==0.44.0"]\n'
             '[[component]]\nname = "gitc"\ngit = "https://github.com/example/gitc.git"\n'
             'commit = "0123456789abcdef0123456789abcdef01234567"\nrequirements = ["requirements.txt"]\n')
    path = _stack(tmp_path, [], comps)
    argv = [sys.executable, "-m", "rocmkit", "stacks", "--resolve", "--stack-file", str(path), "--index-url", index]
    p = subprocess.run(argv, check=False, capture_output=True, text=True, timeout=300)
    assert p.returncode == 4, p.stdout + p.stderr
    assert "RESOLVES ONLY WHAT IT READ" in p.stdout and "Traceback" not in p.stderr
    assert "error: what was read resolves, but not the requirements of git components (resolvetest: gitc)" in p.stderr
    assert "hint: give each a checkout with --source NAME=DIR" in p.stderr
    src = tmp_path / "gitc"
    src.mkdir()
    (src / "requirements.txt").write_text("numx\n")
    p = subprocess.run(argv + ["--source", f"gitc={src}"], check=False, capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout + p.stderr
    assert ": resolves [" in p.stdout and "git gitc: read requirements.txt" in p.stdout


def test_the_cli_exits_1_and_prints_both_sides(tmp_path, index):
    path = _stack(tmp_path, ["setupx==79.0.1"], '[[component]]\nname = "modelx"\npip = ["modelx==0.44.0"]\n')
    p = subprocess.run([sys.executable, "-m", "rocmkit", "stacks", "--resolve", "--stack-file", str(path),
                        "--index-url", index], check=False, capture_output=True, text=True, timeout=300)
    assert p.returncode == 1, p.stdout + p.stderr
    assert "DOES NOT RESOLVE" in p.stdout
    assert f"the stack requires setupx==79.0.1  [{_line(path, 'setupx==79.0.1')}]" in p.stdout
    assert f"modelx==0.44.0 requires setupx>=80  [{_line(path, 'modelx==0.44.0')}]" in p.stdout
    p = subprocess.run([sys.executable, "-m", "rocmkit", "stacks", "--resolve", "--stack-file", str(path),
                        "--index-url", index, "--json"], check=False, capture_output=True, text=True, timeout=300)
    doc = json.loads(p.stdout)
    assert p.returncode == 1 and doc["schema"] == "rocmkit.stacks-resolve/v1"
    [res] = doc["results"]
    assert res["status"] == "conflict" and {s["requirement"] for c in res["conflicts"] for s in c["sides"]} == {
        "setupx==79.0.1", "setupx>=80"}
    p = subprocess.run([sys.executable, "-m", "rocmkit", "stacks", "--find-links", "x"], check=False, capture_output=True, text=True)
    assert p.returncode == 2 and "go with --resolve" in p.stderr


def test_pip_failure_parsing_on_captured_output():
    # pip 26.3's words for the two failures, captured from real runs against PyPI.
    lines = """ERROR: Cannot install nvidia-modelopt==0.44.0 and setuptools==79.0.1 because these package versions have conflicting dependencies.

The conflict is caused by:
    The user requested setuptools==79.0.1
    nvidia-modelopt 0.44.0 depends on setuptools>=80

Additionally, some packages in these conflicts have no matching distributions available for your environment:
    setuptools
ERROR: Could not find a version that satisfies the requirement megatron-bridge==0.5.2 (from versions: 0.5.0, 0.5.1, 0.6.0)
ERROR: No matching distribution found for megatron-bridge==0.5.2""".splitlines()
    c1, c2 = parse_pip_failure(lines)
    assert c1["sides"] == [{"requirement": "setuptools==79.0.1", "by": "the stack"},
                           {"requirement": "setuptools>=80", "by": "nvidia-modelopt==0.44.0"}]
    assert c2["message"] == "megatron-bridge: no version 0.5.2 on the index (available: 0.5.0, 0.5.1, 0.6.0)"


# ---- the real PyPI (reachable here and in CI)

def _pypi_stack(tmp_path: Path, base_pip: list[str], components: str) -> Path:
    path = _stack(tmp_path, base_pip, components)
    path.write_text(path.read_text().replace(f'python = "{PY}"', 'python = "3.12"'))
    return path


def test_pypi_verl_megatron_extra_as_published_fails_on_megatron_bridge_0_5_2(tmp_path):
    # verl 0.9.1's [megatron] extra pins these three; PyPI serves megatron-bridge 0.5.0, 0.5.1, 0.6.x, not 0.5.2.
    path = _pypi_stack(tmp_path, [], '[[component]]\nname = "verl-megatron"\n'
                       'pip = ["megatron-core==0.18.0", "megatron-bridge==0.5.2", "nvidia-modelopt==0.44.0"]\n')
    r = resolve(stacks.load_file(path))
    assert r.status == "conflict", r.pip_tail
    [c] = r.conflicts
    assert c["message"].startswith("megatron-bridge: no version 0.5.2 on the index (available: ")
    assert "0.5.0" in c["message"] and c["sides"][0]["where"] == _line(path, "megatron-bridge==0.5.2")


def test_pypi_modelopt_against_setuptools_79_names_both_sides(tmp_path):
    path = _pypi_stack(tmp_path, ["setuptools==79.0.1"],
                       '[[component]]\nname = "nvidia-modelopt"\npip = ["nvidia-modelopt==0.44.0"]\nno_deps = false\n')
    r = resolve(stacks.load_file(path))
    assert r.status == "conflict", r.pip_tail
    sides = {s["requirement"]: s for c in r.conflicts for s in c["sides"]}
    assert sides["setuptools==79.0.1"]["where"] == _line(path, "setuptools==79.0.1")
    assert sides["setuptools>=80"]["by"] == "nvidia-modelopt==0.44.0"
    assert sides["setuptools>=80"]["where"] == _line(path, "nvidia-modelopt==0.44.0")


def test_build_resolves_first_and_stops_on_a_conflict_before_building(tmp_path):
    from provisioned import provisioned

    base = provisioned("ROCMKIT_TEST_BASE_IMAGE", ".ci/provision/20-docker.sh provides the base image", "DOCKER")
    path = _pypi_stack(tmp_path, [], '[[component]]\nname = "bridge"\npip = ["megatron-bridge==0.5.2"]\n')
    path.write_text(path.read_text().replace(f'image = "python:{PY}-slim"', f'image = "{base}"')
                    .replace('targets = ["cpu"]', 'targets = ["gfx942"]'))
    log = tmp_path / "build.log"
    p = subprocess.run([sys.executable, "-m", "rocmkit", "build", "--arch", "gfx942", "--stack-file", str(path),
                        "--log-file", str(log), "--progress", "plain"], check=False, capture_output=True, text=True, timeout=300)
    assert p.returncode == 1, p.stderr
    assert "megatron-bridge: no version 0.5.2 on the index" in p.stderr
    assert "does not resolve: nothing was built" in p.stderr
    assert not log.exists()  # the build never started


def test_without_a_local_python_of_the_stacks_version_pip_resolves_by_tags_wheels_only(tmp_path, index):
    # No machine here has a Python 3.99: pip resolves for it by --python-version/--platform, wheels only.
    path = _stack(tmp_path, ["setupx==79.0.1"], '[[component]]\nname = "modelx"\npip = ["modelx==0.44.0"]\n'
                  '[[component]]\nname = "bridgex"\npip = ["bridgex==0.5.2"]\nno_deps = true\n')
    path.write_text(path.read_text().replace(f'python = "{PY}"', 'python = "3.99"'))
    r = resolve(stacks.load_file(path), index_url=index)
    assert r.mode.startswith("by tags, Python 3.99") and r.status == "conflict"
    messages = [c["message"] for c in r.conflicts]
    assert "the stack requires setupx==79.0.1; modelx==0.44.0 requires setupx>=80" in messages
    assert any(m.startswith("bridgex: no version 0.5.2 on the index (available: 0.5.0); pip looked at wheels only")
               for m in messages), messages


# A pure-Python sdist with an in-tree PEP 517 backend (needs nothing from the index to build).
_BACKEND = '''
import zipfile
NAME, VERSION = "antlrx", "4.9.3"
def _meta():
    return f"Metadata-Version: 2.1\\nName: {NAME}\\nVersion: {VERSION}\\n"
def get_requires_for_build_wheel(config_settings=None):
    return []
def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    name = f"{NAME}-{VERSION}-py3-none-any.whl"
    info = f"{NAME}-{VERSION}.dist-info"
    with zipfile.ZipFile(f"{wheel_directory}/{name}", "w") as z:
        z.writestr(f"{NAME}/__init__.py", "")
        z.writestr(f"{info}/METADATA", _meta())
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n")
        z.writestr(f"{info}/RECORD", "")
    return name
'''


def test_wheels_only_builds_a_pure_sdist_only_requirement_here_and_resolves(tmp_path, index):
    # hydra-core's antlr4-python3-runtime 4.9.3 is an sdist alone: by tags pip cannot see it, so it is built here.
    import tarfile
    pkg = tmp_path / "sdist-src" / "antlrx-4.9.3"
    pkg.mkdir(parents=True)
    (pkg / "backend.py").write_text(_BACKEND)
    (pkg / "pyproject.toml").write_text('[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n')
    (pkg / "PKG-INFO").write_text("Metadata-Version: 2.1\nName: antlrx\nVersion: 4.9.3\n")
    links = tmp_path / "links"
    links.mkdir()
    with tarfile.open(links / "antlrx-4.9.3.tar.gz", "w:gz") as t:
        t.add(pkg, arcname="antlrx-4.9.3")
    _wheel(links, "hydrax", "1.3.2", ["antlrx==4.9.*"])
    path = _stack(tmp_path, ["numx==2.2.6"], '[[component]]\nname = "hydrax"\npip = ["hydrax==1.3.2"]\n')
    path.write_text(path.read_text().replace(f'python = "{PY}"', 'python = "3.99"'))
    r = resolve(stacks.load_file(path), index_url=index, find_links=[str(links)])
    assert r.built_from_sdist == ["antlrx==4.9.*"], (r.conflicts, r.pip_tail)
    assert r.resolved.get("antlrx") == "4.9.3" and r.resolved.get("hydrax") == "1.3.2"


def test_a_fresh_venvs_old_pip_resolves_by_tags_instead_of_calling_the_stack_broken(tmp_path, index, monkeypatch):
    """`python3 -m venv` brings the pip its Python shipped (23.2.1 with this machine's 3.11.7), which refuses
    --platform in a dry run without --target ("Can not use any platform or abi specific options unless installing
    via '--target'"): reported as the stack's conflict, a new user's correct stack was called broken and its build
    refused. The same resolve through that pip gives the same answer as today's pip."""
    import venv

    from rocmkit.stacks import resolve as resolve_mod

    venv.create(tmp_path / "v", with_pip=True)
    old = tmp_path / "v" / "bin" / "python"
    version = subprocess.run([old, "-m", "pip", "--version"], capture_output=True, text=True).stdout.split()[1]
    if int(version.split(".")[0]) >= 24:
        pytest.skip(f"this Python's venv ships pip {version}, which allows --platform in a dry run")
    path = _stack(tmp_path, ["setupx==79.0.1"], '[[component]]\nname = "modelx"\npip = ["modelx==0.44.0"]\n')
    path.write_text(path.read_text().replace(f'python = "{PY}"', 'python = "3.99"'))
    monkeypatch.setattr(resolve_mod.sys, "executable", str(old))  # pip runs under the fresh venv's Python
    r = resolve(stacks.load_file(path), index_url=index)
    assert r.mode.startswith("by tags, Python 3.99"), r.mode
    assert [c["message"] for c in r.conflicts] == ["the stack requires setupx==79.0.1; modelx==0.44.0 requires "
                                                   "setupx>=80"], r.conflicts
    path.write_text(path.read_text().replace("setupx==79.0.1", "setupx==80.9.0"))
    assert resolve(stacks.load_file(path), index_url=index).status == "ok"


def test_a_pip_too_old_for_the_resolve_is_said_as_the_tools_limit_with_exit_3(tmp_path, monkeypatch):
    """pip 22.0 has no --report: the resolve says pip must be upgraded (exit 3), never that the pins conflict."""
    import venv

    from rocmkit.errors import EnvironmentMissing
    from rocmkit.stacks import resolve as resolve_mod

    venv.create(tmp_path / "v", with_pip=True)
    old = str(tmp_path / "v" / "bin" / "python")
    r = subprocess.run([old, "-m", "pip", "install", "-q", "--disable-pip-version-check", "pip==22.0"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    assert "pip 22.0 in " in resolve_mod.pip_too_old(old) and "needs pip 22.2 or later" in resolve_mod.pip_too_old(old)
    assert resolve_mod.pip_too_old(sys.executable) is None
    monkeypatch.setattr(resolve_mod.sys, "executable", old)
    with pytest.raises(EnvironmentMissing) as exc:
        resolve(stacks.load_file(_stack(tmp_path, ["setupx==80.9.0"], '[[component]]\nname = "modelx"\n'
                                                                       'pip = ["modelx==0.44.0"]\n')),
                index_url="http://127.0.0.1:9/simple/")
    assert exc.value.exit_code == 3 and "-m pip install -U pip" in exc.value.hint


def test_a_stack_that_resolved_answers_again_from_the_cache_in_seconds(tmp_path, index, monkeypatch):
    """A second build of the same stack (same file, pip and index) does not wait for pip again; a changed file or a
    conflict is always asked of pip."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    path = _stack(tmp_path, ["setupx==80.9.0"], '[[component]]\nname = "modelx"\npip = ["modelx==0.44.0"]\n')
    first = resolve(stacks.load_file(path), index_url=index)
    assert first.status == "ok" and "kept for a day" not in first.mode
    again = resolve(stacks.load_file(path), index_url=index)
    assert again.status == "ok" and again.resolved == first.resolved and again.seconds <= 2.0
    assert "the answer of 0 min ago (the same stack file, pip and index), kept for a day" in again.mode
    path.write_text(path.read_text().replace("setupx==80.9.0", "setupx==79.0.1"))
    assert resolve(stacks.load_file(path), index_url=index).status == "conflict"
    assert resolve(stacks.load_file(path), index_url=index).status == "conflict"  # never cached
