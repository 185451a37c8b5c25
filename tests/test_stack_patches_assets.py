"""The stack format's `patches`, `assets` and `branch`: validation (file, field, what is allowed), the
inputs hash and manifest, the rendered Dockerfile, and the build context on the host: a patch checked with
real `git apply` against a local source (a tiny git repository), an asset downloaded from a real local HTTP
server and verified by sha256. The Dockerfile's own checks run in a real build in test_stack_files_docker.py."""

from __future__ import annotations

import hashlib
import http.server
import subprocess
import textwrap
import threading
from pathlib import Path

import pytest

from rocmkit.errors import EnvironmentMissing, Failed, InputFileError
from rocmkit.image.build import prepare_context
from rocmkit.image.plan import make_plan
from rocmkit.image.render import render_dockerfile
from rocmkit.image.sources import parse_source_options
from rocmkit.stacks import load_file

ORIGINAL = "def greet():\n    return 'hello'\n"
PATCHED = "def greet():\n    return 'hello, rocm'\n"


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True,
                          env={"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
                               "GIT_COMMITTER_EMAIL": "t@t", "PATH": "/usr/bin:/bin"}).stdout


def make_source(root: Path, text: str = ORIGINAL) -> Path:
    """A tiny pure-Python project in a git repository: the component's source."""
    src = root / "greet-src"
    (src / "greet").mkdir(parents=True)
    (src / "pyproject.toml").write_text(textwrap.dedent("""\
        [build-system]
        requires = ["setuptools"]
        build-backend = "setuptools.build_meta"

        [project]
        name = "greet"
        version = "1.0"
        """))
    (src / "greet" / "__init__.py").write_text(text)
    git(src, "init", "-q")
    git(src, "add", ".")
    git(src, "commit", "-qm", "initial")
    return src


def make_patch(src: Path, dest: Path) -> Path:
    """A real `git diff` of the change ORIGINAL → PATCHED, then the source put back."""
    (src / "greet" / "__init__.py").write_text(PATCHED)
    diff = git(src, "diff")
    git(src, "checkout", "--", ".")
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text(diff)
    return dest


def write_stack(path: Path, *, patches: list[str] = (), assets: str = "", extra: str = "", base="debian:bookworm",
                python="3.11") -> Path:
    path.write_text(textwrap.dedent(f"""\
        schema = "rocmkit.stack/v1"
        name = "patchtest"
        description = "a stack with a patched component and an asset"
        targets = ["cpu"]
        rocm = "none"
        python = "{python}"

        [base]
        image = "{base}"

        [[component]]
        name = "greet"
        git = "https://example.invalid/greet.git"
        commit = "{'a' * 40}"
        branch = "main"
        patches = {list(patches)!r}
        {extra}
        """).replace("'", '"') + assets)
    return path


class Server:
    """A real HTTP server on the loopback, serving a folder."""

    def __init__(self, root: Path):
        handler = lambda *a, **kw: http.server.SimpleHTTPRequestHandler(*a, directory=str(root), **kw)  # noqa: E731
        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


def asset_toml(url: str, sha: str | None, reason: str | None = None) -> str:
    lines = ["", "[[asset]]", 'name = "prebuilt"', f'url = "{url}"', 'why = "a prebuilt wheel from a release page"']
    if sha:
        lines.append(f'sha256 = "{sha}"')
    if reason:
        lines.append(f'mutable = {{ reason = "{reason}" }}')
    return "\n".join(lines) + "\n"


# ---- validation ----

def test_patch_file_missing_names_the_file_and_field(tmp_path):
    stack = write_stack(tmp_path / "s.toml", patches=["patches/none.patch"])
    with pytest.raises(InputFileError) as e:
        load_file(stack)
    assert e.value.path == str(stack) and e.value.field == "component[0] (greet).patches[0]"
    assert "patches/none.patch" in e.value.message


def test_relative_files_resolve_beside_the_stack_not_the_working_folder(tmp_path, monkeypatch):
    """A user's stack file reads patches/ beside itself, whatever the working folder holds under that name;
    a built-in stack reads its own from rocmkit's package (the working folder here has none)."""
    from rocmkit.stacks import load_builtin, source

    mine, here = tmp_path / "mine", tmp_path / "here"
    for folder, text in ((mine, "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+mine\n"),
                         (here, "--- a/x\n+++ b/x\n@@ -1 +1 @@\n-a\n+here\n")):
        (folder / "patches").mkdir(parents=True)
        (folder / "patches" / "x.patch").write_text(text)
    stack_path = write_stack(mine / "s.toml", patches=["patches/x.patch"])
    monkeypatch.chdir(here)
    for stack in (load_file(stack_path), source(path=stack_path).parse()):
        assert b"+mine" in stack.components[0].patches[0].content
    assert load_builtin("verl-vllm").name == source("verl-vllm").parse().name == "verl-vllm"


