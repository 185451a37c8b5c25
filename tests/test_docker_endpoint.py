"""Which engine rocmkit talks to: found the docker CLI's way (DOCKER_HOST, else DOCKER_CONTEXT, else the
context `docker context use` chose), so that the SDK, the doctor's ping and the CLI reach one engine.
The context store is written here in the CLI's own format (contexts/meta/<sha256(name)>/meta.json)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from rocmkit.runtime import docker_engine
from rocmkit.errors import EnvironmentMissing

REPO = Path(__file__).resolve().parent.parent


def write_context(config_dir, name: str, host: str, current: bool = False) -> None:
    meta = config_dir / "contexts" / "meta" / hashlib.sha256(name.encode()).hexdigest()
    meta.mkdir(parents=True)
    (meta / "meta.json").write_text(json.dumps({"Name": name, "Metadata": {},
                                                "Endpoints": {"docker": {"Host": host, "SkipTLSVerify": False}}}))
    if current:
        (config_dir / "config.json").write_text(json.dumps({"currentContext": name}))


@pytest.fixture
def config_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("DOCKER_CONFIG", str(tmp_path))
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.delenv("DOCKER_CONTEXT", raising=False)
    return tmp_path


def test_default_socket_without_host_or_context(config_dir):
    where = docker_engine.endpoint()
    assert (where.host, where.context) == (docker_engine.DEFAULT_HOST, None)
    assert "the default" in where.describe()


def test_context_chosen_by_docker_context_use(config_dir):
    write_context(config_dir, "rootless", "unix:///run/user/1000/docker.sock", current=True)
    where = docker_engine.endpoint()
    assert (where.host, where.context) == ("unix:///run/user/1000/docker.sock", "rootless")
    assert "config.json" in where.source and "'rootless'" in where.describe()


def test_docker_context_variable_beats_config_and_docker_host_beats_both(config_dir, monkeypatch):
    write_context(config_dir, "rootless", "unix:///run/user/1000/docker.sock", current=True)
    write_context(config_dir, "builder", "ssh://user@builder")
    monkeypatch.setenv("DOCKER_CONTEXT", "builder")
    assert (docker_engine.endpoint().host, docker_engine.endpoint().source) == ("ssh://user@builder", "DOCKER_CONTEXT")
    monkeypatch.setenv("DOCKER_HOST", "tcp://10.0.0.1:2375")
    assert docker_engine.endpoint() == docker_engine.Endpoint("tcp://10.0.0.1:2375", source="DOCKER_HOST")


def test_default_context_named_is_the_default_socket(config_dir, monkeypatch):
    monkeypatch.setenv("DOCKER_CONTEXT", "default")
    assert docker_engine.endpoint().host == docker_engine.DEFAULT_HOST


def test_missing_context_is_named_with_where_it_came_from(config_dir, monkeypatch):
    monkeypatch.setenv("DOCKER_CONTEXT", "gone")
    with pytest.raises(EnvironmentMissing) as err:
        docker_engine.endpoint()
    assert "'gone'" in err.value.message and "DOCKER_CONTEXT" in err.value.message
    assert "docker context ls" in err.value.hint


def test_ping_follows_the_context(config_dir, tmp_path):
    write_context(config_dir, "elsewhere", f"unix://{tmp_path}/no-engine.sock", current=True)
    assert docker_engine.ping() == {"host": f"unix://{tmp_path}/no-engine.sock", "status": "absent"}


def test_ping_imports_neither_the_sdk_nor_the_client_choice(config_dir, tmp_path):
    # a live `doctor` pings through this module: the SDK costs 0.22 s to import, and the build client's rules
    # (docker_client) are no business of a ping, so neither may load with it
    write_context(config_dir, "elsewhere", f"unix://{tmp_path}/no-engine.sock", current=True)
    script = ("import json, sys; from rocmkit.runtime.docker_engine import ping; "
              "print(json.dumps([ping(), sorted(sys.modules)]))")
    env = {k: v for k, v in os.environ.items() if k not in ("DOCKER_HOST", "DOCKER_CONTEXT")}
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         env={**env, "DOCKER_CONFIG": str(config_dir)}, cwd=REPO, timeout=60)
    answer, modules = json.loads(out.stdout)
    assert answer["status"] == "absent", out.stderr
    assert [m for m in modules if m == "docker" or m.startswith(("docker.", "rocmkit.runtime.docker_client"))] == []


def test_commands_name_the_context_when_its_engine_is_down(config_dir, tmp_path):
    write_context(config_dir, "elsewhere", f"unix://{tmp_path}/no-engine.sock", current=True)
    env = {k: v for k, v in os.environ.items() if k not in ("DOCKER_HOST", "DOCKER_CONTEXT")}
    out = subprocess.run([sys.executable, "-m", "rocmkit", "doctor", "--image", "any:tag"], capture_output=True,
                         text=True, env={**env, "DOCKER_CONFIG": str(config_dir)}, timeout=60)
    assert out.returncode == 3, out.stderr
    assert "docker context 'elsewhere'" in out.stderr and "no-engine.sock" in out.stderr
    assert "Traceback" not in out.stderr


@pytest.mark.docker
def test_sdk_reaches_the_engine_through_a_context(config_dir):
    socket = os.environ.get("ROCMKIT_TEST_DOCKER_SOCKET", "/var/run/docker.sock")
    if not os.path.exists(socket):
        if os.environ.get("ROCMKIT_REQUIRE_DOCKER") == "1":
            pytest.fail(f"{socket} is absent although CI provisioned the engine")
        pytest.skip(f"no engine at {socket}")
    write_context(config_dir, "ci", f"unix://{socket}", current=True)
    info = docker_engine.Engine.connect().info()
    assert "docker context 'ci'" in info.address and info.ncpu >= 1
