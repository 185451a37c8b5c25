"""The PCIe AER counter check (pcie.aer) on generated hosts: GPUs, RDMA NICs and the bridges above them with
aer_dev_* files in the kernel's format (tests/aergen.py); its thresholds; --capture/--root.

This machine's PCI devices have no AER capability and no capture with aer_* files was at hand (none in
/work/shared/fixtures or tests/data), so the files are generated as drivers/pci/pcie/aer.c prints them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from aergen import aer_files
from rocmkit.cli import cli
from rocmkit.host.capture import capture
from rocmkit.host.checks import Context, run_checks
from rocmkit.host.facts import collect
from rocmkit.host.facts.aer import read_aer
from rocmkit.host.facts.reader import Reader
from rocmkit.host.model import Status
from treegen import HostSpec, write_tree


def aer(tmp_path: Path, **spec):
    root = write_tree(tmp_path / "host", HostSpec(**{"gpus": 2, "rdma_nics": 2, **spec}))
    found = [f for f in run_checks(collect(str(root)), Context(), only={"pcie.aer"})]
    assert len(found) == 1
    return found[0]


def test_clean_counters_pass_on_every_gpu_nic_and_bridge(tmp_path):
    f = aer(tmp_path)
    # 2 GPUs, 2 NICs; above each GPU/NIC pair: a root port, a switch's upstream port and two downstream ports
    assert f.status == Status.PASS and f.evidence["read"] == 2 + 2 + 2 * 4
    assert f.evidence["devices"] == {} and f.evidence["uptime_s"] == 86_400.0


@pytest.mark.parametrize("counts,status,words", [
    ({"gpu0": {"fatal:SDES": 1}}, Status.FAIL, "0000:05:00.0 (GPU): fatal Surprise Down 1"),
    ({"gpu1": {"CmpltTO": 2}}, Status.FAIL, "0000:15:00.0 (GPU): non-fatal Completion Timeout 2"),
    ({"nic0": {"TLP": 1}}, Status.FAIL, "0000:06:00.0 (NIC mlx5_0): non-fatal Poisoned TLP 1"),
    ({"port0": {"fatal:DLP": 1}}, Status.FAIL, "0000:04:00.0 (bridge above 0000:05:00.0): fatal Data Link Protocol"),
    ({"gpu0": {"UnsupReq": 3}}, Status.WARN, "non-fatal Unsupported Request 3"),
    ({"port1": {"BadDLLP": 481}}, Status.WARN, "481 correctable link errors"),
    ({"gpu0": {"RxErr": 479}}, Status.PASS, "correctable ones within limits"),
    ({"gpu0": {"NonFatalErr": 5000, "CorrIntErr": 9, "HeaderOF": 1}}, Status.PASS, "within limits"),
])
def test_thresholds(tmp_path, counts, status, words):
    f = aer(tmp_path, aer=counts)
    assert f.status == status and words in f.title, f.title


def test_correctable_rate_since_boot(tmp_path):
    """100 replays in 10 minutes is above DCGM's 8 per minute; the same 100 over a day is not."""
    f = aer(tmp_path / "fresh", aer={"gpu0": {"Rollover": 60, "Timeout": 40}}, uptime_s=600)
    assert f.status == Status.WARN and "10.0/min since boot" in f.title
    f = aer(tmp_path / "day", aer={"gpu0": {"Rollover": 60, "Timeout": 40}})
    assert f.status == Status.PASS
    assert f.evidence["devices"]["0000:05:00.0"]["correctable"] == {"Rollover": 60, "Timeout": 40}


def test_root_port_totals_are_evidence(tmp_path):
    f = aer(tmp_path, aer={"gpu0": {"fatal:SDES": 1}, "nic0": {"RxErr": 2}})
    root = f.evidence["devices"]["0000:02:01.1"]
    assert root == {"role": "bridge above 0000:05:00.0", "rootport": {"cor": 2, "nonfatal": 0, "fatal": 1}}


