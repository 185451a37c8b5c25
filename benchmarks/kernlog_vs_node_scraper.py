"""rocmkit's `kernel.log` check against AMD's node-scraper (its Dmesg plugin's analyzer) on the same corpus of
real kernel log lines (tests/data/kernlog/corpus.json, and the held-out corpus_heldout.json and corpus_unseen.json):
recall on the fault
items and false positives on the benign ones, for node-scraper with its named patterns only and with its
catch-all (any err/crit/alert/emerg kernel line is an "Unknown dmesg error" warning).

    python3 -m venv /tmp/ns && /tmp/ns/bin/pip install amd-node-scraper==1.2.0
    PYTHONPATH=. python benchmarks/kernlog_vs_node_scraper.py --node-scraper /tmp/ns/bin/python [-v] [--before REV]

(or NODE_SCRAPER_PYTHON=/tmp/ns/bin/python). `--before REV` adds the kernel.log check of an earlier revision
(default: the merge base of HEAD and main; "" for none). node-scraper reads `dmesg --time-format iso -x` text, so
each item is rendered that way, with the syslog level the corpus gives each line; each item is analysed on its own.

A fault item counts as found when the tool flags anything in it; "right severity" when its worst flag agrees with
the item's worst expected status (FAIL for ERROR/CRITICAL, WARN for WARNING); "right ids" (rocmkit) when it gives
exactly the expected findings with their statuses (corpus_unseen.json names no findings: it was frozen before its
patterns existed, so its items give a worst status only). A benign item flagged at all is a false positive."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))
sys.path.insert(0, str(REPO))

from kernlog_corpus import CORPUS, HELDOUT, UNSEEN, dmesg_iso, got, kmsg, load  # noqa: E402
from kernlog_speed import before  # noqa: E402

NS_VERSION = "1.2.0"
INSTALL = f"python3 -m venv /tmp/ns && /tmp/ns/bin/pip install amd-node-scraper=={NS_VERSION}"
NS_SCRIPT = r"""
import json, logging, sys
from importlib.metadata import version
logging.disable(logging.CRITICAL)
from nodescraper.models import SystemInfo
from nodescraper.plugins.inband.dmesg.analyzer_args import DmesgAnalyzerArgs
from nodescraper.plugins.inband.dmesg.dmesg_analyzer import DmesgAnalyzer
from nodescraper.plugins.inband.dmesg.dmesgdata import DmesgData
rows = []
for text in json.load(sys.stdin):
    row = {}
    for mode, unknown in (("named", False), ("catchall", True)):
        result = DmesgAnalyzer(system_info=SystemInfo(name="corpus")).analyze_data(
            DmesgData(dmesg_content=text), DmesgAnalyzerArgs(check_unknown_dmesg_errors=unknown))
        row[mode] = [[e.description, e.priority.name] for e in result.events]
    rows.append(row)
print(json.dumps({"version": version("amd-node-scraper"), "rows": rows}))
"""
SEVERITY = {"ERROR": "fail", "CRITICAL": "fail", "WARNING": "warn"}


def node_scraper(python: str, items: list[dict]) -> tuple[str, list[dict]]:
    done = subprocess.run([python, "-c", NS_SCRIPT], input=json.dumps([dmesg_iso(i) for i in items]),
                          capture_output=True, text=True, check=False)
    if done.returncode:
        sys.exit(f"node-scraper failed ({python}):\n{done.stderr[-2000:]}\ninstall it with: {INSTALL}")
    out = json.loads(done.stdout)
    return out["version"], out["rows"]


def worst(statuses) -> str | None:
    statuses = set(statuses)
    return "fail" if "fail" in statuses else "warn" if "warn" in statuses else None


def old_check(module, item: dict) -> list[str]:
    """The statuses an earlier revision's kernel.log check gives an item."""
    from types import SimpleNamespace

    from rocmkit.host.checks import Context
    from rocmkit.host.facts.kernlog import KernelLog

    facts = SimpleNamespace(kernel_log=KernelLog("corpus", kmsg(item)))
    return [f.status.value for f in module.check_kernel_log(facts, Context()) if f.id != "kernel.log"]


