"""The run folder (`--out`): what rocmkit writes there, and the rule that keeps everything else.

A folder is taken when it is new or empty, or holds a previous run (the marker file). A folder with
other files is refused unless --force, and even then rocmkit never replaces a file it did not write:
its own entries have fixed names, a name already taken by a user's file is an error, and only the
entries a previous run's marker lists are removed. A dry run takes nothing: it works in a temporary
folder and removes it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from ..errors import UsageError
from ..fileio import write_atomic
from .settings import Settings

MARKER = ".rocmkit-certify"
MARKER_SCHEMA = "rocmkit.certify-folder/v1"
# Every entry rocmkit may create in a run folder, and nothing else.
OWN = ("certify.json", "model", "data", "reward.py", "setup.log", "run", "run.log", "home",
       "certificate.json", "certificate.md", "certificate.svg", "server.log", "stall", "previous")
PREVIOUS = "previous"  # earlier runs in this folder, each kept whole under previous/<its certificate's time>/


@dataclass(frozen=True)
class Workspace:
    root: Path
    model_dir: Path
    train_file: Path
    val_file: Path
    reward_file: Path
    run_dir: Path
    home: Path  # HOME inside an image run (caches of vLLM, Triton, HF)
    log: Path
    setup_log: Path
    config: Path  # certify.json: the run's settings, read by the setup and the TRL run in the target
    server_log: Path  # TRL's vLLM server (--vllm-mode server), beside the engine's log
    stall_dir: Path  # the stall report's full stacks, when the watchdog stopped a stalled run
    temporary: bool = False
    previous: Path | None = None  # where the folder's previous run was moved, if it held one

    @property
    def metrics(self) -> Path:
        return self.run_dir / "metrics.jsonl"

    @property
    def sync_dir(self) -> Path:
        """What each weight sync carried, seen from both ends (intarget/verl_sync_witness.py)."""
        return self.run_dir / "sync"

    def mounts(self) -> list[tuple[str, str, str]]:
        """(host, container, mode) bind mounts for an image run: the folder itself, then user inputs outside it."""
        out = [(str(self.root), str(self.root), "rw")]
        for p in (self.model_dir, self.train_file.parent):
            if not p.is_relative_to(self.root) and all(not p.is_relative_to(m[0]) for m in out):
                out.append((str(p), str(p), "ro"))
        return out


def layout(root: Path, s: Settings, *, temporary: bool = False) -> Workspace:
    return Workspace(
        root=root, model_dir=s.model or root / "model",
        train_file=s.data or root / "data" / "train.parquet",
        val_file=(root / "data" / "test.parquet"), reward_file=root / "reward.py", run_dir=root / "run",
        home=root / "home", log=root / "run.log", setup_log=root / "setup.log", config=root / "certify.json",
        server_log=root / "server.log", stall_dir=root / "stall", temporary=temporary)


def _inputs(s: Settings) -> list[Path]:
    return [p for p in (s.model, s.data) if p is not None]


def inspect(s: Settings) -> list[str]:
    """The entries of a previous run that taking the folder would remove; UsageError when it cannot be taken.
    Reads only: a dry run calls this too."""
    out = s.out
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out}: exists and is not a folder", hint="give a folder for the run's files")
    probe = out
    while not probe.exists():
        probe = probe.parent
    if not probe.is_dir() or not os.access(probe, os.W_OK | os.X_OK):
        raise UsageError(f"--out {out}: {probe} is not writable by this user", hint="choose a folder you can write to")
    if not out.exists():
        return []
    entries = sorted(os.listdir(out))
    if not entries:
        return []
    if MARKER in entries:
        listed = _marker_entries(out)
        keep = _inputs(s)
        return [e for e in listed if e in entries and not any(p == out / e or p.is_relative_to(out / e) for p in keep)]
    if not s.force:
        shown = ", ".join(entries[:5]) + (f" and {len(entries) - 5} more" if len(entries) > 5 else "")
        raise UsageError(f"--out {out} holds files that are not a rocmkit run ({shown})",
                         hint="give a new or empty folder; or --force to add the run's own files beside them "
                              f"(rocmkit writes only: {', '.join(OWN)})")
    taken = [e for e in entries if e in OWN]
    if taken:
        raise UsageError(f"--out {out}: {', '.join(taken)} already exist(s) and rocmkit did not write them",
                         hint="move them away or choose another folder; --force never replaces a user's file")
    return []


def _marker_entries(out: Path) -> list[str]:
    try:
        doc = json.loads((out / MARKER).read_text())
        listed = doc["entries"] if doc.get("schema") == MARKER_SCHEMA else []
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        raise UsageError(f"--out {out}: its {MARKER} file is unreadable, so rocmkit cannot tell its files from yours",
                         hint="remove the folder's rocmkit files by hand, or choose another folder") from None
    return [e for e in listed if e in OWN]  # never more than rocmkit's own names, whatever the file says


def take(s: Settings) -> Workspace:
    """Claim the run folder: check it, remove the previous run's entries, write the marker first."""
    stale = inspect(s)
    try:  # as root, os.access says yes to /proc and /sys, where no folder can be made
        s.out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise UsageError(f"--out {s.out}: cannot create the folder ({exc.strerror})",
                         hint="choose a folder you can write to") from None
    kept = keep_previous(s.out, [e for e in stale if e != PREVIOUS])
    existing = set(os.listdir(s.out))
    mine = [e for e in OWN if e not in existing or e in stale or e == PREVIOUS and kept]
    write_atomic(s.out / MARKER, json.dumps({"schema": MARKER_SCHEMA, "entries": mine}, indent=1) + "\n")
    ws = dataclasses.replace(layout(s.out, s), previous=kept)
    ws.run_dir.mkdir()
    return ws


def keep_previous(out: Path, entries: list[str]) -> Path | None:
    """Move a previous run's entries whole into previous/<when its certificate was written>/ (a run that left
    none is named by its folder's time): no run deletes or replaces another's results. None when there was none."""
    if not entries:
        return None
    try:
        created = json.loads((out / "certificate.json").read_text()).get("created") or ""
    except (OSError, ValueError, AttributeError):
        created = ""
    stamp = (created or dt.datetime.fromtimestamp((out / MARKER).stat().st_mtime, dt.timezone.utc)
             .isoformat(timespec="seconds")).replace(":", "-").replace("+00-00", "Z")
    dest = out / PREVIOUS / stamp
    n = 1
    while dest.exists():  # two runs in the same second
        n += 1
        dest = out / PREVIOUS / f"{stamp}-{n}"
    dest.mkdir(parents=True)
    for name in entries:
        if (out / name).exists() or (out / name).is_symlink():
            os.replace(out / name, dest / name)
    write_atomic(dest / MARKER, json.dumps({"schema": MARKER_SCHEMA, "entries": entries}, indent=1) + "\n")
    return dest


def temporary(s: Settings) -> Workspace:
    """A throwaway folder for a dry run (removed by `release`)."""
    root = Path(tempfile.mkdtemp(prefix="rocmkit-certify-dry-"))
    ws = layout(root, s, temporary=True)
    ws.run_dir.mkdir()
    return ws


def release(ws: Workspace) -> None:
    if ws.temporary:
        shutil.rmtree(ws.root, ignore_errors=True)
