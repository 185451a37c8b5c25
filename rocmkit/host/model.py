"""What a check produces. Shared by level-1 checks, level-2 GPU probes and the certify report."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from ..textenum import TextEnum


class Status(TextEnum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"


@dataclass(frozen=True)
class Finding:
    """One result of a check: an id, a status, one line of title, evidence, and the fix."""

    id: str  # stable, dotted: "gpu.kfd.access", "env.ray.noset", "probe.gemm.bf16"
    area: str  # grouping in the table: "gpu", "driver", "kernel", "container", "env", "software", "probe"
    status: Status
    title: str  # one line: what was checked and what was found
    evidence: dict[str, Any] = field(default_factory=dict)  # what was read or measured
    fix: str | None = None  # the exact command or setting that fixes it
    reference: str | None = None  # where the rule comes from (doc URL, issue)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Finding":
        return cls(id=d["id"], area=d["area"], status=Status(d["status"]), title=d["title"],
                   evidence=d.get("evidence") or {}, fix=d.get("fix"), reference=d.get("reference"))

    def to_json(self) -> dict[str, Any]:
        d = asdict(self)
        d["status"] = self.status.value
        return d
