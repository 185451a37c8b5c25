"""`rocmkit run`: least-privilege flags, GPU selection through the KFD topology, --print."""

from __future__ import annotations

import os
import shlex

import pytest
from click.testing import CliRunner

from rocmkit.cli import cli
from rocmkit.cli.run import render_nodes_for
from rocmkit.runtime.container import docker_run_argv
from rocmkit.errors import UsageError
from treegen import HostSpec, write_tree


def test_print_gives_a_pasteable_least_privilege_line():
    r = CliRunner(env={"ROCMKIT_DOCKER": None}).invoke(cli, ["run", "rocm/img:1", "--print", "-e", "A=b c", "-v",
                                                             "/data:/data:ro", "--", "python3", "-c", "print('hi')"])
    assert r.exit_code == 0, r.output
    argv = shlex.split(r.stdout)  # (notes, where this host has no GPU, go to stderr)
    assert argv[:3] == ["docker", "run", "--rm"]
    assert "--device=/dev/kfd" in argv and "--device=/dev/dri" in argv and "--ipc=host" in argv
    assert "--privileged" not in argv and not any("seccomp" in a for a in argv)
    assert "--ulimit=memlock=-1:-1" in argv and "--cap-add=SYS_NICE" in argv
    assert argv[-4:] == ["rocm/img:1", "python3", "-c", "print('hi')"] and "A=b c" in argv


def test_privileged_and_seccomp_only_when_asked():
    r = CliRunner().invoke(cli, ["run", "img", "--print", "--seccomp-unconfined", "--shm-size", "32g"])
    argv = shlex.split(r.stdout)
    assert "--security-opt=seccomp=unconfined" in argv and "--shm-size=32g" in argv and "--ipc=host" not in argv
    argv = shlex.split(CliRunner().invoke(cli, ["run", "img", "--print", "--privileged"]).stdout)
    assert "--privileged" in argv and "--device=/dev/kfd" not in argv


def test_gpus_map_to_their_render_nodes(tmp_path):
    root = write_tree(tmp_path / "h", HostSpec(mode="CPX", gpus=2))
    # HIP numbers every partition: GPU 9 is the second partition of the second device (minor 128+8+1)
    assert render_nodes_for("0,9", str(root)) == ["/dev/dri/renderD128", "/dev/dri/renderD137"]
    argv = docker_run_argv("img", [], render_nodes=render_nodes_for("1", str(root)))
    assert "--device=/dev/dri/renderD129" in argv and "--device=/dev/dri" not in argv
    with pytest.raises(UsageError, match="GPUs 0-15"):
        render_nodes_for("16", str(root))
    with pytest.raises(UsageError, match="indices"):
        render_nodes_for("a,b", str(root))


def test_docker_client_is_chosen_by_option_or_environment():
    r = CliRunner(env={"ROCMKIT_DOCKER": "/usr/local/bin/podman"}).invoke(cli, ["run", "img", "--print"])
    assert shlex.split(r.stdout)[0] == "/usr/local/bin/podman"
    r = CliRunner().invoke(cli, ["run", "img", "--print", "--docker", "nerdctl"])
    assert shlex.split(r.stdout)[0] == "nerdctl"


@pytest.mark.skipif(os.path.exists("/dev/kfd"), reason="this host has /dev/kfd: the command would start a container")
def test_missing_device_nodes_are_named_before_docker_runs():
    r = CliRunner().invoke(cli, ["run", "img", "--docker", "/bin/false", "--", "true"])
    assert r.exit_code == 3 and "no /dev/kfd" in r.output and "--print" in r.output


def test_bad_options():
    runner = CliRunner()
    assert runner.invoke(cli, ["run", "img", "--print", "-e", "NOEQUALS"]).exit_code == 2
    assert runner.invoke(cli, ["run", "img", "--print", "-v", "/only"]).exit_code == 2


@pytest.mark.skipif(os.path.isdir("/sys/class/kfd/kfd/topology/nodes"), reason="this host has a KFD topology")
def test_print_with_gpus_needs_no_gpu_here():
    # on a login node `run --print --gpus 0,1` was refused: "--gpus needs the KFD topology"
    r = CliRunner(env={"ROCMKIT_DOCKER": None}).invoke(cli, ["run", "img", "--print", "--gpus", "0,1", "--", "true"])
    assert r.exit_code == 0, r.output
    argv = shlex.split(r.stdout)
    assert argv[:2] == ["docker", "run"] and "--device=/dev/kfd" in argv and "--device=/dev/dri" in argv
    assert argv[argv.index("-e") + 1] == "HIP_VISIBLE_DEVICES=0,1" and argv[-2:] == ["img", "true"]
    assert "no KFD topology to map those GPUs" in r.stderr and "HIP_VISIBLE_DEVICES=0,1" in r.stderr
    # the user's own visible-devices variable is kept, not doubled
    r = CliRunner(env={"ROCMKIT_DOCKER": None}).invoke(cli, ["run", "img", "--print", "--gpus", "0,1", "-e",
                                                             "HIP_VISIBLE_DEVICES=3"])
    assert r.exit_code == 0 and "HIP_VISIBLE_DEVICES=3" in r.stdout and "HIP_VISIBLE_DEVICES=0,1" not in r.stdout
    # without --print the topology is still needed: the command would start a container here
    r = CliRunner().invoke(cli, ["run", "img", "--gpus", "0,1", "--docker", "/bin/false", "--", "true"])
    assert r.exit_code == 3 and "KFD topology" in r.output


@pytest.mark.skipif(os.path.exists("/dev/kfd"), reason="this host has /dev/kfd")
def test_print_says_the_device_nodes_were_not_checked_here():
    r = CliRunner(env={"ROCMKIT_DOCKER": None}).invoke(cli, ["run", "img", "--print"])
    assert r.exit_code == 0 and "device nodes were not checked here" in r.stderr
    assert "note" not in r.stdout
