"""`[amdgpu_ids]`: lines of libdrm's amdgpu.ids table that the image's copy may lack, appended at build time.

libdrm names a GPU from /usr/share/libdrm/amdgpu.ids (ROCm's own libdrm from /opt/amdgpu/share/libdrm); a
table older than the GPU reports an MI355X as "AMD Radeon Graphics" (ROCm/ROCm#5992), and SGLang then finds
no tuned config for it. SGLang's ROCm recipe ships a fixed table; a stack ships the missing lines as a file
beside it (read now, so the Dockerfile and the inputs hash hold exactly the validated lines)."""

from __future__ import annotations

import hashlib
import re
from typing import Any

from ..errors import InputFileError
from .besidefiles import missing
from .fields import NOTE, TEXT_RE, Fields, inside
from .model import AmdgpuIds

FILE_RE = re.compile(r"^[A-Za-z0-9_.][A-Za-z0-9_./-]{0,200}\.txt$")
# libdrm's syntax: device_id,<tab>revision_id,<tab>product_name (one tab after each comma).
LINE_RE = re.compile(r"^([0-9A-F]{4}),\t([0-9A-F]{2}),\t([A-Za-z0-9][A-Za-z0-9 ./()+-]{0,80})$")
LINE_ALLOWED = "libdrm amdgpu.ids lines: DEVICE,<tab>REV,<tab>product name (upper-case hex), or # comments"


def amdgpu_ids(f: Fields, beside: Any) -> AmdgpuIds | None:
    """`[amdgpu_ids] file = "files/x.txt", why = "..."`."""
    raw = f.get("amdgpu_ids", dict, None)
    if raw is None:
        return None
    where = "amdgpu_ids"
    t = Fields(f.path, where, raw, ("file", "why"))
    rel = inside(t, f"{where}.file", t.text("file", FILE_RE, "a .txt path relative to the stack file"))
    try:
        content = beside.joinpath(rel).read_bytes()
    except (OSError, AttributeError):
        raise missing(f.path, f"{where}.file", rel, beside, "file", "") from None
    entries, seen = [], set()
    for n, line in enumerate(content.decode("utf-8", "replace").splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        m = LINE_RE.match(line)
        if not m:
            raise InputFileError(f.path, f"{where}.file", f"{rel}:{n}: not an amdgpu.ids line: {line!r}", LINE_ALLOWED)
        if m.group(1, 2) in seen:
            raise InputFileError(f.path, f"{where}.file", f"{rel}:{n}: device {m[1]} revision {m[2]} twice",
                                 "one line per device and revision")
        seen.add(m.group(1, 2))
        entries.append(m.group(1, 2, 3))
    if not entries:
        raise InputFileError(f.path, f"{where}.file", f"{rel} holds no amdgpu.ids line", LINE_ALLOWED)
    return AmdgpuIds(file=rel, sha256=hashlib.sha256(content).hexdigest(), entries=tuple(entries),
                     why=t.text("why", TEXT_RE, NOTE))
