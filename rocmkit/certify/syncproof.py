"""Whether every weight sync reached the rollout, from what the two ends recorded (intarget/verl_sync_witness.py):
the tensors the trainer sent, those that reached the rollout's model, and the rollout model's own sum after each
sync. Pure: takes the records, returns the certificate's `numerics.sync` and its check.

A sync is proven when every tensor the trainer sent was loaded by every rollout worker with the same sum, and the
rollout model changed where what was sent changed (after the first sync, which replaces the rollout's start-up
weights). Anything else fails, naming the sync (1 is the one before the first step; N + 1 follows step N) and what
went missing."""

from __future__ import annotations

import json
import math
from pathlib import Path

# Sums agree to float64 rounding when both ends summed the same bytes in the same order; a tensor summed on two
# devices (a GPU sender, a CPU receiver) may add them in another order: far below any real change of a weight.
REL_TOL = 1e-9
SHOWN = 3  # tensor names a finding quotes


def read(folder: Path) -> list[dict]:
    """Every record under `folder` (the syncs, and each watched rollout worker's `installed` line), lines that do
    not parse skipped (a process killed mid-line)."""
    out = []
    for path in sorted(Path(folder).glob("sync-*.jsonl")) if Path(folder).is_dir() else []:
        for line in path.read_text(errors="replace").splitlines():
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if isinstance(doc, dict) and doc.get("side") in ("trainer", "rollout") and (
                    isinstance(doc.get("tensors"), dict) or doc.get("installed") is True):
                out.append(doc)
    return out


def _same(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=REL_TOL, abs_tol=1e-12)


def _names(names) -> str:
    names = sorted(names)
    return ", ".join(names[:SHOWN]) + (f" and {len(names) - SHOWN} more" if len(names) > SHOWN else "")


def judge(records: list[dict]) -> dict:
    """{"observed", "syncs", "problems": [{"sync", "what"}], "summary"} from the witness's records."""
    sent: dict[int, dict[str, float]] = {}
    received: dict[int, list[dict]] = {}
    watched = any(r.get("installed") for r in records)
    for r in records:
        if r.get("installed"):
            continue
        if r["side"] == "trainer":
            sent.setdefault(r["sync"], {}).update(r["tensors"])  # each trainer rank sends the full tensors
        else:
            received.setdefault(r["sync"], []).append(r)
    syncs = sorted(set(sent) | set(received))
    if not syncs:
        if watched:  # the rollout's workers were watched from their start and never received one
            return {"observed": True, "syncs": 0, "problems": [{"sync": 1, "what": "no weight sync reached the "
                                                                                  "rollout"}],
                    "summary": "no weight sync reached the rollout: it generated with its start-up weights"}
        return {"observed": False, "syncs": 0, "problems": [],
                "summary": "no weight sync was observed (the witness covers verl's vLLM rollout)"}
    problems = []
    previous: dict[int, float] = {}  # rollout pid -> its model's sum after the last sync
    for n in syncs:
        out, ins = sent.get(n, {}), received.get(n, [])
        if not ins:
            problems.append({"sync": n, "what": f"the trainer sent {len(out)} tensors and no rollout worker "
                                                 "received the sync"})
            continue
        for r in ins:
            got = r["tensors"]
            who = f"rollout worker {r.get('rank', r['pid'])}" if len(ins) > 1 else "the rollout"
            if out and not got:
                problems.append({"sync": n, "what": f"the trainer sent {len(out)} tensors and {who} loaded none"})
            elif set(out) - set(got):
                missing = set(out) - set(got)
                problems.append({"sync": n, "what": f"{who} did not load {len(missing)} of the {len(out)} tensors "
                                                     f"the trainer sent: {_names(missing)}"})
            changed = [k for k in set(out) & set(got) if not _same(out[k], got[k])]
            if changed:
                problems.append({"sync": n, "what": f"{len(changed)} tensors reached {who} with other values than "
                                                     f"the trainer sent: {_names(changed)}"})
            if not r.get("lora") and r.get("model_sum") is not None:
                before = previous.get(r["pid"])
                if before is not None and got and _same(before, r["model_sum"]) and not _all_same(sent, n):
                    problems.append({"sync": n, "what": f"{who}'s model did not change, though the trainer sent "
                                                         "changed weights"})
                previous[r["pid"]] = r["model_sum"]
    tensors = max((len(v) for v in sent.values()), default=0)
    if problems:
        first = problems[0]
        summary = f"weight sync {first['sync']}{_when(first['sync'])}: {first['what']}"
    else:
        summary = (f"{len(syncs)} weight syncs, each of {tensors} tensors loaded by the rollout as the trainer sent "
                   "them" + ("; the rollout's model changed with each" if len(syncs) > 1 else ""))
    return {"observed": True, "syncs": len(syncs), "tensors": tensors, "problems": problems, "summary": summary}


def _all_same(sent: dict[int, dict[str, float]], n: int) -> bool:
    """Whether sync n sent exactly what sync n - 1 did (a step that changed no weight leaves the model as it was)."""
    a, b = sent.get(n - 1), sent.get(n)
    return a is not None and b is not None and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)


def _when(n: int) -> str:
    return " (before the first step)" if n == 1 else f" (after step {n - 1})"


def check(doc: dict) -> dict | None:
    """The verdict's check: required where the witness watched the syncs; None where it could not (SGLang, TRL)."""
    from .judge import check as make

    if not doc.get("observed"):
        return None
    return make("weight sync reached the rollout", not doc["problems"], doc["summary"])
