"""What a check produces. Shared by level-1 checks, level-2 GPU probes and the certify report."""

from __future__ import annotations

from typing import Any, NamedTuple

from ..textenum import TextEnum


class Status(TextEnum):
    PASS = "pass"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"


class Finding(NamedTuple):
    """One result of a check: an id, a status, one line of title, evidence, and the fix.

    The doctor's records are NamedTuples, not frozen dataclasses: on Python 3.11 a frozen @dataclass compiles six
    methods when its module is imported (~0.7 ms a class), a NamedTuple one; `doctor --root` imports 19 record
    classes on every run (benchmarks/doctor_speed.py). A finding's evidence is never changed in place (the default
    {} is shared): make a new finding with `_replace(evidence={...})`."""

    id: str  # stable, dotted: "gpu.kfd.access", "env.ray.noset", "probe.gemm.bf16"
    area: str  # grouping in the table: "gpu", "driver", "kernel", "container", "env", "software", "probe"
    status: Status
    title: str  # one line: what was checked and what was found
    evidence: dict[str, Any] = {}  # what was read or measured
    fix: str | None = None  # the exact command or setting that fixes it
    reference: str | None = None  # where the rule comes from (doc URL, issue)

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> "Finding":
        return cls(id=d["id"], area=d["area"], status=Status(d["status"]), title=d["title"],
                   evidence=d.get("evidence") or {}, fix=d.get("fix"), reference=d.get("reference"))

    def to_json(self) -> dict[str, Any]:
        return {**self._asdict(), "status": self.status.value}