def test_fail_mentions_warnings_too(tmp_path):
    f = aer(tmp_path, aer={"gpu0": {"fatal:SDES": 1}, "gpu1": {"UnsupReq": 1}})
    assert f.status == Status.FAIL and "also 1 warning(s)" in f.title


def test_no_aer_files_is_a_skip(tmp_path):
    f = aer(tmp_path, aer_sysfs=False)
    assert f.status == Status.SKIP and "aer_dev_*" in f.title and len(f.evidence["without_aer"]) == 12


def test_no_gpu_and_no_nic_is_no_finding(tmp_path):
    root = write_tree(tmp_path / "host", HostSpec(gpus=0, rocm=None))
    # nothing to judge: listed as not run, with why, rather than left out of the report
    (found,) = run_checks(collect(str(root)), Context(), only={"pcie.aer"})
    assert found.status.value == "skip" and found.evidence["not_run"] and "no AMD GPU" in found.title, found


def test_malformed_or_older_files(tmp_path):
    d = tmp_path / "dev"
    d.mkdir()
    # an older kernel (4.19) names fewer bits; its TOTAL line still counts
    (d / "aer_dev_nonfatal").write_text("Undefined 0\nDLP 0\nSDES 0\nTLP 0\nFCP 0\nCmpltTO 1\nTOTAL_ERR_NONFATAL 1\n")
    (d / "aer_dev_fatal").write_text("garbage\n")
    (d / "aer_rootport_total_err_cor").write_text("x\n")
    a = read_aer(Reader(str(tmp_path), live=False), "dev")
    assert a.counts == {"nonfatal": {"Undefined": 0, "DLP": 0, "SDES": 0, "TLP": 0, "FCP": 0, "CmpltTO": 1}}
    assert a.total("nonfatal") == 1 and a.total("correctable") == 0
    assert a.errors == ["aer_dev_fatal", "aer_rootport_total_err_cor"]
    assert read_aer(Reader(str(tmp_path), live=False), "nothing") is None


def test_unreadable_file_warns(tmp_path):
    root = write_tree(tmp_path / "host", HostSpec(gpus=1))
    (root / "sys/devices/pci0000:02/0000:02:01.1/0000:03:00.0/0000:04:00.0/0000:05:00.0/aer_dev_fatal").write_text("?")
    f = run_checks(collect(str(root)), Context(), only={"pcie.aer"})[0]
    assert f.status == Status.WARN and f.evidence["unreadable"] == ["0000:05:00.0 (aer_dev_fatal)"]


def test_generated_files_are_the_kernels_format():
    files = aer_files({"RxErr": 2, "CmpltTO": 1, "fatal:SDES": 1})
    assert files["correctable"].splitlines()[0] == "RxErr 2" and files["correctable"].endswith("TOTAL_ERR_COR 2\n")
    assert "CmpltTO 1\n" in files["nonfatal"] and files["fatal"].endswith("TOTAL_ERR_FATAL 1\n")


def test_capture_and_root_reproduce_it(tmp_path):
    root = write_tree(tmp_path / "host", HostSpec(gpus=2, rdma_nics=2, aer={"nic1": {"CmpltTO": 1}}))
    facts = collect(str(root))
    out = capture(facts, str(tmp_path / "cap"))
    first = run_checks(facts, Context(), only={"pcie.aer"})
    again = run_checks(collect(str(out)), Context(), only={"pcie.aer"})
    assert [(f.status, f.title, f.evidence) for f in again] == [(f.status, f.title, f.evidence) for f in first]
    assert first[0].status == Status.FAIL and (out / "proc/uptime").is_file()


def test_cli_json(tmp_path):
    root = write_tree(tmp_path / "host", HostSpec(gpus=1, aer={"gpu0": {"fatal:SDES": 1}}))
    result = CliRunner().invoke(cli, ["doctor", "--json", "--root", str(root), "--only", "pcie.aer"])
    doc = json.loads(result.output)
    assert [(f["id"], f["status"]) for f in doc["findings"]] == [("pcie.aer", "fail")] and result.exit_code != 0
