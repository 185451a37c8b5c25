"""What a weight sync carried, as both ends record it (one JSON line per sync and side, certify/syncproof.py reads
them), and the test faults that break a sync on purpose; shared by the witnesses of verl's weight sync
(verl_sync_witness.py) and of TRL's sync through a file on the CPU (file_weights.py)."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

VAR = "ROCMKIT_SYNC_WITNESS"
FAULT_VAR = "ROCMKIT_TEST_SYNC_FAULT"
FAULT_RE = re.compile(r"^(?P<kind>noop|skip|cast)(?::(?P<arg>[a-z0-9_]+))?(?:@(?P<at>[1-9]\d*)(?P<on>\+?))?$")


def parse_fault(value: str) -> list[tuple[str, str, int, float]]:
    """[(kind, argument, first sync, last sync)] from the variable's value; ValueError naming what is wrong."""
    out = []
    for part in value.split(","):
        m = FAULT_RE.match(part.strip())
        ok = m and (m["kind"] == "noop") == (m["arg"] is None) and (m["kind"] != "skip" or m["arg"].isdigit())
        if not ok:
            raise ValueError(f"{FAULT_VAR}={value!r}: {part!r} is not one of noop, skip:LAYER or cast:DTYPE (a torch "
                             "dtype's name), each with @N (only sync N) or @N+ (from sync N on) or neither")
        first = int(m["at"] or 1)
        out.append((m["kind"], m["arg"] or "", first, float("inf") if m["on"] or not m["at"] else first))
    return out


def tensor_sum(t) -> float:
    import torch

    return float(torch.sum(t.detach(), dtype=torch.float64))


def model_state(model) -> dict:
    """The rollout model after a sync: the sum of every parameter (it moves when the sync changed the model) and
    their count."""
    params = list(model.parameters())
    return {"model_sum": sum(tensor_sum(p) for p in params), "model_tensors": len(params)}


class Record:
    """This process's syncs, one side each: appended to its own file, a line a sync (never one file for two
    processes, so no lock)."""

    def __init__(self, folder: Path, side: str):
        self.path, self.side, self.count = folder / f"sync-{os.getpid()}.jsonl", side, 0

    def installed(self) -> None:
        """The end is watched: a run whose rollout loaded this and recorded no sync had none."""
        with open(self.path, "a") as f:
            f.write(json.dumps({"side": self.side, "pid": os.getpid(), "installed": True}) + "\n")

    def write(self, doc: dict) -> None:
        self.count += 1
        line = json.dumps({"side": self.side, "pid": os.getpid(), "sync": self.count, "time": time.time(), **doc})
        with open(self.path, "a") as f:
            f.write(line + "\n")


def apply_faults(weights: list, faults: list[tuple[str, str, int, float]], sync: int) -> list | None:
    """The (name, tensor) pairs a rollout loads at `sync` under the test faults: None for a sync that loads nothing,
    without the tensors of a skipped decoder layer, or rounded to another dtype and back."""
    for kind, arg, first, last in faults:
        if not first <= sync <= last:
            continue
        if kind == "noop":
            return None
        if kind == "skip":
            weights = [(n, t) for n, t in weights if f".layers.{arg}." not in n]
        else:
            import torch

            dtype = getattr(torch, arg)
            weights = [(n, t.to(dtype).to(t.dtype)) for n, t in weights]
    return weights
