"""Small disagreements a user reads: each message says what it means, in the user's words and for the user's
host. Hosts are trees written by the project's generator (tests/treegen.py)."""

from __future__ import annotations

import shutil

import pytest
from click.testing import CliRunner

from rocmkit.cli import cli
from rocmkit.host.checks import Context, run_checks
from rocmkit.host.facts import collect
from treegen import HostSpec, healthy_process, write_tree


def findings(root) -> dict:
    return {f.id: f for f in run_checks(collect(str(root)), Context())}


def test_a_missing_driver_is_said_in_words_not_as_none(tmp_path):
    root = write_tree(tmp_path / "h", HostSpec(amdgpu=None))
    shutil.rmtree(root / "sys" / "class" / "kfd")  # no KFD topology either: the driver is not up
    title = findings(root)["gpu.driver"].title
    assert "None" not in title and "no /sys/module/amdgpu/initstate" in title, title
    root = write_tree(tmp_path / "c", HostSpec(amdgpu="coming"))
    shutil.rmtree(root / "sys" / "class" / "kfd")
    assert "initstate says 'coming'" in findings(root)["gpu.driver"].title


def test_the_torch_fix_names_the_index_of_the_hosts_rocm(tmp_path):
    # A CPU/CUDA torch on a ROCm 7.0.2 host with MI300X GPUs: the fix pointed at rocm6.4 whatever the host ran.
    cuda_torch = healthy_process(torch_hip=None, packages={"torch": "2.9.1+cu128"})
    for rocm, index in (("7.0.2", "rocm7.0"), ("6.4.1", "rocm6.4"), ("7.2.0", "rocm7.2")):
        root = write_tree(tmp_path / rocm, HostSpec(rocm=rocm, process=cuda_torch))
        torch = findings(root)["software.torch"]
        assert torch.status.value == "fail", torch
        assert f"https://download.pytorch.org/whl/{index})" in torch.fix, (rocm, torch.fix)


@pytest.mark.parametrize("args, what", [
    (["run", "--print", "Rocmkit/Verl:latest"], "IMAGE"),
    (["run", "--print", "--gpus", "none", "Rocmkit/Verl:latest", "--", "true"], "IMAGE"),
    (["certify", "--dry-run", "--image", "Rocmkit/Verl:latest"], "--image"),
    (["doctor", "--image", "Rocmkit/Verl:latest"], "--image"),
    (["build", "--dry-run", "--no-resolve", "--arch", "gfx942", "--tag", "Rocmkit/Verl:latest"], "--tag"),
])
def test_an_image_name_docker_refuses_is_refused_by_every_command_alike(args, what):
    # `run --print` used to print a `docker run` line with it, which Docker then refuses (upper-case repository).
    r = CliRunner().invoke(cli, args)
    assert r.exit_code == 2, r.output
    assert f"error: {what} 'Rocmkit/Verl:latest' is not an image reference Docker takes: bad repository" in r.output
    assert "Docker refuses upper case" in r.output and "docker run" not in r.output


def test_a_lower_case_image_name_still_prints_its_line():
    r = CliRunner().invoke(cli, ["run", "--print", "--gpus", "none", "ghcr.io/org/verl-vllm:gfx942"])
    assert r.exit_code == 0 and r.stdout.rstrip().endswith("ghcr.io/org/verl-vllm:gfx942"), r.output


def test_matrix_columns_stay_in_line_for_long_names():
    from rocmkit.cli.matrix import table
    from rocmkit.image.bake import matrix_rows

    rows = matrix_rows() + [{"stack": "a-stack-with-a-very-long-name-indeed", "arch": "gfx942,gfx950", "rocm": "10.0.0",
                             "dockerfile": "dockerfiles/long.Dockerfile"}]
    lines = table(rows).splitlines()
    assert len(lines) == len(rows)
    # every row's ROCm and Dockerfile columns start where the first row's do
    assert len({line.index("ROCm ") for line in lines}) == 1, lines
    assert len({line.index("dockerfiles/") for line in lines}) == 1, lines
    r = CliRunner().invoke(cli, ["matrix"])
    assert r.exit_code == 0 and len({line.index("dockerfiles/") for line in r.output.splitlines()}) == 1, r.output


def test_a_skipped_probe_reads_skipped_in_the_certificate_table():
    # A probe that did not run (one GPU: no all-reduce) used to print "yes (reported)" as its result.
    import json
    from pathlib import Path

    from rocmkit.certify.certificate import markdown
    from rocmkit.certify.judge import probe_checks

    cert = json.loads((Path(__file__).parent / "data" / "certify" / "verl-h100-tiny.json").read_text())
    probes = {"findings": [{"id": "probe.allreduce", "status": "skip", "title": "one GPU: nothing to all-reduce"},
                           {"id": "probe.gemm", "status": "pass", "title": "GEMM within 10% of peak"},
                           {"id": "probe.hbm", "status": "warn", "title": "HBM 12% below its class"}]}
    cert["checks"] = cert["checks"] + probe_checks(probes)
    rows = {line.split("|")[1].strip(): line.split("|")[2].strip() for line in markdown(cert).splitlines()
            if line.startswith("| probe.")}
    assert rows == {"probe.allreduce": "skipped", "probe.gemm": "pass", "probe.hbm": "no (reported)"}, rows
    # a certificate written before the field: told by its detail
    old = dict(probe_checks(probes)[0])
    old.pop("skipped")
    cert["checks"] = [old]
    assert "| probe.allreduce | skipped |" in markdown(cert)
