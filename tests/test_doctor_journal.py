"""The kernel-log scan over the systemd journal: the previous boot's kernel messages (a fault before a reboot
is only there), this boot's when /dev/kmsg is unreadable, each finding naming its boot; a host without a
journal gets a note, never a failure; --capture/--root keep it.

No persistent journal exists on this machine (journald does not run here): the journal lines are written in
the format `journalctl -o json` prints (systemd's Journal JSON Format, https://systemd.io/JOURNAL_EXPORT_FORMATS/),
by treegen.format_journal; the live reader runs the real journalctl of this machine."""

from __future__ import annotations

import json
import time
from pathlib import Path

from click.testing import CliRunner

from rocmkit.cli import cli
from rocmkit.host.capture import capture
from rocmkit.host.checks import Context, run_checks
from rocmkit.host.facts import collect, journal, kernlog
from rocmkit.host.model import Status
from treegen import HEALTHY_KMSG, HostSpec, format_journal, format_records, write_tree

PREV_ID = "0b7e4f2a91c34d5e8f60a1b2c3d4e5f6"
THIS_ID = "8d3c6a1e5b0f4e2a9c7d1b3f5e7a9c0d"
HEALTHY = [(r.level, r.message) for r in kernlog.parse(HEALTHY_KMSG)]
HANG = [(3, "amdgpu 0000:05:00.0: amdgpu: GPU reset(3) failed"),
        (3, "[drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring gfx_0.0.0 timeout, signaled seq=9, emitted seq=11")]


def findings(tmp_path: Path, **spec) -> list:
    root = write_tree(tmp_path / "host", HostSpec(**spec))
    return run_checks(collect(str(root)), Context(), only={"kernel.log"})


def test_a_fault_before_the_reboot_is_found_and_names_its_boot(tmp_path):
    found = findings(tmp_path, journal={-1: format_journal(HEALTHY + HANG, boot_id=PREV_ID)})
    by = {(f.id, f.evidence.get("boot")): f for f in found}
    assert by[("kernel.log", None)].status == Status.PASS  # this boot (/dev/kmsg) is clean
    failed = by[("kernel.log.gpu_reset_failed", "previous boot")]
    assert failed.status == Status.FAIL and failed.evidence["boot_id"] == PREV_ID
    assert failed.title.startswith("previous boot (journal): ") and "GPU reset(3) failed" in failed.evidence["last"]
    assert by[("kernel.log.ring_timeout", "previous boot")].status == Status.WARN
    assert failed.evidence["source"] == journal.file_for(-1)


def test_a_clean_previous_boot_passes_with_its_label(tmp_path):
    found = findings(tmp_path, journal={-1: format_journal(HEALTHY, boot_id=PREV_ID)})
    assert [(f.id, f.status, f.evidence.get("boot")) for f in found] == [
        ("kernel.log", Status.PASS, None), ("kernel.log", Status.PASS, "previous boot")]
    assert found[1].evidence["records"] == len(HEALTHY)


def test_this_boot_comes_from_the_journal_only_when_kmsg_was_unreadable(tmp_path):
    lines = format_journal(HEALTHY + HANG[:1], boot_id=THIS_ID)
    # /dev/kmsg read: the journal's copy of this boot is the same records, never counted twice
    found = findings(tmp_path / "a", kmsg=format_records(HEALTHY + HANG[:1]), journal={0: lines})
    assert [f.evidence.get("boot") for f in found if f.id == "kernel.log.gpu_reset_failed"] == [None]
    # /dev/kmsg unreadable (dmesg_restrict), the journal readable (a user in systemd-journal): no skip
    found = findings(tmp_path / "b", kmsg_error="permission denied: reading /dev/kmsg needs root",
                     journal={0: lines})
    assert [(f.id, f.status, f.evidence.get("boot"), f.evidence.get("boot_id")) for f in found] == [
        ("kernel.log.gpu_reset_failed", Status.FAIL, "this boot", THIS_ID)]
    assert found[0].title.startswith("this boot (journal): ")


def test_no_journal_is_a_note_not_a_failure(tmp_path):
    why = "the journal has no previous boot (journald keeps none across reboots)"
    found = findings(tmp_path, journal_errors={-1: why})
    assert [(f.id, f.status) for f in found] == [("kernel.log", Status.PASS)]
    assert found[0].evidence["previous_boot"] == f"not read: {why}"
    # an older capture, made before the journal was read, says so
    found = findings(tmp_path / "old")
    assert found[0].evidence["previous_boot"].startswith("not read: not in the captured tree")
    # both unreadable: this boot's skip (from /dev/kmsg) still says why, with the journal's note
    found = findings(tmp_path / "none", kmsg_error="permission denied", journal_errors={0: why, -1: why})
    assert [(f.id, f.status) for f in found] == [("kernel.log", Status.SKIP)]


def test_a_capped_journal_boot_says_it_kept_the_last_records(tmp_path):
    root = write_tree(tmp_path / "host", HostSpec(journal={-1: format_journal(HEALTHY, boot_id=PREV_ID)}))
    head = f"{journal.HEADER} boot=-1 records={len(HEALTHY)} capped=1\n"
    (root / journal.file_for(-1)).write_text(head + format_journal(HEALTHY, boot_id=PREV_ID))
    prev = [f for f in run_checks(collect(str(root)), Context(), only={"kernel.log"}) if f.evidence.get("boot")]
    assert prev[0].evidence["caveats"] == [f"only the last {len(HEALTHY)} records of that boot were read"]


