"""rocmkit/resources/numerics_bands.toml made from the kept runs, so every band is what runs measured and says
where (`python benchmarks/numerics_bands.py > rocmkit/resources/numerics_bands.toml`; tests/test_numerics.py keeps
the file equal to what this writes). Inputs: the certificates under tests/data/numerics/ (a name with "healthy" is a healthy run, any
other one broke its weight sync on purpose, ROCMKIT_TEST_SYNC_FAULT) and the healthy runs kept as logs beside
their certificates (LOGS).

What each run gives (certify/numerics.py, FIGURES): a healthy run its largest figure over its steps (band "all")
and its first step's (band "first"); a broken run, where its first broken sync (the witness's) came after the
first step, its smallest figure from the step that sync fed on (band "all") and its first step as a healthy one
(both sides still held the same weights); where the first sync itself was broken, its first step's figure
(band "first")."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

from rocmkit.certify import metrics, numerics

ROOT = Path(__file__).resolve().parents[1]
KEPT = "tests/data/numerics"
# healthy runs kept as a log and its certificate (from before the certificate had a numerics section)
LOGS = ("tests/data/certify/verl-sglang-h200x2-tp2",)
HEADER = """\
# How far a rollout's log-probs may be from the trainer's on the same tokens, per engine, rollout and device, read by
# `rocmkit certify` (rocmkit/certify/numerics.py). Written by `python benchmarks/numerics_bands.py` from the kept runs
# (its docstring says how each run counts); do not edit by hand. A band's limit is the geometric mean
# of its healthy runs' largest figure and its broken runs' smallest, as far from each as the measurements allow; a
# band without a broken run is reported, not judged. `steps = "first"`: the first step alone, where both sides hold
# the same weights.
"""


def _read(path: Path) -> dict:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as f:
        return json.load(f)


def _key(cert: dict) -> tuple[str, str, str]:
    s = cert["settings"]
    rollout = s.get("rollout") or ("vllm" if s.get("vllm_mode") else None)
    return cert["engine"], rollout, "cpu" if cert.get("device") == "cpu" else "gpu"


def _series(steps: dict[int, dict[str, float]]) -> tuple[str, list[tuple[int, float]]] | None:
    figure, series = numerics.judged_series(numerics.per_step(steps))
    return (figure, series) if series else None


def runs(root: Path = ROOT) -> list[dict]:
    """Each kept run: {key, figure, healthy, first_broken (sync), series, source}."""
    out = []
    for path in sorted((root / KEPT).glob("*.json.gz")):
        cert = _read(path)
        steps = numerics.steps_of(cert["numerics"]["per_step"])
        problems = (cert["numerics"].get("sync") or {}).get("problems") or []
        out.append({"key": _key(cert), "healthy": "healthy" in path.name, "series": _series(steps),
                    "first_broken": min((p["sync"] for p in problems), default=None),
                    "source": f"{KEPT}/{path.name}"})
    for base in LOGS:
        cert = _read(root / f"{base}.json")
        steps = metrics.read_console(gzip.open(root / f"{base}.log.gz", "rt", errors="replace").read())
        out.append({"key": _key(cert), "healthy": True, "series": _series(steps), "first_broken": None,
                    "source": f"{base}.log.gz"})
    return [r for r in out if r["series"]]


def measured(root: Path = ROOT) -> dict[tuple, dict[str, list]]:
    """{(engine, rollout, device, figure, steps): {"healthy": [(value, source)], "faults": [...]}}."""
    bands: dict[tuple, dict[str, list]] = {}

    def add(r: dict, steps: str, kind: str, value: float, note: str = "") -> None:
        figure = r["series"][0]
        entry = bands.setdefault((*r["key"], figure, steps), {"healthy": [], "faults": []})
        entry[kind].append((value, r["source"] + note))

    for r in runs(root):
        series = r["series"][1]
        first = next((v for n, v in series if n == 1), None)
        if r["healthy"]:
            add(r, "all", "healthy", max(v for _, v in series))
            if first is not None:
                add(r, "first", "healthy", first)
        elif r["first_broken"] == 1:
            if first is not None:
                add(r, "first", "faults", first, " (broken from the first sync)")
        elif r["first_broken"]:
            fed = [v for n, v in series if n >= r["first_broken"]]  # sync N feeds step N
            if fed:
                add(r, "all", "faults", min(fed), f" (broken from sync {r['first_broken']})")
            if first is not None:
                add(r, "first", "healthy", first, " (step 1, before its broken sync)")
    return bands


def toml(root: Path = ROOT) -> str:
    out = [HEADER]
    for (engine, rollout, device, figure, steps), entry in sorted(measured(root).items()):
        out += ["[[band]]", f'engine = "{engine}"', f'rollout = "{rollout}"', f'device = "{device}"',
                f'figure = "{figure}"', f'steps = "{steps}"']
        for kind in ("healthy", "faults"):
            if entry[kind]:
                out.append(f"{kind} = [")
                out += [f'  {{ value = {float(f"{v:.6g}")!r}, source = "{s}" }},' for v, s in entry[kind]]
                out.append("]")
        out.append("")
    return "\n".join(out)


if __name__ == "__main__":
    sys.stdout.write(toml())
