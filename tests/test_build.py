"""`rocmkit build` without a build: the log parser on real BuildKit logs, --max-jobs auto, the docker
command line, client choice, rocmkit's own wheel, the context's sources, and the error paths that
stop before an engine is needed (or because none is there)."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import stackgen

from rocmkit.runtime.docker_client import DockerCLI, find_cli, probe_cli
from rocmkit.runtime.docker_engine import check_ref, split_ref
from rocmkit.errors import EnvironmentMissing, UsageError
from rocmkit.image import buildlog, jobs
from rocmkit.image.build import BuildOptions, build_command
from rocmkit.image.selfwheel import build_self_wheel
from rocmkit.image.sources import copy_tree, tree_digest, tree_files

LOGS = Path(__file__).parent / "data" / "buildlogs"
REPO = Path(__file__).resolve().parent.parent


def run_rocmkit(*args, env=None, cwd=None):
    return subprocess.run([sys.executable, "-m", "rocmkit", *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, cwd=cwd, timeout=120)


# ---- the BuildKit log parser, on logs captured from real builds of the test stack (docker 20.10) ----

def test_cold_log_every_stage_ran():
    log = buildlog.parse((LOGS / "docker20.10-cold.log").read_text())
    assert set(log.rebuilt_stages()) == {"base", "build-alpha", "build-beta", "build-delta", "build-gamma", "final"}
    assert not log.fully_cached()
    assert log.failed_step() is None
    compile_step = next(s for s in log.stage_steps() if s.stage == "build-alpha" and s.index == s.total)
    assert compile_step.status == "done" and compile_step.seconds > 1
    assert any("Successfully built alpha" in line or "Created wheel for alpha" in line for line in compile_step.output)


def test_cached_log_is_fully_cached():
    log = buildlog.parse((LOGS / "docker20.10-cached.log").read_text())
    assert log.fully_cached()
    assert log.rebuilt_stages() == []
    stages = log.stages()
    assert set(stages) == {"base", "build-alpha", "build-beta", "build-gamma", "build-delta", "final"}
    assert all(e["cached"] == e["steps"] for e in stages.values())


def test_one_change_log_rebuilds_only_that_stage_and_final():
    log = buildlog.parse((LOGS / "docker20.10-one-change.log").read_text())
    assert log.rebuilt_stages() == ["build-beta", "final"]
    # The COPY of the changed folder and everything after it in that stage ran; the WORKDIR before it was cached.
    beta = sorted((s for s in log.stage_steps() if s.stage == "build-beta"), key=lambda s: s.index)
    assert [s.status for s in beta] == ["cached", "done", "done", "done"]


def test_failure_log_names_the_step_and_keeps_its_output():
    log = buildlog.parse((LOGS / "docker20.10-failure.log").read_text())
    step = log.failed_step()
    assert step.stage == "build-broken" and step.index == step.total
    assert "exit code: 1" in step.error
    assert any("component broken on purpose" in line for line in step.output)
    # The summary block after the failure repeats the output; it must not be counted twice.
    text = (LOGS / "docker20.10-failure.log").read_text()
    before_summary = text.split("\n------\n")[0]
    assert sum("component broken on purpose" in line for line in step.output) == \
        sum(line.startswith(f"#{step.id} ") and "component broken on purpose" in line for line in before_summary.splitlines())
    assert any("executor failed running" in line for line in log.trailer)


def test_failure_summary_is_not_attributed_twice():
    text = "\n".join([
        "#5 [build-x 2/2] RUN make",
        "#5 0.100 compiling",
        "#5 0.200 boom",
        "#5 ERROR: executor failed running [make]: exit code: 2",
        "------",
        " > [build-x 2/2] RUN make:",
        "#5 0.100 compiling",
        "#5 0.200 boom",
        "------",
        "error: failed to solve: exit code: 2",
    ])
    log = buildlog.parse(text)
    step = log.failed_step()
    assert step.output == ["compiling", "boom"]
    assert step.error == "executor failed running [make]: exit code: 2"
    assert log.trailer[-1] == "error: failed to solve: exit code: 2"


# ---- --max-jobs auto ----

GIB = 1024 ** 3


@pytest.mark.parametrize("mem_gib, ncpu, width, per_job, expected", [
    (64, 32, 1, 4, 15),      # vLLM PR #29003's builder: memory binds long before 32 cores
    (64, 32, 3, 4, 5),       # three stages compiling at once share that memory
    (2048, 224, 4, 4, 127),  # AMD's own builders: 2 TB, 200+ CPUs
    (2048, 64, 1, 4, 64),    # cores bind
    (8, 16, 2, 4, 1),        # a small laptop still gets one job
    (24, 2, 3, 1, 2),        # CI: 2 cores
])
def test_auto_max_jobs(mem_gib, ncpu, width, per_job, expected):
    choice = jobs.auto_max_jobs(mem_gib * GIB, ncpu, width, per_job)
    assert choice.jobs == expected
    assert f"{ncpu} CPUs" in choice.reason and ("memory" in choice.reason or "cores" in choice.reason)


def test_gib_per_job_by_stack():
    assert jobs.gib_per_job("none") < jobs.gib_per_job("7.0.2")


# ---- the docker command line ----

BUILTIN = DockerCLI("/usr/bin/docker", "20.10.24", "builtin")
BUILDX = DockerCLI("/usr/local/bin/docker", "28.2.2", "buildx")


def _argv(cli, **kw):
    return build_command(cli, BuildOptions(max_jobs=3, **kw), Path("/ctx"), Path("/ctx/Dockerfile"), Path("/t/iid"))


def test_build_command_builtin_tags_nothing_and_passes_max_jobs():
    argv = _argv(BUILTIN, network="none", cache_from=("type=registry,ref=ghcr.io/o/c:x", "ghcr.io/o/img:1"),
                 cache_to=("type=inline",))
    assert argv[:2] == ["/usr/bin/docker", "build"]
    assert "-t" not in argv and "--tag" not in argv and "--push" not in argv
    assert argv[argv.index("--iidfile") + 1] == "/t/iid"
    assert argv[argv.index("--target") + 1] == "final"
    assert "MAX_JOBS=3" in argv and "BUILDKIT_INLINE_CACHE=1" in argv
    assert argv[argv.index("--network") + 1] == "none"
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--cache-from"] == ["ghcr.io/o/c:x", "ghcr.io/o/img:1"]
    assert argv[-1] == "/ctx"
    assert BUILTIN.build_env()["DOCKER_BUILDKIT"] == "1"


def test_build_command_buildx_passes_caches_through_and_loads():
    argv = _argv(BUILDX, cache_from=("type=gha",), cache_to=("type=gha,mode=max",))
    assert argv[:3] == ["/usr/local/bin/docker", "buildx", "build"]
    assert "--load" in argv
    assert argv[argv.index("--cache-to") + 1] == "type=gha,mode=max"
    assert argv[argv.index("--cache-from") + 1] == "type=gha"


@pytest.mark.parametrize("opts", [{"cache_to": ("type=registry,ref=ghcr.io/o/c",)}, {"cache_from": ("type=gha",)}])
def test_build_command_builtin_refuses_what_it_cannot_do(opts):
    with pytest.raises(EnvironmentMissing) as e:
        _argv(BUILTIN, **opts)
    assert "buildx" in e.value.hint or "buildx" in e.value.message


# ---- image references ----

@pytest.mark.parametrize("ref", ["rocmkit/verl-vllm:gfx942-0123", "ghcr.io/org/verl:1.0", "localhost:5000/a/b:c",
                                 "registry.example.com:5000/x", "plain"])
def test_check_ref_accepts(ref):
    assert check_ref(ref) == ref


@pytest.mark.parametrize("ref", ["Upper/case:1", "a b", "x:y:z", "repo:tag with space", "-bad", "repo:" + "t" * 200])
def test_check_ref_rejects(ref):
    with pytest.raises(UsageError):
        check_ref(ref)


def test_split_ref():
    assert split_ref("localhost:5000/a/b:c") == ("localhost:5000/a/b", "c")
    assert split_ref("localhost:5000/a/b") == ("localhost:5000/a/b", "latest")
    assert split_ref("x") == ("x", "latest")


# ---- choosing the docker client (real clients where this machine has them) ----

def test_probe_rejects_a_client_that_refuses_buildkit():
    # The project's machines have /usr/local/bin/docker 28.x without a buildx plugin.
    path = "/usr/local/bin/docker"
    if not os.path.exists(path):
        pytest.skip(f"no {path} here")
    found = probe_cli(path)
    if isinstance(found, DockerCLI):
        pytest.skip(f"{path} can do BuildKit here ({found.mode})")
    assert "buildx" in found


def test_probe_accepts_debians_client():
    path = "/usr/bin/docker"
    if not os.path.exists(path):
        pytest.skip(f"no {path} here (install docker.io)")
    found = probe_cli(path)
    assert isinstance(found, DockerCLI), found
    assert found.mode in ("builtin", "buildx")


def test_named_client_that_does_not_exist(monkeypatch):
    monkeypatch.delenv("ROCMKIT_DOCKER", raising=False)
    with pytest.raises(EnvironmentMissing) as e:
        find_cli("/nonexistent/docker")
    assert "/nonexistent/docker" in e.value.message and "--docker" in e.value.message


def test_no_client_anywhere_explains(monkeypatch, tmp_path):
    monkeypatch.delenv("ROCMKIT_DOCKER", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr("rocmkit.runtime.docker_client.WELL_KNOWN_CLIS", ())
    with pytest.raises(EnvironmentMissing) as e:
        find_cli(None)
    assert "no docker client found" in e.value.message and "ROCMKIT_DOCKER" in e.value.hint


# ---- rocmkit's own wheel for the image ----

def test_self_wheel_is_reproducible_and_complete(tmp_path):
    a = build_self_wheel(tmp_path / "a")
    b = build_self_wheel(tmp_path / "b")
    assert a.read_bytes() == b.read_bytes()
    names = zipfile.ZipFile(a).namelist()
    assert "rocmkit/cli/__init__.py" in names and "rocmkit/templates/Dockerfile.j2" in names
    assert "rocmkit/resources/stacks/verl-cpu.toml" in names
    assert "rocmkit/resources/archs.toml" in names and "rocmkit/resources/archs.json" in names
    assert not any("__pycache__" in n or n.endswith(".pyc") for n in names)
    info = [n for n in names if n.endswith(".dist-info/METADATA")]
    meta = zipfile.ZipFile(a).read(info[0]).decode()
    assert "Requires-Dist: click" in meta and "## " not in meta  # no README inside


def test_self_wheel_declares_only_what_the_image_needs(tmp_path):
    """The image's rocmkit requires IMAGE_REQUIREMENTS, never the host CLI's CycloneDX library (the SBOM step
    mounts that); `rocmkit wheelhouse` downloads the same list."""
    from rocmkit.image.selfwheel import IMAGE_REQUIREMENTS
    from rocmkit.image.wheelhouse import rocmkit_requirements

    wheel = zipfile.ZipFile(build_self_wheel(tmp_path))
    meta = wheel.read(next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))).decode()
    required = [line.split(": ", 1)[1] for line in meta.splitlines() if line.startswith("Requires-Dist: ")]
    assert [r for r in required if "extra ==" not in r] == list(IMAGE_REQUIREMENTS)
    assert not any("cyclonedx" in r.lower() for r in required if "extra ==" not in r)
    assert rocmkit_requirements() == list(IMAGE_REQUIREMENTS)


def test_self_wheel_installs_and_runs(tmp_path):
    """The wheel installs into a fresh venv (dependencies from this environment) and its CLI runs."""
    wheel = build_self_wheel(tmp_path / "dist")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True,
                   timeout=120)
    target = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(target)
    out = subprocess.run([str(venv / "bin" / "python"), "-c",
                          "import sys; sys.path.insert(0, sys.argv[1]); from rocmkit.cli import main; sys.argv=['rocmkit','render','--help']; main()",
                          str(target)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Render a stack" in out.stdout


# ---- local sources: what is hashed is what is copied ----

def test_copy_tree_copies_exactly_what_is_hashed(tmp_path):
    src = stackgen.write_component(tmp_path / "src", stackgen.ComponentSpec("alpha", units=1, functions=3))
    (src / "build").mkdir()
    (src / "build" / "junk.o").write_text("x")
    (src / ".git").mkdir()
    (src / ".git" / "HEAD").write_text("ref")
    (src / "run.sh").write_text("#!/bin/sh\n")
    (src / "run.sh").chmod(0o755)
    os.symlink("setup.py", src / "link.py")
    dest = tmp_path / "ctx" / "alpha"
    copy_tree(src, dest)
    assert tree_files(dest) == tree_files(src)
    assert tree_digest(dest) == tree_digest(src)
    assert not (dest / "build").exists() and not (dest / ".git").exists()
    assert os.access(dest / "run.sh", os.X_OK) and (dest / "link.py").is_symlink()


# ---- error paths of the command ----

def _stack(tmp_path):
    specs = [stackgen.ComponentSpec("gamma")]
    stackgen.write_component(tmp_path / "src", specs[0])
    return stackgen.write_stack(tmp_path / "stack.toml", "errtest", "debian:bookworm", specs)


def test_no_engine_exit_3_says_how_to_get_one(tmp_path):
    stack = _stack(tmp_path)
    r = run_rocmkit("build", "--arch", "gfx942", "--stack-file", str(stack), "--source", f"gamma={tmp_path / 'src/gamma'}",
                    env={"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"})
    assert r.returncode == 3, r.stderr
    assert "error: no Docker engine reachable at unix://" in r.stderr
    assert "DOCKER_HOST" in r.stderr and "dockerd" in r.stderr
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize("extra, needle", [
    (["--push"], "--push needs --tag"),
    (["--tag", "Not A Ref"], "is not an image reference"),
    (["--network", "none; rm -rf /"], "is not a network name"),
    (["--max-jobs", "0"], "must be at least 1"),
    (["--max-jobs", "many"], "expected a number or 'auto'"),
    (["--source", "nosuch=/tmp"], "has no git component 'nosuch'"),
    (["--progress", "fancy"], "Invalid value for '--progress'"),
])
def test_bad_usage_exit_2(tmp_path, extra, needle):
    stack = _stack(tmp_path)
    r = run_rocmkit("build", "--arch", "gfx942", "--stack-file", str(stack), *extra,
                    env={"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"})
    assert r.returncode == 2, r.stderr
    assert needle in r.stderr
    assert "Traceback" not in r.stderr


def test_dry_run_auto_jobs_needs_no_engine(tmp_path):
    stack = _stack(tmp_path)
    r = run_rocmkit("build", "--arch", "gfx942", "--stack-file", str(stack), "--dry-run", "--max-jobs", "auto",
                    env={"DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock"})
    assert r.returncode == 0, r.stderr
    assert "MAX_JOBS=auto" in r.stdout


def test_help_documents_every_option():
    r = run_rocmkit("build", "--help")
    assert r.returncode == 0
    for opt in ("--tag", "--push", "--base-image", "--source", "--max-jobs", "--cache-from", "--cache-to",
                "--network", "--progress", "--log-file", "--docker", "ROCMKIT_DOCKER", "--dry-run", "--json", "--timeout"):
        assert opt in r.stdout, opt


def test_repeated_final_status_is_one_event():
    log = buildlog.BuildLog()
    events = [log.feed(line) for line in ("#4 [base 2/3] RUN x", "#4 CACHED", "#4 CACHED")]
    assert [len(e) for e in events] == [1, 1, 0]


# ---- the request the CLI hands to image/orchestrate.py ----

def test_build_request_refuses_what_no_build_could_do(tmp_path):
    from rocmkit import stacks
    from rocmkit.image.request import AUTO, BuildRequest

    stack = stacks.load_builtin("verl-vllm")
    ok = BuildRequest(stack=stack, targets=("gfx942",), max_jobs=AUTO, network="none", wheelhouse=tmp_path)
    assert ok.offline and not BuildRequest(stack=stack, targets=("gfx942",)).offline
    (tmp_path / "taken.json").write_text("{}")
    for bad, needle in [({"push": True}, "--push needs --tag"), ({"network": "b a d"}, "--network"),
                        ({"max_jobs": 0}, "--max-jobs"), ({"sbom_out": tmp_path / "taken.json"}, "already exists")]:
        with pytest.raises(UsageError, match=needle):
            BuildRequest(stack=stack, targets=("gfx942",), **bad)


# ---- the order: the base image before the resolve ----

class _Images:
    def get(self, ref):
        from docker.errors import ImageNotFound

        raise ImageNotFound(f"No such image: {ref}")


class _Api:
    def __init__(self, reachable: bool):
        self.reachable, self.asked = reachable, []

    def inspect_distribution(self, ref):
        from docker.errors import APIError

        self.asked.append(ref)
        if not self.reachable:
            raise APIError("500 Server Error", explanation="Get \"https://nosuch.example/v2/\": dial tcp: lookup "
                                                           "nosuch.example: no such host")
        return {"Descriptor": {"digest": "sha256:" + "0" * 64}}


class _Resolved(Exception):
    """Raised by the test's resolve: what follows the resolve is not this test's."""


@pytest.mark.parametrize("reachable", [False, True])
def test_the_base_image_is_looked_up_before_the_resolve(tmp_path, monkeypatch, reachable):
    """An unreachable base image failed only after the minute-long pip resolve: it is now asked of the engine
    first (its registry, with this user's logins), and the resolve runs only when it answers."""
    from types import SimpleNamespace

    from rocmkit import stacks
    from rocmkit.errors import Failed
    from rocmkit.image import orchestrate
    from rocmkit.image.request import BuildRequest, Reporter
    from rocmkit.runtime.docker_engine import Engine, EngineInfo

    api = _Api(reachable)
    engine = Engine(SimpleNamespace(images=_Images(), api=api), where=None)
    monkeypatch.setattr(Engine, "connect", classmethod(lambda cls, timeout=30: engine))
    monkeypatch.setattr(Engine, "info", lambda self: EngineInfo("27.0", "1.47", "linux", "x86_64", 4, 8 << 30, "here"))
    monkeypatch.setattr("rocmkit.image.sbomlib.check_installed", lambda: None)
    monkeypatch.setattr("rocmkit.runtime.docker_client.find_cli", lambda name=None: None)
    resolved = []

    def resolve(stack, sources):
        resolved.append(stack.name)
        raise _Resolved

    monkeypatch.setattr("rocmkit.stacks.resolve.resolve", resolve)
    request = BuildRequest(stack=stacks.load_builtin("verl-vllm"), targets=("gfx942",),
                           base_image="nosuch.example/rocm:7")
    said = []
    report = Reporter(say=said.append, warn=said.append)
    if reachable:
        with pytest.raises(_Resolved):
            orchestrate.build(request, report)
        assert api.asked == ["nosuch.example/rocm:7"] and resolved == ["verl-vllm"]
        return
    with pytest.raises(Failed) as err:
        orchestrate.build(request, report)
    assert resolved == [], "the resolve ran before the base image was looked up"
    assert "base image nosuch.example/rocm:7 cannot be reached: Get" in err.value.message
    assert "no such host: nothing was built" in err.value.message and "--base-image" in err.value.hint
