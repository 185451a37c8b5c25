"""`rocmkit doctor --capture DIR`: the files the doctor read, so `--root DIR` reproduces its result
(for bug reports). Written into a temporary folder beside DIR and renamed at the end: no half capture."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

from ..errors import UsageError
from .facts import PROCESS_FILE, Facts
from .facts.journal import write_capture as write_journal
from .facts.kernlog import write_capture as write_kmsg
from .facts.reader import CONTAINER_MARKERS, READ_ERRORS_FILE


def capture(facts: Facts, dest: str) -> Path:
    target = Path(dest)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise UsageError(f"{target} exists and is not an empty folder", hint="capture into a new folder")
    try:  # /proc/x, /sys/x, a file's path as the parent: exit 2 naming the option, not an OSError
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    except OSError as exc:
        raise UsageError(f"--capture {dest}: cannot create a folder there ({exc.strerror})",
                         hint="capture into a new folder you can write to") from None
    try:
        root = Path(facts.root)
        # sysfs links first (a PCI device's path names the bridges above it), so the files read through
        # them land where the links lead
        for link, dest in sorted((facts.health.links if facts.health else {}).items()):
            (tmp / dest).mkdir(parents=True, exist_ok=True)
            (tmp / link).parent.mkdir(parents=True, exist_ok=True)
            if not (tmp / link).is_symlink():
                os.symlink(os.path.relpath(tmp / dest, (tmp / link).parent), tmp / link)
        for rel in sorted(set(facts.files_read)):
            src = root / rel
            try:
                data = src.read_bytes()
            except OSError:
                continue  # vanished since it was read: the capture keeps what is still there
            out = tmp / rel
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(data)
        # Device nodes and marker files are recorded by existence (their content is not the fact).
        nodes = [facts.dev_kfd, *facts.render.values()]
        markers = [n.path for n in nodes if n and n.exists]
        markers += ["/" + m for m in CONTAINER_MARKERS if (root / m).is_file()]
        for m in CONTAINER_MARKERS:
            if (root / m).is_dir():
                (tmp / m).mkdir(parents=True, exist_ok=True)
        if facts.rocm_smi_lib and facts.rocm_smi_lib[1]:
            markers.append(facts.rocm_smi_lib[0])
        for m in markers:
            p = tmp / m.lstrip("/")
            p.parent.mkdir(parents=True, exist_ok=True)
            p.touch()
        write_rocm_layout(tmp, facts.rocm_installs)
        for n in range(facts.numa_nodes or 0):
            (tmp / f"sys/devices/system/node/node{n}").mkdir(parents=True, exist_ok=True)
        errors = {rel.lstrip("/"): why for rel, why in facts.read_errors}
        if errors:
            (tmp / READ_ERRORS_FILE).write_text(json.dumps(errors, indent=1))
            for rel in errors:  # keep the entry (a KFD node not granted) so the tree lists it
                (tmp / rel).parent.mkdir(parents=True, exist_ok=True)
                (tmp / rel).touch()
        if facts.kernel_log is not None and facts.live:  # /dev/kmsg is a device: its records are written
            write_kmsg(tmp, facts.kernel_log)
        if facts.journal is not None and facts.live:  # journalctl's output, not a file the Reader read
            write_journal(tmp, facts.journal)
        if facts.process is not None:
            (tmp / PROCESS_FILE).write_text(json.dumps(facts.process, indent=1, default=str))
        if target.exists():
            target.rmdir()
        os.replace(tmp, target)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def write_rocm_layout(tmp: Path, rocm: dict | None) -> None:
    """The ROCm installs' folders, tools and links, which the doctor saw by existence, not by reading: each install's
    folder and bin/ tools (empty files), then /opt/rocm's links and /usr/bin's tools as links to what they resolved
    to (absolute, as installers write them; --root resolves them inside the tree)."""
    if not rocm:
        return
    for install in rocm.get("installs") or []:
        if install.get("kind") == "pip":
            continue  # site-packages: the process record carries it
        (tmp / install["real"].lstrip("/")).mkdir(parents=True, exist_ok=True)
        for tool in (install.get("tools") or {}).values():
            (tmp / tool.lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
            (tmp / tool.lstrip("/")).touch()
    links = {k: v for k, v in (rocm.get("links") or {}).items() if k.startswith("/")}  # not ROCM_PATH's
    for real in links.values():  # /opt/rocm/lib's target: a folder the doctor saw exist, nothing in it read
        if real:
            (tmp / real.lstrip("/")).mkdir(parents=True, exist_ok=True)
    links.update({f"/usr/bin/{t}": real for t, real in (rocm.get("tools") or {}).items()})
    for link, real in sorted(links.items()):
        p = tmp / link.lstrip("/")
        if real and not p.exists() and not p.is_symlink():  # a folder already there (a legacy /opt/rocm/lib) stays
            p.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(real, p)
