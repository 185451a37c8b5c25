"""`rocmkit outdated` against real local upstreams: a package index served over HTTP (PEP 503 HTML and PEP 691
JSON), a git remote (a bare repository over file://, tags read with the real git), and the local registry
(tags pushed there). Nothing is mocked; the proposed stack is rendered by the real `rocmkit render`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
import tinyindex
from provisioned import provisioned

from rocmkit.errors import UsageError
from rocmkit.refs import gitrefs, pkgindex
from rocmkit.stacks.edit import Edit, apply

GIT_ENV = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@example.invalid", "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}


def rocmkit(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "rocmkit", *args], capture_output=True, text=True, timeout=timeout,
                          check=False)


def git(*args, cwd) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=GIT_ENV, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def remote(tmp_path_factory):
    """A bare repository with releases v1.0.0 (lightweight tag) and v1.1.0 (annotated), a pre-release
    v1.2.0rc1, a tag that is no version, and an untagged commit after v1.1.0."""
    root = tmp_path_factory.mktemp("remote")
    work = root / "work"
    work.mkdir()
    git("init", "-q", "-b", "main", cwd=work)
    (work / "requirements").mkdir()

    def commit(msg: str, rocm: str, pyproject: str) -> str:
        (work / "requirements" / "rocm.txt").write_text(rocm)
        (work / "pyproject.toml").write_text(pyproject)
        git("add", "-A", cwd=work)
        git("commit", "-q", "-m", msg, cwd=work)
        return git("rev-parse", "HEAD", cwd=work)

    c1 = commit("one", "torch==2.8.0\nnumpy\n", '[project]\nname = "tool"\ndependencies = ["einops"]\n')
    git("tag", "v1.0.0", cwd=work)
    c2 = commit("two", "# the ROCm wheels\n--extra-index-url https://download.pytorch.org/whl/rocm6.4\n"
                       "torch==2.9.1  # AMD build\nray[default]>=2.50\nnumpy\n",
                '[project]\nname = "tool"\ndependencies = ["transformers>=4.50,<5", "einops"]\n')
    git("tag", "-a", "v1.1.0", "-m", "release 1.1.0", cwd=work)
    c3 = commit("three", "torch==2.10.0\n", '[project]\nname = "tool"\n')
    git("tag", "v1.2.0rc1", cwd=work)
    git("tag", "nightly", cwd=work)
    c4 = commit("four", "torch==2.10.1\n", '[project]\nname = "tool"\n')
    bare = root / "tool.git"
    git("clone", "-q", "--bare", str(work), str(bare), cwd=root)
    return {"url": bare.as_uri(), "v1.0.0": c1, "v1.1.0": c2, "rc": c3, "head": c4,
            "tag_object": git("rev-parse", "v1.1.0", cwd=work)}


@pytest.fixture(scope="module")
def index(tmp_path_factory):
    root = tmp_path_factory.mktemp("index")
    wheels = [tinyindex.make_wheel(root / "build", "tinypkg", v) for v in ("1.0", "1.1", "1.2rc1", "1.3")]
    # 1.3 needs a Python the stack does not have: it is not a candidate.
    tinyindex.write_index(root, wheels, {"tinypkg-1.3-py3-none-any.whl": ">=3.99"})
    return root


@pytest.fixture(scope="module")
def base_repo():
    """localhost:5555/rocmkit-test/outdated-base with tags 1.0-slim, 1.2-slim and 2.0-full (a tiny imported image)."""
    reg = provisioned("ROCMKIT_TEST_REGISTRY", ".ci/provision/20-docker.sh provides a local registry", "DOCKER")
    docker = os.environ.get("ROCMKIT_DOCKER", "docker")
    repo = f"{reg}/rocmkit-test/outdated-base"
    import io
    import tarfile

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        info = tarfile.TarInfo("marker")
        info.size = 2
        tar.addfile(info, io.BytesIO(b"1\n"))
    return _push_tags(docker, buf.getvalue(), repo, ("1.0-slim", "1.2-slim", "2.0-full"))


def _push_tags(docker: str, tar: bytes, repo: str, tags: tuple[str, ...]) -> str:
    """A tiny image imported from `tar`, pushed to the test registry as repo:TAG for each tag; returns repo."""
    local = f"rocmkit-test/push:{uuid.uuid4().hex[:8]}"
    subprocess.run([docker, "import", "-", local], input=tar, check=True, capture_output=True)
    refs = [f"{repo}:{t}" for t in tags]
    try:
        for ref in refs:
            subprocess.run([docker, "tag", local, ref], check=True, capture_output=True)
            subprocess.run([docker, "push", ref], check=True, capture_output=True, timeout=120)
    finally:
        subprocess.run([docker, "rmi", local, *refs], capture_output=True, check=False)
    return repo


STACK = '''\
# A test stack: comments like this one must survive --write.
schema = "rocmkit.stack/v1"
name = "outdated-test"
description = "Stack whose pins have newer releases upstream"
targets = ["gfx942", "gfx950"]
rocm = "none"
python = "3.11"

[base]
# the base: a tag with a version
image = "{base}"
python_from = "image"
pip = ["torch==2.9.1"]

[[component]]
name = "tool"
git = "https://example.invalid/test/tool.git"
commit = "{v100}"  # pinned release
tag = "v1.0.0"
requirements = ["requirements/rocm.txt"]

[[component]]
name = "tool-bare"
git = "https://example.invalid/test/tool.git"
commit = "{v100}"

[[component]]
name = "tool-head"
git = "https://example.invalid/test/tool.git"
commit = "{head}"

[[component]]
name = "models"
pip = ["tinypkg==1.0", "transformers==4.40.0"]
'''


@pytest.fixture
def stack_file(tmp_path, remote, base_repo):
    p = tmp_path / "stack.toml"
    p.write_text(STACK.format(base=f"{base_repo}:1.0-slim", v100=remote["v1.0.0"], head=remote["head"]))
    return p


def outdated_args(stack_file, remote, url, *extra):
    remotes = [a for n in ("tool", "tool-bare", "tool-head") for a in ("--git-remote", f"{n}={remote['url']}")]
    return ["outdated", "--stack-file", str(stack_file), "--index-url", f"{url}/simple/", *remotes, *extra]


@pytest.mark.docker
@pytest.mark.parametrize("speaks_json", [False, True], ids=["pep503-html", "pep691-json"])
def test_outdated_finds_the_newer_release_of_every_kind(stack_file, remote, index, speaks_json):
    with tinyindex.serve(index, speaks_json=speaks_json) as url:
        r = rocmkit(*outdated_args(stack_file, remote, url, "--json"))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == "rocmkit.outdated/v1"
    by = {(f["component"], f["pin"] if f["kind"] in ("pip", "base-pip") else f["kind"]): f for f in doc["findings"]}
    tiny = by[("models", "tinypkg==1.0")]
    assert (tiny["status"], tiny["latest"], tiny["writable"]) == ("newer", "1.1", True)
    assert by[("models", "transformers==4.40.0")]["status"] == "none-found"  # this index does not carry it
    tool = by[("tool", "git")]
    # The annotated tag is peeled: its commit, not the tag object.
    assert (tool["status"], tool["latest"], tool["latest_commit"]) == ("newer", "v1.1.0", remote["v1.1.0"])
    assert tool["latest_commit"] != remote["tag_object"]
    lines = {(c["file"], c["line"]): c for c in tool["constraints"]}
    assert set(lines) == {
        ("pyproject.toml", "transformers>=4.50,<5"),
        ("requirements/rocm.txt", "--extra-index-url https://download.pytorch.org/whl/rocm6.4"),
        ("requirements/rocm.txt", "torch==2.9.1"),
        ("requirements/rocm.txt", "ray[default]>=2.50"),
    }
    assert lines[("requirements/rocm.txt", "torch==2.9.1")]["satisfied"] is True
    assert lines[("pyproject.toml", "transformers>=4.50,<5")]["satisfied"] is False  # the stack pins 4.40.0
    bare = by[("tool-bare", "git")]
    assert bare["status"] == "newer" and bare["current"].endswith("(= tag v1.0.0)")
    head = by[("tool-head", "git")]
    assert head["status"] == "unordered" and not head["writable"] and "not written" in head["note"]
    assert "is not in the history of v1.1.0" in head["note"] and head["current"].endswith("(after v1.1.0)")
    base = by[("base", "base-image")]
    assert (base["status"], base["latest"]) == ("newer", stack_file.read_text().split('image = "')[1].split(":1.0")[0]
                                                + ":1.2-slim")


@pytest.mark.docker
def test_written_stack_is_the_original_with_the_pins_replaced_and_renders(stack_file, remote, index, tmp_path):
    original = stack_file.read_text()
    out = tmp_path / "proposed.toml"
    with tinyindex.serve(index) as url:
        r = rocmkit(*outdated_args(stack_file, remote, url, "--write", str(out)))
    assert r.returncode == 0, r.stderr
    assert "wrote the proposed stack" in r.stderr and "tinypkg==1.0" in r.stdout
    assert stack_file.read_text() == original
    new = out.read_text()
    expected = (original.replace('"tinypkg==1.0"', '"tinypkg==1.1"').replace(":1.0-slim", ":1.2-slim")
                .replace(f'commit = "{remote["v1.0.0"]}"  # pinned release\ntag = "v1.0.0"',
                         f'commit = "{remote["v1.1.0"]}"  # pinned release\ntag = "v1.1.0"')
                .replace(f'name = "tool-bare"\ngit = "https://example.invalid/test/tool.git"\ncommit = "{remote["v1.0.0"]}"\n',
                         f'name = "tool-bare"\ngit = "https://example.invalid/test/tool.git"\ncommit = "{remote["v1.1.0"]}"\n'
                         'tag = "v1.1.0"\n'))
    assert new == expected
    rendered = rocmkit("render", "--stack-file", str(out), "--arch", "gfx942")
    assert rendered.returncode == 0, rendered.stderr
    assert "tinypkg==1.1" in rendered.stdout and ":1.2-slim" in rendered.stdout
    # Another existing file is not replaced without --force; the source stack is, and that is said.
    with tinyindex.serve(index) as url:
        again = rocmkit(*outdated_args(stack_file, remote, url, "--write", str(out)))
        assert again.returncode == 2 and "already exists" in again.stderr
        own = rocmkit(*outdated_args(stack_file, remote, url, "--write", str(stack_file)))
    assert own.returncode == 0 and "replaced the source stack file" in own.stderr
    assert stack_file.read_text() == expected


def test_an_unreachable_upstream_is_reported_not_fatal(tmp_path, remote):
    p = tmp_path / "stack.toml"
    p.write_text(STACK.format(base="localhost:1/nothing/here:1.0-slim", v100=remote["v1.0.0"], head=remote["head"]))
    r = rocmkit("outdated", "--stack-file", str(p), "--index-url", "http://127.0.0.1:1/simple/",
                "--git-remote", f"tool={tmp_path / 'no-such.git'}", "--git-remote", f"tool-bare={remote['url']}",
                "--git-remote", f"tool-head={remote['url']}", "--json")
    assert r.returncode == 0, r.stderr
    by = {(f["component"], f["kind"], f["pin"]): f for f in json.loads(r.stdout)["findings"]}
    assert by[("tool", "git", str(tmp_path / "no-such.git"))]["status"] == "unreachable"
    assert "git ls-remote" in by[("tool", "git", str(tmp_path / "no-such.git"))]["note"]
    assert by[("models", "pip", "tinypkg==1.0")]["status"] == "unreachable"
    assert by[("base", "base-image", "localhost:1/nothing/here:1.0-slim")]["status"] == "unreachable"
    assert by[("tool-bare", "git", remote["url"])]["status"] == "newer"


def test_bad_options_are_usage_errors(tmp_path, remote):
    p = tmp_path / "stack.toml"
    p.write_text(STACK.format(base="localhost:1/x:1.0", v100=remote["v1.0.0"], head=remote["head"]))
    r = rocmkit("outdated", "--stack-file", str(p), "--git-remote", "nosuch=file:///x")
    assert r.returncode == 2 and "has no git component 'nosuch'" in r.stderr and "Traceback" not in r.stderr
    r = rocmkit("outdated", "--stack-file", str(p), "--git-remote", "tool")
    assert r.returncode == 2 and "expected NAME=URL" in r.stderr
    r = rocmkit("outdated", "no-such-stack")
    assert r.returncode == 2 and "unknown stack" in r.stderr


def test_git_remote_reads_peeled_tags_and_files_at_a_tag(remote):
    tags = {t.name: t.commit for t in gitrefs.tags(remote["url"])}
    assert tags == {"v1.0.0": remote["v1.0.0"], "v1.1.0": remote["v1.1.0"], "v1.2.0rc1": remote["rc"],
                    "nightly": remote["rc"]}
    files = gitrefs.files_at_tag(remote["url"], "v1.1.0", lambda p: p.endswith(".toml"))
    assert list(files) == ["pyproject.toml"] and "transformers>=4.50,<5" in files["pyproject.toml"]


def test_index_reader_filters_yanked_prereleases_and_python(index):
    with tinyindex.serve(index, speaks_json=True) as url:
        found = pkgindex.files(f"{url}/simple/", "TinyPkg")
    assert sorted(str(f.version) for f in found) == ["1.0", "1.1", "1.2rc1", "1.3"]
    assert str(pkgindex.newest(found, "3.11")) == "1.1"
    assert str(pkgindex.newest(found, "3.11", pre=True)) == "1.2rc1"
    assert str(pkgindex.newest(found, None)) == "1.3"


def test_stack_edit_refuses_what_it_cannot_find():
    text = '[[component]]\nname = "a"\npip = ["x==1"]\n'
    assert apply(text, [Edit("a", "x==1", "x==2")], "s.toml") == '[[component]]\nname = "a"\npip = ["x==2"]\n'
    with pytest.raises(UsageError, match="cannot find \"x==3\""):
        apply(text, [Edit("a", "x==3", "x==4")], "s.toml")
    with pytest.raises(UsageError, match="table of b"):
        apply(text, [Edit("b", "x==1", "x==2")], "s.toml")


def test_an_unreachable_extra_index_leaves_the_answer_to_the_others(tmp_path, index):
    p = tmp_path / "stack.toml"
    p.write_text('schema = "rocmkit.stack/v1"\nname = "x"\ndescription = "x"\ntargets = ["cpu"]\nrocm = "none"\n'
                 'python = "3.11"\n\n[base]\nimage = "x@sha256:' + "0" * 64 + '"\n\n[[component]]\nname = "models"\n'
                 'pip = ["tinypkg==1.0"]\nextra_index_url = "https://127.0.0.1:1/simple"\n')
    with tinyindex.serve(index) as url:
        r = rocmkit("outdated", "--stack-file", str(p), "--index-url", f"{url}/simple/", "--json")
    assert r.returncode == 0, r.stderr
    by = {f["kind"]: f for f in json.loads(r.stdout)["findings"]}
    assert (by["pip"]["status"], by["pip"]["latest"]) == ("newer", "1.1")
    assert by["pip"]["note"].startswith("left out: https://127.0.0.1:1/simple/tinypkg/: cannot reach the index")
    assert by["base-image"]["note"] == "pinned by digest"


def _offline_stack(tmp_path, remote, base: str):
    p = tmp_path / "stack.toml"
    p.write_text(STACK.format(base=base, v100=remote["v1.0.0"], head=remote["head"]))
    return p


def test_when_no_upstream_answers_it_is_exit_3_naming_what_did_not_answer(tmp_path, remote):
    # every pin "unreachable" used to be exit 0, as if the stack had been checked
    p = _offline_stack(tmp_path, remote, "localhost:1/nothing/here:1.0-slim")
    gone = tmp_path / "no-such.git"
    r = rocmkit("outdated", "--stack-file", str(p), "--index-url", "http://127.0.0.1:1/simple/",
                *[a for n in ("tool", "tool-bare", "tool-head") for a in ("--git-remote", f"{n}={gone}")])
    assert r.returncode == 3, r.stdout + r.stderr
    assert "error: no upstream of outdated-test answered: no pin was checked" in r.stderr
    assert "did not answer (base localhost:1/nothing/here:1.0-slim" in r.stderr and "--git-remote NAME=URL" in r.stderr
    assert "Traceback" not in r.stderr


def test_a_partial_answer_is_exit_0_with_a_hint_naming_the_pins_not_checked(tmp_path, remote):
    p = _offline_stack(tmp_path, remote, "localhost:1/nothing/here:1.0-slim")
    r = rocmkit("outdated", "--stack-file", str(p), "--index-url", "http://127.0.0.1:1/simple/",
                *[a for n in ("tool", "tool-bare", "tool-head") for a in ("--git-remote", f"{n}={remote['url']}")],
                "--write", str(tmp_path / "out.toml"))
    assert r.returncode == 0, r.stderr
    assert "hint: 4 pin(s) not checked: their upstream did not answer (base localhost:1/nothing/here:1.0-slim" in r.stderr
    assert "wrote the proposed stack" in r.stderr  # the git pins that answered are newer


def test_a_repository_the_registry_does_not_have_is_missing_not_unreachable(tmp_path, remote):
    reg = provisioned("ROCMKIT_TEST_REGISTRY", ".ci/provision/20-docker.sh provides a local registry", "DOCKER")
    image = f"{reg}/rocmkit-test/no-such-repo-{uuid.uuid4().hex[:8]}:1.0-slim"
    p = _offline_stack(tmp_path, remote, image)
    r = rocmkit("outdated", "--stack-file", str(p), "--index-url", "http://127.0.0.1:1/simple/",
                *[a for n in ("tool", "tool-bare", "tool-head") for a in ("--git-remote", f"{n}={remote['url']}")],
                "--json")
    assert r.returncode == 0, r.stderr
    base = next(f for f in json.loads(r.stdout)["findings"] if f["kind"] == "base-image")
    assert base["status"] == "missing" and "has no repository rocmkit-test/no-such-repo" in base["note"]
    r = rocmkit("outdated", "--stack-file", str(p), "--index-url", "http://127.0.0.1:1/simple/",
                *[a for n in ("tool", "tool-bare", "tool-head") for a in ("--git-remote", f"{n}={remote['url']}")])
    assert f"name what their upstream does not have (base {image}): review them" in r.stderr


# ---- issue 36: the moves of this autumn, from the stacks as shipped ----

@pytest.fixture(scope="module")
def sglang_remote(tmp_path_factory):
    """SGLang's history in small: v0.5.15, then an untagged commit on main (what verl's 2026-07 recipe pins,
    0801cc05 upstream, here standing in for it), then v0.5.19 with its ROCm 10 torch in pyproject_other.toml."""
    root = tmp_path_factory.mktemp("sglang")
    work = root / "work"
    (work / "python").mkdir(parents=True)
    git("init", "-q", "-b", "main", cwd=work)

    def commit(msg: str, torch: str) -> str:
        (work / "CHANGES").write_text(msg)
        (work / "python" / "pyproject_other.toml").write_text(
            f'[project]\nname = "sglang"\n[project.optional-dependencies]\nsrt_hip = ["{torch}"]\n')
        git("add", "-A", cwd=work)
        git("commit", "-q", "-m", msg, cwd=work)
        return git("rev-parse", "HEAD", cwd=work)

    commit("0.5.15", "torch==2.9.1")
    git("tag", "v0.5.15", cwd=work)
    pinned = commit("[Diffusion][NPU] a commit between releases", "torch==2.9.1")
    commit("0.5.19", "torch==2.11.0")
    git("tag", "-a", "v0.5.19", "-m", "v0.5.19", cwd=work)
    bare = root / "sglang.git"
    git("clone", "-q", "--bare", str(work), str(bare), cwd=root)
    return {"url": bare.as_uri(), "pinned": pinned, "v0.5.19": git("rev-parse", "v0.5.19^{commit}", cwd=work)}


@pytest.fixture(scope="module")
def primus_repo():
    """<registry>/rocmkit-test/primus with tags v26.4 (ROCm 7.14, verl's 2026-07 base) and v26.7 (ROCm 10.0)."""
    reg = provisioned("ROCMKIT_TEST_REGISTRY", ".ci/provision/20-docker.sh provides a local registry", "DOCKER")
    docker = os.environ.get("ROCMKIT_DOCKER", "docker")
    return _push_tags(docker, b"\0" * 1024, f"{reg}/rocmkit-test/primus", ("v26.4", "v26.7"))  # an empty tar


def _shipped(name: str, tmp_path) -> tuple[str, object]:
    """A built-in stack's text, and where to write its copy: a folder holding the patches and files it names."""
    import shutil
    from importlib import resources

    here = resources.files("rocmkit.resources.stacks")
    for sub in ("patches", "files"):
        shutil.copytree(str(here.joinpath(sub)), tmp_path / sub)
    return here.joinpath(f"{name}.toml").read_text(encoding="utf-8"), tmp_path / f"{name}.toml"


def _elsewhere_unreachable(name: str, tmp_path, mirrors: dict[str, str]) -> list[str]:
    """--git-remote for every git component: the mirrors given, a path that does not exist for the others (so
    no test reaches GitHub); the index a closed port."""
    from rocmkit.stacks import load_builtin

    return ["--index-url", "http://127.0.0.1:1/simple/",
            *[a for c in load_builtin(name).git_components
              for a in ("--git-remote", f"{c.name}={mirrors.get(c.name, tmp_path / 'none.git')}")]]


@pytest.mark.docker
def test_outdated_proposes_rocm10_for_verl_vllm(tmp_path, primus_repo):
    text, p = _shipped("verl-vllm", tmp_path)
    assert 'image = "rocm/primus:v26.4"' in text and 'rocm = "7.14.0"' in text
    p.write_text(text.replace('"rocm/primus:v26.4"', f'"{primus_repo}:v26.4"'))
    r = rocmkit("outdated", "--stack-file", str(p), *_elsewhere_unreachable("verl-vllm", tmp_path, {}))
    assert r.returncode == 0, r.stderr
    row = next(line for line in r.stdout.splitlines() if line.startswith("base "))
    assert row.split() == ["base", "base-image", f"{primus_repo}:v26.4", f"{primus_repo}:v26.7", "newer"]
    assert ('note: --write changes the image only: the stack\'s rocm = "7.14.0" and its torch/ROCm pins are those '
            'of v26.4; set them to what v26.7 carries') in r.stdout


@pytest.mark.docker
def test_outdated_proposes_sglang_0_5_19_for_verl_sglang(tmp_path, sglang_remote):
    text, p = _shipped("verl-sglang", tmp_path)
    upstream_pin = "0801cc05ed202544e2e5c67d6b0a1d454de54fca"  # a main commit after v0.5.15, no tag's
    assert text.count(upstream_pin) == 2
    p.write_text(text.replace(upstream_pin, sglang_remote["pinned"])
                 .replace('image = "rocm/pytorch:', 'image = "localhost:1/rocm/pytorch:'))
    mirrors = {"sglang": sglang_remote["url"], "sgl-kernel": sglang_remote["url"]}
    out = tmp_path / "proposed.toml"
    r = rocmkit("outdated", "--stack-file", str(p), *_elsewhere_unreachable("verl-sglang", tmp_path, mirrors), "--write", str(out))
    assert r.returncode == 0, r.stderr
    pinned, new = sglang_remote["pinned"], sglang_remote["v0.5.19"]
    for name in ("sgl-kernel", "sglang"):
        row = next(line for line in r.stdout.splitlines() if line.startswith(name + " "))
        assert row.split() == [name, "git", pinned[:12], "(after", "v0.5.15)", "v0.5.19", f"({new[:12]})", "newer"]
    assert "python/pyproject_other.toml: torch==2.11.0" in r.stdout  # the stack's own pyproject file is read
    proposed = out.read_text()
    assert proposed.count(f'commit = "{new}"\ntag = "v0.5.19"\n') == 2 and pinned not in proposed


def test_write_never_goes_into_rocmkits_installation(tmp_path):
    """A built-in stack's own file (or a new file beside it) is refused before any upstream is asked: the
    installation is shared and a pip upgrade puts it back. The refusal names the file and where to write instead."""
    from rocmkit.stacks import builtin_folder

    folder = Path(str(builtin_folder()))
    own = folder / "verl-vllm.toml"
    before = own.read_bytes()
    for target in (own, folder / "proposal.toml"):
        r = rocmkit("outdated", "verl-vllm", "--write", str(target), "--index-url", "http://127.0.0.1:9/simple")
        assert r.returncode == 2, r.stderr
        assert f"--write {target}: that is inside rocmkit's installation" in r.stderr, r.stderr
        assert "hint: write the proposal to a file of your own (--write verl-vllm.toml)" in r.stderr
        assert "Traceback" not in r.stderr
    assert own.read_bytes() == before and not (folder / "proposal.toml").exists()