def evaluate(items: list[dict], rows: list[dict], verbose: bool, old=None) -> dict[str, dict]:
    tools = ("rocmkit kernel.log", "node-scraper (named patterns)", "node-scraper (+ catch-all)")
    if old is not None:
        tools += (f"rocmkit kernel.log at {old.__rev__}",)
    score = {t: dict(found=0, exact=0, severity=0, fp=0) for t in tools}
    for item, row in zip(items, rows):
        expect = item["expect"]
        want = expect if isinstance(expect, str) else worst(expect.values())  # unseen: a worst status only
        mine = got(item)
        flags = {tools[0]: [s for s in mine.values()],
                 tools[1]: [SEVERITY.get(p, "warn") for _, p in row["named"]],
                 tools[2]: [SEVERITY.get(p, "warn") for _, p in row["catchall"]]}
        if old is not None:
            flags[tools[3]] = old_check(old, item)
        for tool, statuses in flags.items():
            s = score[tool]
            if expect == "benign":
                s["fp"] += bool(statuses)
                continue
            s["found"] += bool(statuses)
            s["severity"] += worst(statuses) == want
            if tool == tools[0] and isinstance(expect, dict):
                s["exact"] += mine == expect
        if verbose:
            miss = [t for t, st in list(flags.items())[:3] if bool(st) != (expect != "benign")]
            wrong = isinstance(expect, dict) and mine != expect
            if miss or wrong:
                print(f"  {item['name']}: expect {expect}; rocmkit {mine or '-'}; "
                      f"node-scraper {[d for d, _ in row['catchall']] or '-'}")
    return score


def report(title: str, items: list[dict], score: dict[str, dict]) -> None:
    faults = sum(1 for i in items if i["expect"] != "benign")
    benign = len(items) - faults
    print(f"\n{title}: {faults} fault items, {benign} benign items")
    print(f"{'tool':<40} {'recall':>14} {'right severity':>15} {'right ids':>10} {'false positives':>16}")
    named = sum(1 for i in items if isinstance(i["expect"], dict))
    for tool, s in score.items():
        exact = f"{s['exact']}/{named}" if tool == "rocmkit kernel.log" and named else "-"
        print(f"{tool:<40} {s['found']:>4}/{faults} {100 * s['found'] / faults:4.0f}% "
              f"{s['severity']:>9}/{faults} {exact:>10} {s['fp']:>9}/{benign} ({100 * s['fp'] / benign:.0f}%)")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--node-scraper", default=os.environ.get("NODE_SCRAPER_PYTHON"),
                    help="the python of a venv with amd-node-scraper installed (or NODE_SCRAPER_PYTHON)")
    ap.add_argument("-v", "--verbose", action="store_true", help="list the items a tool got wrong")
    ap.add_argument("--before", default=None, help="also score kernel.log at this git revision")
    args = ap.parse_args()
    if args.before is None:
        base = subprocess.run(["git", "-C", str(REPO), "merge-base", "HEAD", "main"], capture_output=True, text=True)
        args.before = base.stdout.strip()[:12]
    old = before(args.before) if args.before else None
    if old is not None:
        old.__rev__ = args.before
    if not args.node_scraper or not Path(args.node_scraper).exists():
        sys.exit(f"no node-scraper python given (--node-scraper or NODE_SCRAPER_PYTHON); install it with:\n"
                 f"  {INSTALL}\nand pass --node-scraper /tmp/ns/bin/python")
    dev, held, unseen = load(CORPUS), load(HELDOUT), load(UNSEEN)
    version, rows = node_scraper(args.node_scraper, dev + held + unseen)
    print(f"amd-node-scraper {version} (DmesgAnalyzer, default arguments) against rocmkit's kernel.log")
    a, b = len(dev), len(dev) + len(held)
    parts = {"corpus.json": (dev, rows[:a]), "corpus_heldout.json (held out)": (held, rows[a:b]),
             "corpus_unseen.json (held out for issue 37)": (unseen, rows[b:]),
             "whole corpus": (dev + held + unseen, rows)}
    for title, (items, part) in parts.items():
        if args.verbose and title != "whole corpus":
            print(f"\n{title}: items a tool got wrong")
        report(title, items, evaluate(items, part, args.verbose and title != "whole corpus", old))


if __name__ == "__main__":
    main()
