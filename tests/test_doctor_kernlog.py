"""The kernel-log scan (kernel.log.*) on generated trees, a capture of this machine's /dev/kmsg, and the log
read by a user who may not read it.

No captured AMD kernel log exists here: the fault lines below are written in the formats the kernel prints
(drivers/gpu/drm/amd/amdgpu, drivers/pci/pcie/aer.c) and the records in /dev/kmsg's documented format
(Documentation/ABI/testing/dev-kmsg). The real lines quoted from public reports, for every pattern, are in
tests/data/kernlog/ (tests/test_kernlog_corpus.py)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from rocmkit.cli import cli
from rocmkit.host.capture import capture
from rocmkit.host.checks import Context, run_checks
from rocmkit.host.facts import collect, kernlog
from rocmkit.host.facts.kernlog import KMSG_FILE
from rocmkit.host.model import Status
from nobody import as_nobody
from treegen import HEALTHY_KMSG, HostSpec, format_records, write_tree


def scan_tree(tmp_path: Path, **spec) -> dict:
    root = write_tree(tmp_path / "host", HostSpec(**spec))
    return {f.id: f for f in run_checks(collect(str(root)), Context(), only={"kernel.log"})}


def with_faults(*lines) -> str:
    healthy = [(r.level, r.message) for r in kernlog.parse(HEALTHY_KMSG)]
    return format_records([*healthy, *lines])


def test_healthy_log_passes(tmp_path):
    found = scan_tree(tmp_path)
    assert list(found) == ["kernel.log"]
    f = found["kernel.log"]
    assert f.status == Status.PASS and f.evidence["records"] == len(list(kernlog.parse(HEALTHY_KMSG)))
    assert f.evidence["source"] == KMSG_FILE and "caveats" not in f.evidence


FAULTS = [
    ("[drm:amdgpu_device_ip_init [amdgpu]] *ERROR* hw_init of IP block <psp> failed -22", "gpu_init", Status.FAIL),
    ("amdgpu 0000:05:00.0: amdgpu: Fatal error during GPU init", "gpu_init", Status.FAIL),
    ("amdgpu 0000:05:00.0: amdgpu: GPU reset(2) failed", "gpu_reset_failed", Status.FAIL),
    ("amdgpu 0000:05:00.0: amdgpu: 1 uncorrectable hardware errors detected in umc block", "ras_uncorrectable",
     Status.FAIL),
    ("pcieport 0000:00:01.1: PCIe Bus Error: severity=Uncorrected (Non-Fatal), type=Transaction Layer, "
     "(Requester ID)", "aer_uncorrected", Status.FAIL),
    ("pcieport 0000:00:01.1: AER: Uncorrectable (Fatal) error message received from 0000:05:00.0",
     "aer_uncorrected", Status.FAIL),
    ("amdgpu 0000:05:00.0: amdgpu: GPU reset begin!", "gpu_reset", Status.WARN),
    ("[drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring gfx_0.0.0 timeout, signaled seq=516877, emitted seq=516879",
     "ring_timeout", Status.WARN),
    ("amdgpu 0000:05:00.0: amdgpu: [gfxhub] page fault (src_id:0 ring:24 vmid:8 pasid:32769)", "page_fault",
     Status.WARN),
    ("amdgpu 0000:05:00.0: amdgpu:   VM_L2_PROTECTION_FAULT_STATUS:0x00800932", "page_fault", Status.WARN),
    ("amdgpu 0000:05:00.0: amdgpu: XGMI: Set topology failure on device 3, hive 0x4f2a, ret -22", "xgmi",
     Status.WARN),
    ("amdgpu 0000:05:00.0: Direct firmware load for amdgpu/psp_13_0_6_sos.bin failed with error -2", "firmware",
     Status.WARN),
    ("amdgpu: Failed to evict process queues", "kfd", Status.WARN),
    ("pcieport 0000:00:01.1: AER: Corrected error message received from 0000:05:00.0", "aer_corrected", Status.WARN),
    ("pcieport 0000:00:01.1: PCIe Bus Error: severity=Corrected, type=Physical Layer, (Receiver ID)",
     "aer_corrected", Status.WARN),
]


@pytest.mark.parametrize("line,name,status", FAULTS, ids=[f"{n}-{i}" for i, (_, n, _) in enumerate(FAULTS)])
def test_each_fault_is_its_own_finding(tmp_path, line, name, status):
    found = scan_tree(tmp_path, kmsg=with_faults(line))
    assert set(found) == {f"kernel.log.{name}"}  # one pattern, and no pass beside it
    f = found[f"kernel.log.{name}"]
    assert f.status == status and f.fix and f.evidence["count"] == 1
    assert f.evidence["first"].endswith(line) and f.evidence["first"] == f.evidence["last"]
    assert f.evidence["first"].startswith("[")  # "[    1.123456] message", as dmesg shows it


def test_count_first_and_last(tmp_path):
    reset = "amdgpu 0000:{}:00.0: amdgpu: GPU reset begin!"
    found = scan_tree(tmp_path, kmsg=with_faults(reset.format("05"), "ordinary line", reset.format("15"),
                                                  reset.format("25")))
    ev = found["kernel.log.gpu_reset"].evidence
    assert ev["count"] == 3 and "0000:05:00.0" in ev["first"] and "0000:25:00.0" in ev["last"]


def test_unreadable_log_is_a_skip_that_says_why(tmp_path):
    why = "operation not permitted: reading /dev/kmsg needs root or CAP_SYSLOG while kernel.dmesg_restrict=1"
    found = scan_tree(tmp_path, kmsg_error=why)
    f = found["kernel.log"]
    assert f.status == Status.SKIP and why in f.title and "CAP_SYSLOG" in f.fix


@pytest.mark.parametrize("kmsg,words", [(None, "not in the captured tree"), ("", "holds no records"),
                                        ("garbage\n\x00\x01", "holds no records")])
def test_missing_or_empty_log_is_a_skip(tmp_path, kmsg, words):
    f = scan_tree(tmp_path, kmsg=kmsg)["kernel.log"]
    assert f.status == Status.SKIP and words in f.title


def test_wrapped_ring_still_passes_but_says_so(tmp_path):
    text = "".join(f"6,{1000 + i},{5_000_000 + i},-;line {i}\n" for i in range(5))
    f = scan_tree(tmp_path, kmsg=text)["kernel.log"]
    assert f.status == Status.PASS and "wrapped" in f.title and f.evidence["first_seq"] == 1000


def test_records_with_dictionaries_and_extra_prefix_fields():
    text = ("6,1,100,-,caller=T1;amdgpu 0000:05:00.0: amdgpu: GPU reset begin!\n SUBSYSTEM=pci\n DEVICE=+pci:0000:05:00.0\n"
            "4,2,200,c;second\n")
    recs = list(kernlog.parse(text))
    assert [(r.level, r.seq, r.usec, r.message) for r in recs] == [
        (6, 1, 100, "amdgpu 0000:05:00.0: amdgpu: GPU reset begin!"), (4, 2, 200, "second")]


def test_scan_stays_fast_on_a_full_ring():
    import time

    from rocmkit.host.checks.kernel_log import scan

    text = format_records([f"amdgpu 0000:05:00.0: amdgpu: an ordinary line {i} of a busy boot log" for i in range(12000)]
                          + ["amdgpu 0000:05:00.0: amdgpu: GPU reset begin!"])
    t = time.perf_counter()
    hits = scan(list(kernlog.parse(text)))
    assert set(hits) == {"kernel.log.gpu_reset"}
    assert time.perf_counter() - t < 1.0  # ~0.05 s here; the bound leaves room for a loaded machine


def test_live_log_on_this_machine_is_never_a_false_pass():
    log = kernlog.read_live()
    facts = collect("/", process=False)
    f = [x for x in run_checks(facts, Context(), only={"kernel.log"})]
    if log.text is None:
        assert [x.status for x in f] == [Status.SKIP] and log.error in f[0].title
    else:
        assert f and all(x.status != Status.SKIP or "no records" in x.title for x in f)
        assert f[0].evidence["source"] == "/dev/kmsg"


needs_restricted_root = pytest.mark.skipif(
    os.geteuid() != 0 or Path("/proc/sys/kernel/dmesg_restrict").read_text().strip() != "1",
    reason="needs root (to drop to an unprivileged user) and kernel.dmesg_restrict=1")


@needs_restricted_root
def test_unprivileged_reader_of_this_machine_gets_a_skip_not_a_pass(tmp_path):
    def run():
        facts = collect("/", process=False)
        return [(f.status.value, f.title) for f in run_checks(facts, Context(), only={"kernel.log"})]

    result = as_nobody(run)
    assert [s for s, _ in result] == ["skip"]
    assert "operation not permitted" in result[0][1] and "CAP_SYSLOG" in result[0][1]


@needs_restricted_root
def test_capture_keeps_the_reason_the_log_was_unreadable():
    import shutil
    import tempfile

    out = Path(tempfile.mkdtemp(prefix="rocmkit-kmsg-"))  # pytest's tmp_path is not reachable by nobody
    try:
        out.chmod(0o777)
        assert as_nobody(lambda: bool(capture(collect("/", process=False), str(out / "cap"))))
        errors = json.loads((out / "cap/rocmkit-read-errors.json").read_text())
        assert "CAP_SYSLOG" in errors[KMSG_FILE]
        found = {x.id: x for x in run_checks(collect(str(out / "cap")), Context(), only={"kernel.log"})}
        f = found["kernel.log"]
        assert f.status == Status.SKIP and "not readable where it was captured" in f.title and "CAP_SYSLOG" in f.title
    finally:
        shutil.rmtree(out, ignore_errors=True)


def test_capture_of_this_machine_reproduces_the_result(tmp_path):
    cap = tmp_path / "cap"
    live = CliRunner().invoke(cli, ["doctor", "--json", "--only", "kernel.log", "--capture", str(cap)])
    assert live.exit_code in (0, 1), live.output
    replay = CliRunner().invoke(cli, ["doctor", "--json", "--only", "kernel.log", "--root", str(cap)])
    a = [(f["id"], f["status"]) for f in json.loads(live.stdout)["findings"]]
    b = [(f["id"], f["status"]) for f in json.loads(replay.stdout)["findings"]]
    assert a == b
    text = (cap / KMSG_FILE).read_text() if (cap / KMSG_FILE).is_file() else ""
    if text:
        assert text.startswith(kernlog.HEADER + " records=")
