"""Paths a user gives that cannot be used: each is exit 2 naming the option, never a FileNotFoundError or
PermissionError traceback. The commands tests/test_no_traceback.py leaves out because they reach the network
(outdated, lock, wheelhouse) are driven here with inputs they refuse before asking anything."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from rocmkit.cli import cli


def invoke(args, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    r = CliRunner().invoke(cli, args)
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert "Traceback" not in r.output
    return r


@pytest.mark.parametrize("out", ["/proc/nope", "/sys/foo", "/proc/nope/deeper", "/dev/full", "a-file", "a-file/x"])
def test_certify_out_that_cannot_be_a_folder_is_exit_2_naming_out(tmp_path, monkeypatch, out):
    # `certify --host --gpus 0 --out /proc/nope` ended in a raw FileNotFoundError, exit 1 (as root, os.access says
    # /proc is writable; only making the folder tells). Nothing trains: the folder is taken before the run.
    (tmp_path / "a-file").write_text("mine\n")
    r = invoke(["certify", "--host", "--gpus", "0", "--out", out], tmp_path, monkeypatch)
    assert r.exit_code == 2, r.output
    assert ("error: --out " in r.output or "Invalid value for '--out'" in r.output) and out.split("/")[-1] in r.output
    assert (tmp_path / "a-file").read_text() == "mine\n"


@pytest.mark.parametrize("args", [
    ["bake", "--context-dir", "/proc/nope"], ["bake", "--stack", "trl-cpu", "-o", "/proc/nope/bake.hcl"],
    ["render", "--stack", "trl-cpu", "--arch", "cpu", "-o", "/sys/foo.Dockerfile"],
    ["slurm", "--stack", "verl-vllm", "--nodes", "2", "--image", "rocmkit/verl:1", "--no-verl-check", "-o", "/proc/nope/job.sbatch"],
    ["doctor", "--capture", "/proc/nope"], ["doctor", "--save-baseline", "/sys/nope.json"],
])
def test_an_output_path_under_proc_or_sys_is_exit_2_naming_the_option(tmp_path, monkeypatch, args):
    r = invoke(args, tmp_path, monkeypatch)
    option = next(a for a in args if a in ("--context-dir", "-o", "--capture", "--save-baseline"))
    assert r.exit_code == 2, r.output
    assert f"error: {'--output' if option == '-o' else option} " in r.output, r.output


@pytest.mark.parametrize("command", [["outdated"], ["lock"], ["wheelhouse", "dest"], ["stacks"], ["render"]])
@pytest.mark.parametrize("path", ["/dev/zero", "/dev/full", ""])
def test_a_device_or_an_empty_path_as_a_stack_file_is_refused_before_it_is_read(tmp_path, monkeypatch, command,
                                                                                path):
    # /dev/zero never ends: read as a stack file it filled memory until the kernel killed rocmkit.
    r = invoke([*command, "--stack-file", path], tmp_path, monkeypatch)
    assert r.exit_code == 2 and "--stack-file" in r.output, r.output


def test_dev_stdout_as_an_output_is_written_in_place_not_replaced(tmp_path, monkeypatch):
    # write_atomic replaced the target with a new file: as root, `-o /dev/null` put a regular file where the
    # system's /dev/null was. A character device is now written in place; a FIFO stands in for it here.
    import os

    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    import threading

    got = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_text()))
    reader.start()
    r = invoke(["render", "--stack", "trl-cpu", "--arch", "cpu", "-o", str(fifo), "--force"], tmp_path, monkeypatch)
    reader.join(timeout=60)
    assert r.exit_code == 0, r.output
    assert fifo.is_fifo() and got and got[0].startswith("# syntax=") or "FROM" in got[0], got[:1]



@pytest.mark.parametrize("where", ["/proc", "a-folder-in-its-place"])
def test_lock_of_a_builtin_stack_where_no_lock_can_be_written_is_exit_2_naming_the_file(tmp_path, monkeypatch,
                                                                                       where):
    # A built-in stack's lock goes to the current folder: one that takes no file (/proc, as root too), or a
    # folder where the lock would be, is refused before any registry is asked, never an OSError's traceback.
    (tmp_path / "verl-cpu.lock.json").mkdir()
    folder = Path(where) if where.startswith("/") else tmp_path
    monkeypatch.chdir(folder)
    r = CliRunner().invoke(cli, ["lock", "verl-cpu"])
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    assert r.exit_code == 2, r.output
    assert f"error: {folder}/verl-cpu.lock.json: " in r.output, r.output
    assert "run `rocmkit lock verl-cpu` in a folder you can write to" in r.output


def test_version_names_the_build_and_needs_no_installed_metadata(monkeypatch):
    """`rocmkit --version` says the build identity a doctor document carries (the version is 0.1.0 at every commit),
    and from a source tree that pip never installed (`PYTHONPATH=checkout python -m rocmkit`) it says so: click's
    own version option raised "'rocmkit' is not installed" there, a traceback (seen on a GPU machine, 2026-12-07)."""
    from click.testing import CliRunner

    from rocmkit import buildid
    from rocmkit.cli import cli

    ident = buildid.identity()
    out = CliRunner().invoke(cli, ["--version"])
    assert out.exit_code == 0 and out.output.startswith(f"rocmkit, version {buildid.describe(ident)}"), out.output
    buildid.identity.cache_clear()
    monkeypatch.setattr(buildid, "_dist_info", lambda: None)
    try:
        out = CliRunner().invoke(cli, ["--version"])
        assert out.exit_code == 0 and out.exception is None, out.output
        assert out.output == f"rocmkit, version 0.0.0+source (build {ident['build'].removeprefix('py-sha256:')})\n"
    finally:
        buildid.identity.cache_clear()
