"""Where CI's time went, run beside run: the tables `.ci/run` keeps in $ROCMKIT_CI_WORK/times.txt, one column per
run, as a markdown table, with issue 73's marks (docs/development.md, "A run from nothing"): the whole run at most
30 minutes, pytest at most 15, and a run repeated within 10 % of the first.

    python benchmarks/ci_time.py FIRST/.ci-work/times.txt [SECOND/.ci-work/times.txt ...]
    python benchmarks/ci_time.py --tests FIRST/.ci-work/durations.json [SECOND/.ci-work/durations.json ...]

--tests: the tests, test by test, from the records `.ci/run` keeps in $ROCMKIT_CI_WORK/durations.json (every
test's seconds and xdist group, tests/xdistgroups.py): each group's minutes, then the SLOWEST (25) tests by their
largest time in any run, so a test that got slower or faster between two runs shows beside its other figure.

A part run beside another (20-docker.sh beside 50-cpu-stacks.sh, the resolve gate beside the image gate) counts its
own seconds, so the parts add up to more than the whole. On a shared machine, compare runs made side by side in
time, or their ratios.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

WHOLE = "whole .ci/run"
MARKS = {WHOLE: 30 * 60, "pytest": 15 * 60}  # issue 73: from nothing on an idle 2-core machine
REPEAT = 0.10  # the same run twice in a row within 10 % of each other


def read(path: Path) -> dict[str, int]:
    """A times.txt: part -> seconds (the name is the first 34 columns, as .ci/run's table writes it)."""
    parts = {}
    for line in path.read_text().splitlines():
        if line.strip():
            parts[line[:34].strip()] = int(line[34:].split()[0])
    return parts


def table(runs: list[dict[str, int]]) -> str:
    names = list(dict.fromkeys(name for run in runs for name in run))
    head = "| part | " + " | ".join(f"run {i + 1}" for i in range(len(runs))) + " |"
    rows = [head, "|---|" + "---:|" * len(runs)]
    for name in names:
        cells = [f"{run[name] / 60:.1f} min" if name in run else "" for run in runs]
        rows.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def verdicts(runs: list[dict[str, int]]) -> list[str]:
    said = []
    for name, mark in MARKS.items():
        for i, run in enumerate(runs):
            if name in run:
                ok = "within" if run[name] <= mark else "OVER"
                said.append(f"run {i + 1}: {name} {run[name] / 60:.1f} min, {ok} {mark // 60} min")
    wholes = [run[WHOLE] for run in runs if WHOLE in run]
    if len(wholes) > 1:
        spread = (max(wholes) - min(wholes)) / max(min(wholes), 1)
        said.append(f"whole runs {spread:.0%} apart: {'within' if spread <= REPEAT else 'OVER'} {REPEAT:.0%}")
    return said


SLOWEST = 25


def read_tests(path: Path) -> dict[str, dict]:
    """A durations.json: node id -> {"s": seconds, "group": group}."""
    return json.loads(path.read_text())["tests"]


def tests_table(runs: list[dict[str, dict]], slowest: int = SLOWEST) -> str:
    cols = " | ".join(f"run {i + 1}" for i in range(len(runs)))
    groups = sorted({t["group"] for run in runs for t in run.values()})
    rows = [f"| group | {cols} |", "|---|" + "---:|" * len(runs)]
    for g in groups:
        cells = [f"{sum(t['s'] for t in run.values() if t['group'] == g) / 60:.1f} min" for run in runs]
        rows.append(f"| {g} | " + " | ".join(cells) + " |")
    ids = sorted({i for run in runs for i in run}, key=lambda i: -max(run.get(i, {"s": 0})["s"] for run in runs))
    rows += ["", f"| test (the {slowest} slowest in any run) | group | {cols} |", "|---|---|" + "---:|" * len(runs)]
    for i in ids[:slowest]:
        group = next(run[i]["group"] for run in runs if i in run)
        rows.append(f"| `{i}` | {group} | " + " | ".join(f"{run[i]['s']:.0f} s" if i in run else "" for run in runs)
                    + " |")
    return "\n".join(rows)


def main(argv: list[str]) -> int:
    if not argv or argv == ["--tests"]:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    if argv[0] == "--tests":
        print(tests_table([read_tests(Path(p)) for p in argv[1:]]))
        return 0
    runs = [read(Path(p)) for p in argv]
    print(table(runs))
    print()
    print("\n".join(verdicts(runs)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
