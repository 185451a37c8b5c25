"""`rocmkit lock` against real local services: the local registry (.ci/provision/20-docker.sh; a base image
pushed under a tag, then other content pushed under the same tag), a real `git daemon` serving a bare
repository whose tag is moved, and a registry that stops answering (a TCP relay to the real registry, shut
down). Nothing is mocked: every digest comes from the registry, every commit from git."""

from __future__ import annotations

import io
import json
import os
import socket
import socketserver
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

import pytest
from provisioned import provisioned

from rocmkit import stacks
from rocmkit.errors import InputFileError
from rocmkit.image.plan import make_plan, plan_document
from rocmkit.image.render import render_dockerfile
from rocmkit.refs import registry
from rocmkit.stacks.lock import lock_path

REPO = Path(__file__).resolve().parent.parent
GIT = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
       "GIT_COMMITTER_EMAIL": "t@t"}


def write_stack(path: Path, image: str, *, per_arch: str | None = None, components: list[dict] = ()) -> Path:
    lines = ['schema = "rocmkit.stack/v1"', 'name = "locktest"', 'description = "lock test stack"',
             '# a comment `rocmkit lock` must never lose: it writes the lock beside this file, not into it',
             'targets = ["gfx942", "gfx950"]', 'rocm = "none"', 'python = "3.11"']
    lines += ([] if components else ["component = []"]) + ["", "[base]", f'image = "{image}"']
    if per_arch:
        lines.append(f'image_per_arch = {{ gfx950 = "{per_arch}" }}')
    for c in components:
        lines += ["", "[[component]]"] + [f"{k} = {json.dumps(v)}" for k, v in c.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def lock(*args) -> tuple[int, str]:
    """`rocmkit lock` in a process of its own: its cleanup of leftover processes must not see this test's
    git daemon as one of its own children. stdout, then stderr."""
    r = subprocess.run([sys.executable, "-m", "rocmkit", "lock", *args], capture_output=True, text=True, timeout=300)
    return r.returncode, r.stdout + r.stderr


# ---- pure: the lock file, staleness, render ----

def _locked_stack(tmp_path, image="reg.example.com/base:1", digest="sha256:" + "a" * 64):
    stack_file = write_stack(tmp_path / "s.toml", image)
    lock_path(stack_file).write_text(json.dumps({"schema": "rocmkit.lock/v1", "stack": "locktest",
                                                 "images": {image: digest}, "git": {}}))
    return stack_file


def test_lock_beside_the_stack_pins_from_manifest_labels_and_hash(tmp_path):
    plain = make_plan(stacks.load_file(write_stack(tmp_path / "p.toml", "reg.example.com/base:1")), ["gfx942"])
    stack = stacks.load_file(_locked_stack(tmp_path))
    assert stack.lock.path == str(tmp_path / "s.lock.json") and not stack.lock.stale
    plan = make_plan(stack, ["gfx942"])
    digest = "sha256:" + "a" * 64
    assert f"FROM reg.example.com/base:1@{digest} AS base" in render_dockerfile(plan)
    assert plan.manifest["base_image_digest"] == digest and plan.manifest["base_image"] == "reg.example.com/base:1"
    assert plan.labels["org.opencontainers.image.base.digest"] == digest
    assert plan.labels["org.opencontainers.image.base.name"] == "reg.example.com/base:1"
    assert plan.inputs_hash != plain.inputs_hash and plan_document(plan)["base_image_digest"] == digest
    assert "base_image_digest" not in plain.manifest and "FROM reg.example.com/base:1 AS base" in render_dockerfile(plain)
    # --base-image overrides the stack's base: the lock does not apply to it
    assert make_plan(stack, ["gfx942"], base_image="other/img:2").base_digest is None


def test_stale_lock_is_detected_and_the_tag_is_used(tmp_path):
    stack_file = _locked_stack(tmp_path)
    stack_file.write_text(stack_file.read_text().replace("base:1", "base:2"))
    stack = stacks.load_file(stack_file)
    assert "base image reg.example.com/base:2 is not in the lock" in stack.lock.stale
    plan = make_plan(stack, ["gfx942"])
    assert plan.base_digest is None and "FROM reg.example.com/base:2 AS base" in render_dockerfile(plan)
    assert any("is stale" in w for w in plan.warnings)


@pytest.mark.parametrize("text,problem", [
    ("{", "not valid JSON"),
    ('{"schema": "rocmkit.lock/v9"}', "not a rocmkit.lock/v1"),
    ('{"schema": "rocmkit.lock/v1", "stack": "locktest", "images": {"a:1": "sha256:12"}, "git": {}}', "invalid digest"),
])
def test_broken_lock_names_the_file(tmp_path, text, problem):
    stack_file = write_stack(tmp_path / "s.toml", "a:1")
    lock_path(stack_file).write_text(text)
    with pytest.raises(InputFileError, match=problem) as exc:
        stacks.load_file(stack_file)
    assert exc.value.path == str(tmp_path / "s.lock.json")


def test_git_urls_https_anywhere_git_protocol_only_on_this_host(tmp_path):
    c = {"name": "x", "commit": "a" * 40}
    stacks.load_file(write_stack(tmp_path / "a.toml", "a:1", components=[{**c, "git": "git://127.0.0.1:9418/x.git"}]))
    for bad in ("git://example.com/x.git", "file:///srv/x.git", "git://localhost/x.git;rm -rf /"):
        with pytest.raises(InputFileError, match="invalid value") as exc:
            stacks.load_file(write_stack(tmp_path / "b.toml", "a:1", components=[{**c, "git": bad}]))
        assert exc.value.field == "component[0] (x).git" and "git://localhost" in exc.value.hint


def test_builtin_locks_ship_in_the_wheel():
    import tomllib

    data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    assert "*.lock.json" in data["package-data"]["rocmkit.resources.stacks"] and "rocmkit.refs" in data["packages"]


def test_a_builtin_stacks_lock_lives_in_the_current_folder_then_the_one_rocmkit_ships(tmp_path, monkeypatch):
    # `rocmkit lock verl-vllm` wrote into rocmkit's installed package (read-only or shared; a pip upgrade deletes
    # it). The current folder's lock is written and read first; a lock shipped in the package only where it has
    # none; a stack file's lock stays beside the file, wherever rocmkit runs.
    monkeypatch.chdir(tmp_path)
    place = stacks.lock_place(name="verl-vllm")
    assert place.path == tmp_path / "verl-vllm.lock.json" == stacks.builtin_lock_path("verl-vllm")
    assert place.shipped is None and place.read() is None  # rocmkit ships no lock yet
    assert stacks.load_builtin("verl-vllm").lock is None
    mine = stacks.lock_place(path="sub/my.toml")
    assert mine.path == Path("sub/my.lock.json") and mine.shipped is None
    shipped = tmp_path / "pkg" / "verl-vllm.lock.json"  # a Path serves as the package's Traversable
    shipped.parent.mkdir()
    shipped.write_text('{"shipped": 1}')
    both = stacks.LockPlace(place.path, shipped)
    assert both.read() == ('{"shipped": 1}', "rocmkit/resources/stacks/verl-vllm.lock.json")
    place.path.write_text('{"mine": 1}')
    assert both.read() == ('{"mine": 1}', str(place.path))
    place.path.write_text("{")
    with pytest.raises(InputFileError, match=f"{tmp_path}/verl-vllm.lock.json: not valid JSON"):
        stacks.load_builtin("verl-vllm")  # every command that loads the stack names the file it read


def test_image_names_normalise_as_docker_does():
    assert registry.parse_image("ubuntu") == registry.ImageName("docker.io", "library/ubuntu", "latest")
    assert registry.parse_image("rocm/dev-ubuntu-22.04:7.0.2-complete") == registry.ImageName(
        "docker.io", "rocm/dev-ubuntu-22.04", "7.0.2-complete")
    assert registry.parse_image("localhost:5555/a/b:t") == registry.ImageName("localhost:5555", "a/b", "t")
    assert registry.parse_image("ghcr.io/o/i") == registry.ImageName("ghcr.io", "o/i", "latest")


def test_docker_config_credentials(tmp_path, monkeypatch):
    import base64

    (tmp_path / "config.json").write_text(json.dumps({"auths": {
        "https://index.docker.io/v1/": {"auth": base64.b64encode(b"hub:pw1").decode()},
        "localhost:5555": {"username": "me", "password": "pw2"}}}))
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    assert registry.credentials("docker.io") == ("hub", "pw1")
    assert registry.credentials("localhost:5555") == ("me", "pw2")
    assert registry.credentials("ghcr.io") is None
    (tmp_path / "config.json").write_text("{")
    with pytest.raises(InputFileError, match="config.json"):
        registry.credentials("ghcr.io")


# ---- credential helpers: real programs speaking Docker's helper protocol ----

HELPER = """#!{python}
# docker-credential-NAME as Docker's helpers behave: `store` reads {{ServerURL, Username, Secret}} JSON, `get`
# reads a server and prints its entry or says "credentials not found" with exit 1, `erase` drops it
import json, sys
path = {store!r}
try:
    db = json.load(open(path))
except FileNotFoundError:
    db = {{}}
verb, text = sys.argv[1], sys.stdin.read()
if verb == "store":
    entry = json.loads(text)
    db[entry["ServerURL"]] = entry
elif verb == "get":
    server = text.strip()
    if {broken!r}:
        sys.exit("the keychain is locked")
    if server not in db:
        print("credentials not found in native keychain")
        sys.exit(1)
    print(json.dumps(db[server]))
elif verb == "erase":
    db.pop(text.strip(), None)
json.dump(db, open(path, "w"))
"""


def credential_helper(bin_dir: Path, name: str, entries: dict[str, tuple[str, str]] | None = None,
                      broken=False) -> Path:
    """docker-credential-NAME in bin_dir, holding entries (server → user, secret); returns its store file."""
    bin_dir.mkdir(exist_ok=True)
    store = bin_dir / f"{name}.json"
    store.write_text(json.dumps({k: {"ServerURL": k, "Username": u, "Secret": p}
                                 for k, (u, p) in (entries or {}).items()}))
    exe = bin_dir / f"docker-credential-{name}"
    exe.write_text(HELPER.format(python=sys.executable, store=str(store), broken=broken))
    exe.chmod(0o755)
    return store


def test_credential_helpers_are_asked_as_docker_asks_them(tmp_path, monkeypatch):
    from rocmkit.refs import Unreachable

    bin_dir = tmp_path / "bin"
    credential_helper(bin_dir, "desk", {"localhost:5555": ("me", "pw"), "https://index.docker.io/v1/": ("hub", "h")})
    credential_helper(bin_dir, "gh", {"ghcr.io": ("octo", "ghp"), "quay.io": ("<token>", "refresh")})
    credential_helper(bin_dir, "locked", broken=True)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    config = tmp_path / "config.json"

    def use(doc):
        config.write_text(json.dumps(doc))

    # credsStore holds every login; `auths` keeps only placeholders then, as `docker login` leaves it
    use({"credsStore": "desk", "credHelpers": {"ghcr.io": "gh", "quay.io": "gh", "bad.io": "locked"},
         "auths": {"localhost:5555": {}}})
    assert registry.credentials("localhost:5555") == ("me", "pw")
    assert registry.credentials("docker.io") == ("hub", "h")  # Docker Hub's server key, as Docker passes it
    assert registry.credentials("ghcr.io") == ("octo", "ghp")  # credHelpers wins over credsStore
    assert registry.credentials("other.example.com") is None  # "credentials not found": asked anonymously
    with pytest.raises(Unreachable, match="identity token for quay.io"):
        registry.credentials("quay.io")
    with pytest.raises(Unreachable, match="docker-credential-locked get bad.io: exit 1: the keychain is locked"):
        registry.credentials("bad.io")
    use({"credsStore": "nowhere"})
    with pytest.raises(Unreachable, match="`credsStore` names the credential helper 'nowhere', but "
                                          "docker-credential-nowhere is not on PATH"):
        registry.credentials("localhost:5555")
    use({"credHelpers": {"ghcr.io": "../../bin/sh"}})
    with pytest.raises(InputFileError, match="credHelpers.ghcr.io"):
        registry.credentials("ghcr.io")
    use({"credHelpers": ["gh"]})
    with pytest.raises(InputFileError, match="credHelpers"):
        registry.credentials("ghcr.io")


# ---- the local registry ----

def _docker(*args: str) -> str:
    exe = os.environ.get("ROCMKIT_DOCKER", "docker")
    r = subprocess.run([exe, *args], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


@pytest.fixture(scope="module")
def pushed():
    """The test base image pushed to the local registry under two fresh tags; local tags removed after."""
    reg = provisioned("ROCMKIT_TEST_REGISTRY", ".ci/provision/20-docker.sh provides a local registry", "DOCKER")
    base = provisioned("ROCMKIT_TEST_BASE_IMAGE", ".ci/provision/20-docker.sh provides the base image", "DOCKER")
    label = uuid.uuid4().hex[:8]
    refs = [f"{reg}/rocmkit-test/lockbase:{label}-a", f"{reg}/rocmkit-test/lockbase:{label}-b"]
    made = list(refs)
    for ref in refs:
        _docker("tag", base, ref)
        _docker("push", ref)
    yield {"refs": refs, "base": base, "made": made}
    for ref in made:
        subprocess.run([os.environ.get("ROCMKIT_DOCKER", "docker"), "rmi", ref], capture_output=True, timeout=120)


def _push_other_content(pushed, ref: str) -> None:
    """Different content under the same tag: a tiny image built FROM the base with one extra file."""
    import docker

    client = docker.from_env(timeout=120)
    dockerfile = f"FROM {pushed['base']}\nRUN echo moved > /moved\n".encode()
    client.images.build(fileobj=io.BytesIO(dockerfile), tag=ref, network_mode="none", rm=True)
    _docker("push", ref)


@pytest.mark.docker
def test_lock_render_then_moved_tag_fails_the_check(tmp_path, pushed):
    ref_a, ref_b = pushed["refs"]
    stack_file = write_stack(tmp_path / "locktest.toml", ref_a, per_arch=ref_b)
    before = stack_file.read_text()
    code, out = lock("--stack-file", str(stack_file))
    assert code == 0, out
    doc = json.loads(lock_path(stack_file).read_text())
    digest_a = registry.resolve_digest(ref_a)
    assert doc["images"] == {ref_a: digest_a, ref_b: registry.resolve_digest(ref_b)}
    # the registry's own answer for what the engine pushed: `docker push` printed the same digest
    assert digest_a == _docker("image", "inspect", "--format", "{{index .RepoDigests 0}}", ref_a).strip().split("@")[1]
    assert stack_file.read_text() == before  # the hand-written stack file and its comments are untouched
    assert lock("--stack-file", str(stack_file), "--check")[0] == 0

    stack = stacks.load_file(stack_file)
    assert f"FROM {ref_a}@{digest_a} AS base" in render_dockerfile(make_plan(stack, ["gfx942"]))
    assert f"FROM {ref_b}@" in render_dockerfile(make_plan(stack, ["gfx950"]))

    _push_other_content(pushed, ref_a)
    moved = registry.resolve_digest(ref_a)
    assert moved != digest_a
    code, out = lock("--stack-file", str(stack_file), "--check")
    assert code == 1, out
    assert f"moved       image {ref_a}: {digest_a} -> {moved}" in out
    assert json.loads(lock_path(stack_file).read_text()) == doc  # --check writes nothing

    code, out = lock("--stack-file", str(stack_file), "--json")  # `lock` takes the new content
    assert code == 0, out
    assert json.loads(out)["stacks"][0]["written"] is True
    assert json.loads(lock_path(stack_file).read_text())["images"][ref_a] == moved


@pytest.mark.docker
def test_missing_tag_and_stale_lock_fail(tmp_path, pushed):
    ref_a = pushed["refs"][0]
    stack_file = write_stack(tmp_path / "s.toml", ref_a)
    assert lock("--stack-file", str(stack_file))[0] == 0
    stack_file.write_text(stack_file.read_text().replace(ref_a, ref_a + "-nosuchtag"))
    code, out = lock("--stack-file", str(stack_file), "--check")
    assert code == 1
    assert f"stale       lock {lock_path(stack_file)}: base image {ref_a}-nosuchtag is not in the lock" in out
    assert f"missing     image {ref_a}-nosuchtag" in out
    old = lock_path(stack_file).read_bytes()
    assert lock("--stack-file", str(stack_file))[0] == 1  # a tag that is gone: nothing to lock to
    assert lock_path(stack_file).read_bytes() == old


@pytest.mark.docker
@pytest.mark.slow
def test_locked_build_pulls_by_digest_and_records_it(tmp_path, pushed):
    """The engine builds FROM ref@digest out of the registry; the image's labels and manifest carry the digest."""
    import docker

    ref = pushed["refs"][1]
    stack_file = write_stack(tmp_path / "s.toml", ref)
    assert lock("--stack-file", str(stack_file))[0] == 0
    digest = json.loads(lock_path(stack_file).read_text())["images"][ref]
    tag = f"rocmkit-test/lockbuild:{uuid.uuid4().hex[:8]}"
    r = subprocess.run([sys.executable, "-m", "rocmkit", "build", "--stack-file", str(stack_file), "--arch", "gfx942",
                        "--network", "none", "--progress", "plain", "--tag", tag, "--json"],
                       capture_output=True, text=True, timeout=900, env={**os.environ, "CI": "true"})
    assert r.returncode == 0, r.stderr[-3000:]
    client = docker.from_env(timeout=120)
    try:
        labels = client.images.get(tag).labels
        assert labels["org.opencontainers.image.base.digest"] == digest
        assert labels["org.opencontainers.image.base.name"] == ref
        manifest = json.loads(client.containers.run(tag, ["cat", "/opt/rocmkit/manifest.json"], remove=True,
                                                    network_disabled=True))
        assert manifest["base_image_digest"] == digest and manifest["inputs_hash"] == json.loads(r.stdout)["inputs_hash"]
    finally:
        client.images.remove(tag)


class _Relay(socketserver.ThreadingTCPServer):
    """A TCP relay on a free local port to the real registry: the registry 'goes away' when it shuts down."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, target: tuple[str, int]):
        target_addr = target

        class Handler(socketserver.BaseRequestHandler):
            def handle(self):
                upstream = socket.create_connection(target_addr, timeout=30)

                def pipe(a, b):
                    try:
                        while data := a.recv(65536):
                            b.sendall(data)
                    except OSError:
                        pass
                    finally:
                        for s in (a, b):
                            try:
                                s.shutdown(socket.SHUT_RDWR)
                            except OSError:
                                pass

                t = threading.Thread(target=pipe, args=(upstream, self.request), daemon=True)
                t.start()
                pipe(self.request, upstream)
                t.join(timeout=30)
                upstream.close()

        super().__init__(("127.0.0.1", 0), Handler)


@pytest.mark.docker
def test_unreachable_registry_keeps_the_old_lock(tmp_path, pushed):
    reg = os.environ["ROCMKIT_TEST_REGISTRY"]
    host, port = reg.replace("localhost", "127.0.0.1").split(":")
    relay = _Relay((host, int(port)))
    threading.Thread(target=relay.serve_forever, daemon=True).start()
    ref = pushed["refs"][0].replace(reg, f"localhost:{relay.server_address[1]}")
    stack_file = write_stack(tmp_path / "s.toml", ref)
    try:
        code, out = lock("--stack-file", str(stack_file))
        assert code == 0, out
    finally:
        relay.shutdown()
        relay.server_close()
    old = lock_path(stack_file).read_bytes()
    old_mtime = lock_path(stack_file).stat().st_mtime_ns
    for args in ((), ("--check",)):
        code, out = lock("--stack-file", str(stack_file), *args)
        assert code == 3, out
        assert f"unreachable image {ref}" in out and f"could not reach: image {ref}" in out
        assert lock_path(stack_file).read_bytes() == old and lock_path(stack_file).stat().st_mtime_ns == old_mtime
    assert sorted(p.name for p in tmp_path.iterdir()) == ["s.lock.json", "s.toml"]  # no temp file left


# ---- a git remote served by a real git daemon ----

def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _g(*args, cwd=None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=GIT, check=True, capture_output=True, text=True,
                          timeout=60).stdout.strip()


def _serve(served: Path, c1: str, tries: int = 5) -> tuple[subprocess.Popen, str]:
    """`git daemon` serving `served` on a free port, once it answers with this repository (c1 among its refs).
    The port is free when chosen, not when the daemon binds it: if something took it meanwhile, the daemon
    exits (bind fails) and another port is tried, so the test never talks to a server not its own."""
    for _ in range(tries):
        port = _free_port()
        daemon = subprocess.Popen(["git", "daemon", "--reuseaddr", "--export-all", f"--base-path={served}",
                                   "--listen=127.0.0.1", f"--port={port}", str(served)],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        url = f"git://127.0.0.1:{port}/upstream.git"
        deadline = time.monotonic() + 20
        while daemon.poll() is None:
            try:  # a listener not ours may accept and never answer
                r = subprocess.run(["git", "ls-remote", url], capture_output=True, text=True, timeout=5)
                answer = r.stdout if r.returncode == 0 else r.stderr
            except subprocess.TimeoutExpired:
                answer = "no answer within 5 s"
            if c1 in answer and daemon.poll() is None:
                return daemon, url
            if time.monotonic() > deadline:
                daemon.kill()
                daemon.wait(timeout=10)
                pytest.fail(f"git daemon did not answer on port {port}: {answer}")
            time.sleep(0.2)
    pytest.fail(f"git daemon could not listen on a free port in {tries} tries")


@pytest.fixture
def remote(tmp_path):
    """upstream.git with commits c1, c2 and tags v1 (-> c1) and a1 (annotated, -> c2), served by `git daemon`."""
    work, served = tmp_path / "work", tmp_path / "served"
    served.mkdir()
    _g("init", "-q", str(work))
    _g("commit", "-q", "--allow-empty", "-m", "one", cwd=work)
    c1 = _g("rev-parse", "HEAD", cwd=work)
    _g("commit", "-q", "--allow-empty", "-m", "two", cwd=work)
    c2 = _g("rev-parse", "HEAD", cwd=work)
    _g("tag", "v1", c1, cwd=work)
    _g("tag", "-a", "-m", "annotated", "a1", c2, cwd=work)
    bare = served / "upstream.git"
    _g("clone", "-q", "--bare", str(work), str(bare))
    daemon, url = _serve(served, c1)
    yield {"url": url, "c1": c1, "c2": c2, "bare": bare, "daemon": daemon}
    daemon.terminate()
    daemon.wait(timeout=10)


def test_git_pins_checked_and_a_moved_tag_fails(tmp_path, remote):
    url = remote["url"]
    comps = [{"name": "tagged", "git": url, "commit": remote["c1"], "tag": "v1"},
             {"name": "annotated", "git": url, "commit": remote["c2"], "tag": "a1"},
             {"name": "bare-commit", "git": url, "commit": remote["c1"]}]
    stack_file = write_stack(tmp_path / "g.toml", "a/b@sha256:" + "b" * 64, components=comps)
    code, out = lock("--stack-file", str(stack_file))
    assert code == 0, out
    assert f"exists on {url}" in out
    assert json.loads(lock_path(stack_file).read_text())["git"]["tagged"] == {"git": url, "commit": remote["c1"],
                                                                               "tag": "v1"}
    assert lock("--stack-file", str(stack_file), "--check")[0] == 0

    _g("tag", "-f", "v1", remote["c2"], cwd=remote["bare"])  # upstream moves the tag
    code, out = lock("--stack-file", str(stack_file), "--check")
    assert code == 1, out
    assert f"moved       component tagged: {remote['c1']} -> {remote['c2']} tag v1 on {url} moved" in out
    old = lock_path(stack_file).read_bytes()
    assert lock("--stack-file", str(stack_file))[0] == 1 and lock_path(stack_file).read_bytes() == old


def test_git_commit_missing_upstream_and_remote_down(tmp_path, remote):
    url = remote["url"]
    stack_file = write_stack(tmp_path / "g.toml", "a/b@sha256:" + "b" * 64,
                             components=[{"name": "ghost", "git": url, "commit": "f" * 40}])
    code, out = lock("--stack-file", str(stack_file))
    assert code == 1 and f"missing     component ghost: {'f' * 40} {url} has no commit" in out
    assert not lock_path(stack_file).exists()

    write_stack(stack_file, "a/b@sha256:" + "b" * 64, components=[{"name": "ok", "git": url, "commit": remote["c2"]}])
    assert lock("--stack-file", str(stack_file))[0] == 0
    old = lock_path(stack_file).read_bytes()
    remote["daemon"].terminate()
    remote["daemon"].wait(timeout=10)
    code, out = lock("--stack-file", str(stack_file), "--check")
    assert code == 3 and f"unreachable component ok: {url}:" in out and "Connection refused" in out
    assert lock_path(stack_file).read_bytes() == old


# ---- credentials: a real HTTP front that demands a login before it relays to the real registry ----

class _AuthFront:
    """Answers 401 with a Bearer challenge (Docker Hub's flow: a token from /token for user:secret over basic
    auth) or a Basic one, and relays authorised requests to the real registry unchanged, but for tags/list: with
    `page_size`, the registry's list is served a page at a time with a `Link` to the next (the local registry
    does not page; Docker Hub does, 100 a page)."""

    def __init__(self, registry_addr: str, scheme: str, page_size: int | None = None):
        import http.server

        front = self
        self.scheme, self.tokens_issued, self.tag_pages = scheme, 0, 0
        basic = "Basic " + __import__("base64").b64encode(b"user:secret").decode()

        class Handler(http.server.BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def _answer(self, status, headers=(), body=b""):
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(body)

            def do_GET(self):
                if self.path.startswith("/token"):
                    # a pull asks for a repository scope; Docker's login, for an offline token with none
                    wants = "scope=repository" in self.path or "offline_token=true" in self.path
                    if self.headers.get("Authorization") != basic or not wants:
                        return self._answer(401)
                    front.tokens_issued += 1
                    return self._answer(200, [("Content-Type", "application/json")], b'{"token": "t0k3n"}')
                self.do_HEAD()

            def do_HEAD(self):
                wanted = "Bearer t0k3n" if front.scheme == "bearer" else basic
                if self.headers.get("Authorization") != wanted:
                    challenge = (f'Bearer realm="http://127.0.0.1:{front.port}/token",service="front"'
                                 if front.scheme == "bearer" else 'Basic realm="front"')
                    return self._answer(401, [("WWW-Authenticate", challenge)])
                import urllib.error
                import urllib.parse
                import urllib.request

                path, _, query = self.path.partition("?")
                req = urllib.request.Request(f"http://{registry_addr}{path}", method=self.command,
                                             headers={"Accept": self.headers.get("Accept", "")})
                try:
                    with urllib.request.urlopen(req, timeout=30) as resp:
                        status, body = resp.status, resp.read() if self.command == "GET" else b""
                        headers = [(k, v) for k, v in resp.headers.items()
                                   if k.lower() in ("docker-content-digest", "content-type")]
                except urllib.error.HTTPError as exc:
                    return self._answer(exc.code)
                if path.endswith("/tags/list") and page_size:
                    front.tag_pages += 1
                    doc = json.loads(body)
                    after = urllib.parse.parse_qs(query).get("last", [""])[0]
                    rest = sorted(t for t in doc["tags"] if t > after)
                    body = json.dumps({**doc, "tags": rest[:page_size]}).encode()
                    if len(rest) > page_size:
                        headers.append(("Link", f'<{path}?n={page_size}&last={rest[page_size - 1]}>; rel="next"'))
                self._answer(status, headers, body)

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.docker
@pytest.mark.parametrize("scheme", ["bearer", "basic"])
def test_registry_login_from_docker_config(tmp_path, pushed, scheme, monkeypatch):
    import base64

    reg = os.environ["ROCMKIT_TEST_REGISTRY"]
    front = _AuthFront(reg.replace("localhost", "127.0.0.1"), scheme)
    try:
        ref = pushed["refs"][1].replace(reg, f"localhost:{front.port}")
        stack_file = write_stack(tmp_path / "s.toml", ref)
        config = tmp_path / "docker-config"
        config.mkdir()
        monkeypatch.setenv("DOCKER_CONFIG", str(config))  # the rocmkit process inherits it
        code, out = lock("--stack-file", str(stack_file))  # no login yet: not reachable, nothing written
        assert code == 3 and f"unreachable image {ref}" in out and "docker login" in out, out
        assert not lock_path(stack_file).exists()
        (config / "config.json").write_text(json.dumps({"auths": {f"localhost:{front.port}": {
            "auth": base64.b64encode(b"user:secret").decode()}}}))
        code, out = lock("--stack-file", str(stack_file))
        assert code == 0, out
        assert json.loads(lock_path(stack_file).read_text())["images"][ref] == registry.resolve_digest(pushed["refs"][1])
        assert front.tokens_issued == (1 if scheme == "bearer" else 0)
    finally:
        front.close()


@pytest.mark.docker
def test_docker_login_into_a_credential_store_serves_lock(tmp_path, pushed, monkeypatch):
    """Docker's own CLI logs in and stores the secret through a credential helper (credsStore); `rocmkit lock`
    then asks the same helper, and only it: config.json keeps a placeholder."""
    reg = os.environ["ROCMKIT_TEST_REGISTRY"]
    front = _AuthFront(reg.replace("localhost", "127.0.0.1"), "bearer")
    try:
        server = f"localhost:{front.port}"
        store = credential_helper(tmp_path / "bin", "rkstore")
        monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
        config = tmp_path / "docker-config"
        config.mkdir()
        (config / "config.json").write_text(json.dumps({"credsStore": "rkstore"}))
        monkeypatch.setenv("DOCKER_CONFIG", str(config))
        exe = os.environ.get("ROCMKIT_DOCKER", "docker")
        r = subprocess.run([exe, "login", server, "-u", "user", "--password-stdin"], input="secret",
                           capture_output=True, text=True, timeout=120)
        assert r.returncode == 0, r.stdout + r.stderr
        assert json.loads(store.read_text())[server]["Secret"] == "secret"  # the helper holds it ...
        assert "secret" not in (config / "config.json").read_text()  # ... and config.json does not
        ref = pushed["refs"][1].replace(reg, server)
        stack_file = write_stack(tmp_path / "s.toml", ref)
        code, out = lock("--stack-file", str(stack_file))
        assert code == 0, out
        assert json.loads(lock_path(stack_file).read_text())["images"][ref] == registry.resolve_digest(pushed["refs"][1])
        assert front.tokens_issued >= 2  # the engine's login, then rocmkit's
    finally:
        front.close()


@pytest.mark.docker
@pytest.mark.parametrize("scheme", ["bearer", "basic"])
def test_registry_tags_follow_link_pages_through_the_login(tmp_path, pushed, scheme, monkeypatch):
    """`rocmkit outdated`'s tag listing goes through the same login and request path as the digests."""
    import base64

    reg = os.environ["ROCMKIT_TEST_REGISTRY"]
    repo = f"{reg}/rocmkit-test/tagpages-{uuid.uuid4().hex[:8]}"  # a fresh repository: its tags are ours alone
    names = ["1.0", "1.1", "2.0"]
    for name in names:
        pushed["made"].append(f"{repo}:{name}")  # the fixture removes the local tags after
        _docker("tag", pushed["base"], f"{repo}:{name}")
        _docker("push", f"{repo}:{name}")
    front = _AuthFront(reg.replace("localhost", "127.0.0.1"), scheme, page_size=2)
    try:
        (tmp_path / "config.json").write_text(json.dumps({"auths": {f"localhost:{front.port}": {
            "auth": base64.b64encode(b"user:secret").decode()}}}))
        monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
        ref = f"{repo}:1.0".replace(reg, f"localhost:{front.port}")
        assert sorted(registry.tags(ref)) == names
        assert front.tag_pages == 2  # three tags, two a page: the client followed the registry's Link
        assert front.tokens_issued == (1 if scheme == "bearer" else 0)  # one login serves every page
        with pytest.raises(registry.NotFound, match="has no repository"):
            registry.tags(ref.replace("tagpages-", "no-such-"))
    finally:
        front.close()


# ---- what a failed check says: no lock yet, an upstream that did not answer, a pin that moved ----

def test_check_without_a_lock_says_how_to_make_one_not_that_a_pin_moved(tmp_path, remote):
    # a first `lock --check` used to end "a moved tag or missing commit: review the stack's pin"
    url = remote["url"]
    stack_file = write_stack(tmp_path / "g.toml", "a/b@sha256:" + "b" * 64,
                             components=[{"name": "ok", "git": url, "commit": remote["c2"]}])
    code, out = lock("--stack-file", str(stack_file), "--check")
    assert code == 1, out
    assert "no-lock     stack locktest: has no lock file yet" in out
    assert f"no lock yet: `rocmkit lock --stack-file {stack_file}` makes locktest's" in out
    assert "moved" not in out and "review" not in out
    # the remote down as well: still no lock (exit 1), and the unreachable remote is named as such
    remote["daemon"].terminate()
    remote["daemon"].wait(timeout=10)
    code, out = lock("--stack-file", str(stack_file), "--check")
    assert code == 1 and "no lock yet" in out and "could not reach component ok: those refs were not checked" in out
    assert "moved" not in out and "review" not in out
    # `lock` itself: nothing to keep, and exit 3 since an upstream is all that failed
    code, out = lock("--stack-file", str(stack_file))
    assert code == 3 and "not written: refs unreachable" in out and "old lock kept" not in out
    assert "no-lock" not in out and not lock_path(stack_file).exists()


def test_check_of_a_builtin_stack_says_why_none_ships():
    code, out = lock("verl-cpu", "--check")
    assert code == 1, out
    assert "rocmkit ships no lock for this built-in stack" in out and "rocmkit lock --stack-file FILE" in out
    assert "writes one to the current folder (verl-cpu.lock.json" in out
    assert "a moved tag" not in out and "Traceback" not in out


def test_check_of_a_moved_tag_says_it_moved(tmp_path, remote):
    url = remote["url"]
    stack_file = write_stack(tmp_path / "g.toml", "a/b@sha256:" + "b" * 64,
                             components=[{"name": "tagged", "git": url, "commit": remote["c1"], "tag": "v1"}])
    assert lock("--stack-file", str(stack_file))[0] == 0
    _g("tag", "-f", "v1", remote["c2"], cwd=remote["bare"])
    code, out = lock("--stack-file", str(stack_file), "--check")
    assert code == 1 and "lock check failed for locktest (moved)" in out and "a pin moved upstream" in out
    assert "no lock yet" not in out and "could not reach" not in out