@pytest.mark.parametrize("entry,problem", [
    ("../outside.patch", "must not leave"),
    ("patches/x.txt", "invalid value"),
    ("patches/$(id).patch", "invalid value"),
])
def test_patch_paths_are_checked(tmp_path, entry, problem):
    stack = write_stack(tmp_path / "s.toml", patches=[entry])
    with pytest.raises(InputFileError) as e:
        load_file(stack)
    assert e.value.field == "component[0] (greet).patches[0]" and problem in e.value.message


def test_branch_without_commit_is_refused(tmp_path):
    stack = tmp_path / "s.toml"
    write_stack(stack)
    stack.write_text(stack.read_text().replace(f'commit = "{"a" * 40}"\n', 'mutable = { ref = "main", reason = "r" }\n'))
    with pytest.raises(InputFileError) as e:
        load_file(stack)
    assert e.value.field == "component[0] (greet).branch" and "beside a commit" in e.value.message


@pytest.mark.parametrize("url,sha,reason,field,problem", [
    ("http://example.com/x.whl", "0" * 64, None, "url", "invalid value"),  # plain http off the loopback
    ("https://example.com/x.whl;rm", "0" * 64, None, "url", "invalid value"),
    ("https://example.com/x.whl", "ABC", None, "sha256", "invalid value"),
    ("https://example.com/x.whl", None, None, "sha256", "missing"),
    ("https://example.com/x.whl", "0" * 64, "r", "mutable", "not mutable"),
])
def test_asset_fields_are_checked(tmp_path, url, sha, reason, field, problem):
    stack = write_stack(tmp_path / "s.toml", assets=asset_toml(url, sha, reason))
    with pytest.raises(InputFileError) as e:
        load_file(stack)
    assert e.value.field == f"asset[0] (prebuilt).{field}" and problem in e.value.message


def test_unknown_asset_field_lists_the_allowed(tmp_path):
    stack = write_stack(tmp_path / "s.toml", assets=asset_toml("https://e.com/x.whl", "0" * 64) + 'dest = "/x"\n')
    with pytest.raises(InputFileError) as e:
        load_file(stack)
    assert e.value.field == "asset[0] (prebuilt).dest" and "sha256" in (e.value.hint or "")


# ---- plan and render ----

def test_patch_content_is_in_the_manifest_and_inputs_hash(tmp_path):
    src = make_source(tmp_path)
    patch = make_patch(src, tmp_path / "patches" / "greet.patch")
    stack_path = write_stack(tmp_path / "s.toml", patches=["patches/greet.patch"])
    first = make_plan(load_file(stack_path), ["cpu"])
    entry = next(c for c in first.manifest["components"] if c["name"] == "greet")
    assert entry["branch"] == "main"
    assert entry["patches"] == [{"file": "patches/greet.patch",
                                 "sha256": hashlib.sha256(patch.read_bytes()).hexdigest()}]
    patch.write_text(patch.read_text() + "\n")  # a byte more: another image
    second = make_plan(load_file(stack_path), ["cpu"])
    assert second.inputs_hash != first.inputs_hash and second.tag != first.tag


def test_rendered_stage_checks_every_patch_before_the_build(tmp_path):
    src = make_source(tmp_path)
    make_patch(src, tmp_path / "patches" / "greet.patch")
    stack_path = write_stack(tmp_path / "s.toml", patches=["patches/greet.patch"],
                             assets=asset_toml("https://e.com/dl/prebuilt-1.0-py3-none-any.whl", "f" * 64))
    text = render_dockerfile(make_plan(load_file(stack_path), ["cpu"]))
    stage = text[text.index("FROM base AS build-greet"):text.index("FROM base AS final")]
    check = stage.index("git apply --check /tmp/rocmkit-patches/greet/greet.patch")
    apply = stage.index("&& git apply /tmp/rocmkit-patches/greet/greet.patch")
    build = stage.index("pip wheel")
    assert stage.index("COPY patches/greet/") < check < apply < build
    assert "patch patches/greet.patch no longer applies to greet" in stage
    final = text[text.index("FROM base AS final"):]
    assert "--mount=type=bind,source=assets,target=/tmp/rocmkit-assets" in final
    assert f'echo "{"f" * 64}  /tmp/rocmkit-assets/prebuilt-1.0-py3-none-any.whl" | sha256sum -c' in final
    assert "asset https://e.com/dl/prebuilt-1.0-py3-none-any.whl: sha256 differs" in final


def test_mutable_asset_warns_and_is_labelled(tmp_path):
    stack_path = write_stack(tmp_path / "s.toml", assets=asset_toml("https://e.com/x-1.0-py3-none-any.whl", None,
                                                                   "no stored source names its sha256"))
    plan = make_plan(load_file(stack_path), ["cpu"])
    assert any("asset prebuilt is MUTABLE" in w for w in plan.warnings)
    assert plan.labels["io.rocmkit.mutable-components"] == "prebuilt"
    assert plan.manifest["assets"][0]["sha256"] is None


