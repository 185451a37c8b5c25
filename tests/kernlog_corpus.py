"""The kernel-log corpus (tests/data/kernlog/corpus*.json) and how the `kernel.log` check reads it: shared by
tests/test_kernlog_corpus.py and benchmarks/kernlog_vs_node_scraper.py.

Each item: `lines` ("<L>message", L the syslog level the kernel prints the line at), `expect` ({name: "fail" |
"warn"} for the findings kernel.log.<name> it must give, or "benign": none), optional `count` ({name: incidents}),
and `source` (a public report's URL, or the kernel source file and format string the lines are written from)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

DATA = Path(__file__).resolve().parent / "data" / "kernlog"
CORPUS = DATA / "corpus.json"
HELDOUT = DATA / "corpus_heldout.json"
UNSEEN = DATA / "corpus_unseen.json"  # held out for issue 37: `expect` is a worst status, not finding names
LEVEL = re.compile(r"^<([0-7])>")
LEVEL_NAMES = ("emerg", "alert", "crit", "err", "warn", "notice", "info", "debug")


def load(path: Path = CORPUS) -> list[dict]:
    return json.loads(Path(path).read_text())["items"]


def split_level(line: str) -> tuple[int, str]:
    m = LEVEL.match(line)
    return (int(m.group(1)), line[m.end():]) if m else (6, line)


def kmsg(item: dict, before: list[str] = (), after: list[str] = ()) -> str:
    """The item's lines as /dev/kmsg records (with ordinary lines around them if asked)."""
    from treegen import format_records

    return format_records([split_level(x) for x in [*before, *item["lines"], *after]])


def findings(text: str) -> dict:
    """kernel.log findings of a /dev/kmsg text: {name: Finding}, the pass/skip under "kernel.log"."""
    from rocmkit.host.checks import Context
    from rocmkit.host.checks.kernel_log import check_kernel_log
    from rocmkit.host.facts.kernlog import KernelLog

    facts = SimpleNamespace(kernel_log=KernelLog("corpus", text))
    return {(f.id.rsplit(".", 1)[1] if f.id != "kernel.log" else f.id): f
            for f in check_kernel_log(facts, Context())}


def got(item: dict) -> dict[str, str]:
    """{name: status} of the faults the check finds in an item (the pass left out)."""
    return {k: f.status.value for k, f in findings(kmsg(item)).items() if k != "kernel.log"}


def dmesg_iso(item: dict) -> str:
    """The item as `dmesg --time-format iso -x` prints it (what node-scraper's Dmesg plugin reads)."""
    out = []
    for n, line in enumerate(item["lines"]):
        level, message = split_level(line)
        out.append(f"kern  :{LEVEL_NAMES[level]:<6}: 2025-01-01T00:{n // 60:02d}:{n % 60:02d},000000+00:00 {message}")
    return "\n".join(out) + "\n"
