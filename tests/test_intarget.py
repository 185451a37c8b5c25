"""The host's rocmkit in a target (rocmkit/runtime/host_rocmkit.py), without an engine: the container's command and
mount, a host interpreter's PYTHONPATH, and the refusal of an engine that cannot see this host's files."""

import os
import subprocess
import sys

import pytest

import rocmkit
from rocmkit.errors import EnvironmentMissing
from rocmkit.runtime import host_rocmkit
from rocmkit.runtime.container import docker_run_argv


def test_a_container_gets_the_host_package_read_only_and_first_on_its_path(monkeypatch):
    monkeypatch.delenv(host_rocmkit.MODE_ENV, raising=False)
    argv = docker_run_argv("img", ["rocmkit", "doctor", "--json"], host_code=True, gpus=False)
    pkg = os.path.dirname(rocmkit.__file__)
    assert f"{pkg}:/opt/rocmkit-host/rocmkit:ro" in argv
    tail = argv[argv.index("img") + 1:]
    assert tail[:2] == ["sh", "-c"] and tail[-5:] == ["python3", "-m", "rocmkit", "doctor", "--json"]
    assert "PYTHONPATH=/opt/rocmkit-host" in tail[2]
    assert docker_run_argv("img", ["true"], gpus=False)[-2:] == ["img", "true"]  # a user's own container


def test_the_shell_line_keeps_the_images_pythonpath_behind():
    line = host_rocmkit.container_command(["python3", "-c", "import os; print(os.environ['PYTHONPATH'])"])
    out = subprocess.run(line, env={**os.environ, "PYTHONPATH": "/image/own"}, capture_output=True, text=True)
    assert out.stdout.strip() == "/opt/rocmkit-host:/image/own"


def test_another_interpreter_on_the_host_imports_this_rocmkit_and_nothing_else(tmp_path):
    env = host_rocmkit.host_env({"PATH": os.environ["PATH"]})
    first = env["PYTHONPATH"].split(os.pathsep)[0]
    assert os.listdir(first) == ["rocmkit"]
    out = subprocess.run([sys.executable, "-c", "import rocmkit; print(rocmkit.__file__)"],
                         env=env, cwd=tmp_path, capture_output=True, text=True)
    assert os.path.realpath(out.stdout.strip()) == os.path.realpath(rocmkit.__file__)


def test_a_remote_engine_is_refused_unless_the_images_rocmkit_is_asked_for(monkeypatch):
    monkeypatch.setenv("DOCKER_HOST", "tcp://builder:2376")
    monkeypatch.delenv(host_rocmkit.MODE_ENV, raising=False)
    with pytest.raises(EnvironmentMissing) as e:
        host_rocmkit.check_engine_local()
    assert "not on this machine" in e.value.message and host_rocmkit.MODE_ENV in e.value.hint
    monkeypatch.setenv(host_rocmkit.MODE_ENV, "image")
    host_rocmkit.check_engine_local()
    assert host_rocmkit.in_container(["python3"], []) == (["python3"], [])