# ---- the build context on the host ----

def _context(tmp_path, stack_path, src):
    stack = load_file(stack_path)
    plan = make_plan(stack, ["cpu"], sources=parse_source_options((f"greet={src}",), ["greet"]))
    return prepare_context(plan, render_dockerfile(plan), tmp_path / "ctx"), plan


def test_patch_is_applied_to_the_local_source_copy_on_the_host(tmp_path):
    src = make_source(tmp_path)
    make_patch(src, tmp_path / "patches" / "greet.patch")
    stack_path = write_stack(tmp_path / "s.toml", patches=["patches/greet.patch"])
    dockerfile, plan = _context(tmp_path, stack_path, src)
    ctx = dockerfile.parent
    assert (ctx / "sources" / "greet" / "greet" / "__init__.py").read_text() == PATCHED
    assert (src / "greet" / "__init__.py").read_text() == ORIGINAL  # the user's folder is untouched
    assert sorted(p.name for p in ctx.iterdir()) == ["Dockerfile", "assets", "rocmkit-dist", "sources", "wheelhouse"]
    # the stage records the patch; it runs no git (a base image need not have it)
    stage = dockerfile.read_text().split("FROM base AS build-greet")[1].split("FROM base AS final")[0]
    assert "/tmp/rocmkit-patches" not in stage and "greet patch patches/greet.patch sha256:" in stage


def test_cloned_component_gets_its_patches_in_the_context(tmp_path):
    src = make_source(tmp_path)
    patch = make_patch(src, tmp_path / "patches" / "greet.patch")
    plan = make_plan(load_file(write_stack(tmp_path / "s.toml", patches=["patches/greet.patch"])), ["cpu"])
    dockerfile = prepare_context(plan, render_dockerfile(plan), tmp_path / "ctx")
    assert (dockerfile.parent / "patches" / "greet" / "greet.patch").read_bytes() == patch.read_bytes()


def test_patch_that_no_longer_applies_fails_before_the_build_naming_the_file(tmp_path):
    src = make_source(tmp_path)
    make_patch(src, tmp_path / "patches" / "greet.patch")
    (src / "greet" / "__init__.py").write_text("def greet():\n    return 'upstream moved on'\n")
    git(src, "commit", "-qam", "upstream change")
    stack_path = write_stack(tmp_path / "s.toml", patches=["patches/greet.patch"])
    with pytest.raises(Failed) as e:
        _context(tmp_path, stack_path, src)
    assert "patch patches/greet.patch no longer applies to greet" in e.value.message
    assert "patch failed" in e.value.message  # git's own words, kept


def test_asset_is_downloaded_and_verified(tmp_path):
    src = make_source(tmp_path)
    served = tmp_path / "served"
    served.mkdir()
    wheel = served / "prebuilt-1.0-py3-none-any.whl"
    wheel.write_bytes(b"not really a wheel, but bytes with a hash")
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    with Server(served) as server:
        stack_path = write_stack(tmp_path / "s.toml", assets=asset_toml(f"{server.url}/{wheel.name}", sha))
        dockerfile, _ = _context(tmp_path, stack_path, src)
    assert (dockerfile.parent / "assets" / wheel.name).read_bytes() == wheel.read_bytes()


def test_asset_with_another_sha256_fails_naming_the_url(tmp_path):
    src = make_source(tmp_path)
    served = tmp_path / "served"
    served.mkdir()
    (served / "prebuilt-1.0-py3-none-any.whl").write_bytes(b"the file changed upstream")
    with Server(served) as server:
        url = f"{server.url}/prebuilt-1.0-py3-none-any.whl"
        stack_path = write_stack(tmp_path / "s.toml", assets=asset_toml(url, "0" * 64))
        with pytest.raises(Failed) as e:
            _context(tmp_path, stack_path, src)
    assert f"asset {url}: sha256" in e.value.message and "0" * 64 in e.value.message
    assert not (tmp_path / "ctx" / "assets" / "prebuilt-1.0-py3-none-any.whl").exists()


def test_asset_not_found_is_an_environment_problem_naming_the_url(tmp_path):
    src = make_source(tmp_path)
    served = tmp_path / "served"
    served.mkdir()
    with Server(served) as server:
        url = f"{server.url}/gone-1.0-py3-none-any.whl"
        stack_path = write_stack(tmp_path / "s.toml", assets=asset_toml(url, "0" * 64))
        with pytest.raises(EnvironmentMissing) as e:
            _context(tmp_path, stack_path, src)
    assert url in e.value.message and "404" in e.value.message
