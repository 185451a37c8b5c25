"""What a certification ends with, whichever engine ran it: the Outcome the CLI prints, the run's status from
the runner's Result, the host's facts and the certificate written to the run folder."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..fileio import write_atomic
from ..output import dumps
from . import early, picture
from .certificate import markdown
from .judge import RunStatus
from .workspace import Workspace


@dataclass
class Outcome:
    exit_code: int
    certificate: dict | None = None
    plan: dict | None = None  # --dry-run
    error: tuple[str, str | None] | None = None  # (message, hint) said after the certificate when it could not run
    files: dict = field(default_factory=dict)
    folder: Path | None = None  # where the certificate was written


def run_status(run) -> RunStatus:
    if run.timed_out:
        return RunStatus.TIMED_OUT
    if run.stopped == early.REASON:  # stopped by rocmkit once the verdict was known: a run that finished
        return RunStatus.FINISHED
    if run.stopped:
        return RunStatus(run.stopped)  # the watchdog's reason: stalled, or engine error
    return RunStatus.FINISHED if run.returncode == 0 else RunStatus.CRASHED


def host_facts() -> dict:
    from ..host.facts import collect

    facts = collect("/", process=False)
    return {"gpus": [{"pci": d.pci_address, "product": d.product.name if d.product else d.device_id, "gfx": d.gfx,
                      "partitions": d.partitions} for d in facts.devices],
            "rocm": facts.rocm_version, "container": facts.container}


def write_certificate(ws: Workspace, cert: dict) -> None:
    """The picture first (the certificate lists it, or says in a note why it is missing), then the certificate."""
    missing = picture.write(cert, ws.root)
    if missing:
        cert["notes"] = [*cert.get("notes", []), f"no picture ({picture.FILE}): {missing}"]
    else:
        cert["files"] = {**cert.get("files", {}), "picture": str(ws.root / picture.FILE)}
    write_atomic(ws.root / "certificate.json", dumps(cert))
    write_atomic(ws.root / "certificate.md", markdown(cert))