def test_journal_json_edge_values():
    lines = format_journal(["amdgpu: plain"], boot_id=PREV_ID).splitlines()
    entry = json.loads(lines[0])
    as_bytes = {**entry, "MESSAGE": list("amdgpu: GPU reset(1) failed \xff".encode("latin-1"))}
    too_big = {**entry, "MESSAGE": None}  # journalctl prints null for a field over its data threshold
    not_kernel = {**entry, "_TRANSPORT": "journal", "MESSAGE": "systemd: GPU reset(1) failed"}
    no_prio = {k: v for k, v in entry.items() if k not in ("PRIORITY", "_SOURCE_MONOTONIC_TIMESTAMP")}
    text = "\n".join([lines[0], json.dumps(as_bytes), json.dumps(too_big), json.dumps(not_kernel), "{not json",
                      "[1, 2]", json.dumps(no_prio), "#rocmkit-journal v1 boot=-1"])
    records = journal.parse(text)
    assert [r.message for r in records] == ["amdgpu: plain", "amdgpu: GPU reset(1) failed \ufffd", "amdgpu: plain"]
    assert [r.seq for r in records] == [0, 1, 2] and records[0].usec == 1_000_000 and records[2].level == 6
    assert journal.BootLog(-1, "x", text).boot_id == PREV_ID


def test_live_read_on_this_machine_answers_within_its_deadline():
    """The real journalctl: whatever this host keeps, the answer is records or a reason, never an exception."""
    started = time.monotonic()
    for boot in (0, -1):
        log = journal.read_live_boot(boot)
        assert (log.text is None) != (log.error is None), log
        if log.text is not None:
            assert log.records() and all(r.message is not None for r in log.records())
    assert time.monotonic() - started < 2 * journal.DEADLINE_S + 2


def test_live_read_of_an_empty_journal_directory_says_so(tmp_path):
    log = journal.read_live_boot(0, extra=("--directory", str(tmp_path)))
    assert log.text is None and "holds nothing of this boot" in log.error
    log = journal.read_live_boot(-1, extra=("--directory", str(tmp_path)))
    assert log.text is None and "no previous boot" in log.error


def test_missing_or_hanging_journalctl(tmp_path, monkeypatch):
    log = journal.read_live_boot(-1, journalctl=str(tmp_path / "journalctl"))  # not there
    assert log.text is None and "cannot start" in log.error
    monkeypatch.setattr("shutil.which", lambda name: None)  # journal.py imports shutil where it looks
    assert "not installed" in journal.read_live_boot(-1).error
    hang = tmp_path / "hang"
    hang.write_text("#!/bin/sh\nexec sleep 30\n")  # stands for a journalctl stuck on a broken journal file
    hang.chmod(0o755)
    monkeypatch.setattr(journal, "DEADLINE_S", 0.5)
    started = time.monotonic()
    log = journal.read_live_boot(-1, journalctl=str(hang))
    assert "did not finish within" in log.error and time.monotonic() - started < 5


def test_capture_and_root_reproduce_the_journal(tmp_path):
    """A captured journal is read back with its boots; the reason a boot was unreadable travels with it."""
    root = write_tree(tmp_path / "host", HostSpec(journal={-1: format_journal(HEALTHY + HANG, boot_id=PREV_ID)}))
    facts = collect(str(root))
    facts.live = True  # write the journal as a live capture does (it is not a file the Reader read)
    facts.journal.boots[0] = journal.BootLog(0, "journalctl -k -b 0", None, "journalctl failed: boom")
    facts.read_errors.append((journal.file_for(0), "journalctl failed: boom"))
    out = capture(facts, str(tmp_path / "cap"))
    head = (out / journal.file_for(-1)).read_text().split("\n", 1)[0]
    assert head == f"{journal.HEADER} boot=-1 records={len(HEALTHY) + 2} capped=0"
    again = collect(str(out))
    assert again.journal.boot(-1).records() == facts.journal.boot(-1).records()
    assert json.loads((out / "rocmkit-read-errors.json").read_text())[journal.file_for(0)] == "journalctl failed: boom"


def test_capture_of_this_machine_keeps_the_previous_boot_or_why_not(tmp_path):
    facts = collect("/")
    out = capture(facts, str(tmp_path / "cap"))
    again = collect(str(out))
    live, back = facts.journal.boot(-1), again.journal.boot(-1)
    assert (live.error, live.records()) == (back.error, back.records())


def test_cli_json_names_the_boot(tmp_path):
    root = write_tree(tmp_path / "host", HostSpec(journal={-1: format_journal(HEALTHY + HANG, boot_id=PREV_ID)}))
    result = CliRunner().invoke(cli, ["doctor", "--json", "--root", str(root), "--only", "kernel.log"])
    doc = json.loads(result.output)
    boots = {(f["id"], f["evidence"].get("boot")) for f in doc["findings"]}
    assert ("kernel.log.gpu_reset_failed", "previous boot") in boots and result.exit_code != 0
