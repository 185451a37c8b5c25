"""Per-step metrics from a run: verl's file logger (JSONL `{"step": N, "data": {...}}`, also what the
TRL engine writes) or its console lines (`step:N - key:value - ...`, possibly prefixed by Ray as
`(TaskRunnerV1 pid=..)`, values printed with pprint so numpy scalars look like `np.float64(1.2)`)."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

_STEP_RE = re.compile(r"(?:^|\s)step:(\d+)(?=\s+-\s|\s*$)")
_PAIR_RE = re.compile(r"(?P<k>[^\s:]+):(?:np\.\w+\()?(?P<v>[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|nan|inf))\)?"
                      r"(?=\s+-\s|\s*$)")


def _number(v) -> float | None:
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, str):
        m = re.fullmatch(r"\s*(?:np\.\w+\()?\s*([-+]?[\d.eE+-]+|nan|inf|-inf)\s*\)?\s*", v)
        if m:
            try:
                return float(m.group(1))
            except ValueError:
                return None
    return None


def read_jsonl(path: Path) -> dict[int, dict[str, float]]:
    """{step: {metric: value}}; malformed lines and non-numeric values are skipped."""
    steps: dict[int, dict[str, float]] = {}
    for line in Path(path).read_text(errors="replace").splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if not isinstance(row, dict) or not isinstance(row.get("step"), int) or not isinstance(row.get("data"), dict):
            continue
        values = {k: n for k, v in row["data"].items() if (n := _number(v)) is not None}
        steps.setdefault(row["step"], {}).update(values)
    return steps


def read_console(text: str) -> dict[int, dict[str, float]]:
    """{step: {metric: value}} from console lines anywhere in a log."""
    steps: dict[int, dict[str, float]] = {}
    for line in text.splitlines():
        m = _STEP_RE.search(line)
        if not m:
            continue
        body = line[m.end():]
        values = {}
        for part in body.split(" - "):
            pm = _PAIR_RE.fullmatch(part.strip())
            if pm:
                values[pm.group("k")] = float(pm.group("v"))
        steps.setdefault(int(m.group(1)), {}).update(values)
    return steps


def series(steps: dict[int, dict[str, float]], *keys: str) -> list[float]:
    """The first of `keys` present, step by step (steps without it are skipped)."""
    for key in keys:
        vals = [steps[s][key] for s in sorted(steps) if key in steps[s]]
        if vals:
            return vals
    return []


def finite(values: list[float]) -> bool:
    return all(math.isfinite(v) for v in values)
