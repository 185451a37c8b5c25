"""The `kernel.log` check on the corpus of real kernel log lines (tests/data/kernlog/corpus.json): every fault
item gives exactly its findings with their status, every benign item gives none, and a multi-line incident (an
ACA or MCE dump, an oops or hung task with its call trace, an OOM report) is one incident of one finding.

The held-out file (corpus_heldout.json) is not tested here: benchmarks/kernlog_vs_node_scraper.py evaluates it,
so that its figure says how the patterns do on lines they were not written against."""

from __future__ import annotations

import pytest
from kernlog_corpus import CORPUS, HELDOUT, UNSEEN, findings, got, kmsg, load, split_level

from rocmkit.host.checks.kernel_log import PATTERNS
from rocmkit.host.checks.kernel_net import ALLOWED, NET
from rocmkit.host.model import Status

ITEMS = load(CORPUS)
FAULTS = [i for i in ITEMS if i["expect"] != "benign"]
BENIGN = [i for i in ITEMS if i["expect"] == "benign"]
BOOT = ["<6>Linux version 6.8.0-60-generic (buildd@lcy02-amd64-054) #63-Ubuntu SMP PREEMPT_DYNAMIC",
        "<6>pci 0000:00:01.1: PCI bridge to [bus 01]", "<6>systemd[1]: Detected architecture x86-64."]


def test_corpus_is_well_formed():
    names = {p.name for p in PATTERNS} | {NET.name}
    for path in (CORPUS, HELDOUT):
        items = load(path)
        assert len({i["name"] for i in items}) == len(items)
        for i in items:
            assert i["source"] and i["lines"], i["name"]
            if i["expect"] != "benign":
                assert set(i["expect"]) <= names and set(i["expect"].values()) <= {"fail", "warn"}, i["name"]
                assert set(i.get("count", {})) <= set(i["expect"]), i["name"]
    assert all(k == k.lower() and k for p in PATTERNS for k in p.keys)  # the prefilter searches lower-cased text
    covered = {n for i in FAULTS for n in i["expect"]}
    assert covered == names, f"patterns without a corpus item: {names - covered}"
    assert len(BENIGN) >= 15
    unseen = load(UNSEEN)  # frozen before its patterns: a worst status per item, no finding names
    assert len({i["name"] for i in unseen}) == len(unseen)
    assert all(i["source"] and i["lines"] and i["expect"] in ("fail", "warn", "benign") for i in unseen)
    assert all(rx and "/" in why and "#" in why for rx, why in ALLOWED)  # each entry names its kernel file and report



def test_every_line_a_pattern_matches_holds_one_of_its_keys():
    # the scan tries a pattern's regex only on lines holding one of its keys (kernel_log.scan), so keys made
    # rarer or shared to save passes over the log must still cover every line the regex takes
    lines = [split_level(x)[1] for path in (CORPUS, HELDOUT, UNSEEN) for i in load(path) for x in i["lines"]]
    for p in PATTERNS:
        for line in lines:
            if p.regex.search(line):
                assert any(k in line.lower() for k in p.keys), (p.name, line)

@pytest.mark.parametrize("item", FAULTS, ids=[i["name"] for i in FAULTS])
def test_fault_item_gives_its_findings(item):
    assert got(item) == item["expect"]
    found = findings(kmsg(item, before=BOOT, after=BOOT))  # ordinary lines around it change nothing
    assert {k: f.status.value for k, f in found.items()} == item["expect"]
    for name, count in item.get("count", {}).items():
        assert found[name].evidence["count"] == count, name


@pytest.mark.parametrize("item", BENIGN, ids=[i["name"] for i in BENIGN])
def test_benign_item_gives_nothing(item):
    found = findings(kmsg(item))
    assert list(found) == ["kernel.log"] and found["kernel.log"].status == Status.PASS


def _item(name):
    return next(i for i in ITEMS if i["name"] == name)


@pytest.mark.parametrize("name,pattern", [("oom-killer-with-trace", "oom"), ("hung-task-amdgpu-vm-fini", "hung_task"),
                                          ("mce-corrected-decoded", "mce"), ("aca-dump-control-form", "ras_aca"),
                                          ("oops-page-fault-amdgpu", "oops"), ("ghes-recoverable-pcie", "ghes")])
def test_a_multi_line_incident_is_one_finding_with_its_lines(name, pattern):
    item = _item(name)
    f = findings(kmsg(item))[pattern]
    assert f.evidence["count"] == 1
    lines = f.evidence["lines"]
    first = next(n for n, x in enumerate(item["lines"]) if x.split(">", 1)[1] in f.evidence["first"])
    assert len(lines) == len(item["lines"]) - first  # the first line and every line after it
    assert all(a.endswith(b.split(">", 1)[1]) for a, b in zip(lines, item["lines"][first:]))


def test_repeated_incidents_count_apart_and_uncorrected_status_fails():
    two = _item("mi300x-athub-fatal-with-aca-dumps")
    f = findings(kmsg(two))["ras_aca"]
    assert f.evidence["count"] == 2 and f.status == Status.WARN  # STATUS 0x98...: not UC
    assert "0000:42:00.0" in f.evidence["first"] and "0000:55:00.0" in f.evidence["last"]
    assert len(f.evidence["lines"]) == 6  # the first dump only
    assert findings(kmsg(_item("aca-dump-uncorrected-status")))["ras_aca"].status == Status.FAIL


def test_a_dump_stops_at_the_next_fault():
    """An OOM report runs to its Killed line; a fault line inside a trace starts its own finding."""
    item = {"lines": ["<4>python invoked oom-killer: gfp_mask=0x24280ca, order=0, oom_score_adj=0",
                      "<4>Call Trace:", "<4> dump_stack+0x63/0x90",
                      "<3>amdgpu 0000:05:00.0: amdgpu: GPU reset(2) failed",
                      "<3>Out of memory: Killed process 3557 (python) total-vm:1kB, anon-rss:1kB, file-rss:0kB, "
                      "shmem-rss:0kB, UID:0 pgtables:1kB oom_score_adj:0"]}
    found = findings(kmsg(item))
    assert set(found) == {"oom", "gpu_reset_failed"}
    assert found["oom"].evidence["lines"][-1].endswith("dump_stack+0x63/0x90")


def test_scan_of_a_full_ring_costs_about_what_parsing_it_does():
    """A ratio, not a wall-clock bound: on a 1 MiB /dev/kmsg of the corpus's lines the keyword prefilter keeps the
    scan near the cost of parsing the records (~1.5x here; every regex on every line would be ~60x)."""
    import time

    from rocmkit.host.facts import kernlog
    from rocmkit.host.checks.kernel_log import scan
    from treegen import format_records

    benign = [split_level(x) for i in BENIGN for x in i["lines"]]
    lines, n, size = [], 0, 0
    while size < 1 << 20:  # a running size: summing the list on every step made this test quadratic (~10 s)
        block = ([split_level(x) for x in FAULTS[n % len(FAULTS)]["lines"]] if n % 400 == 399
                 else [benign[n % len(benign)]])
        lines.extend(block)
        size += sum(len(m) for _, m in block)
        n += 1
    text = format_records(lines)

    def best(fn):
        times = []
        for _ in range(3):
            t = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t)
        return min(times)

    records = list(kernlog.parse(text))
    parse, scanned = best(lambda: list(kernlog.parse(text))), best(lambda: scan(records))
    assert scanned < 4 * parse, (scanned, parse)
