"""BuildKit's plain progress output, read line by line into steps: which stage each step belongs to,
whether it ran or came from the cache, how long it took, its output, and which one failed. Pure: the
builder feeds it the lines the docker client prints (`--progress=plain`), tests feed it saved logs.

The format (moby/buildkit util/progress/progressui, the same from docker 20.10 to buildx 0.2x):
    #7 [build-alpha 3/6] RUN pip wheel ...     a step's name, printed when it starts (and again
                                               when its output resumes after another step's)
    #7 0.512 Processing /src/alpha              its output, after seconds since it started
    #7 CACHED | #7 DONE 4.2s | #7 ERROR: ... | #7 CANCELED
    #7 sha256:... 1.2MB / 3.4MB                 other progress
and after a failure a summary block between `------` lines that repeats the failed step's output.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..textenum import TextEnum

_LINE = re.compile(r"^#(\d+) (.*)$")
_OUTPUT = re.compile(r"^(\d+\.\d+) ?(.*)$")
_DONE = re.compile(r"^DONE (\d+(?:\.\d+)?)s$")
_STAGE = re.compile(r"^\[(?P<stage>[^\] ]+) (?P<index>\d+)/(?P<total>\d+)\] (?P<instruction>.*)$")


class StepStatus(TextEnum):
    RUNNING = "running"
    CACHED = "cached"
    DONE = "done"
    ERROR = "error"
    CANCELED = "canceled"


class EventKind(TextEnum):
    START = "start"
    FINISH = "finish"


@dataclass
class Step:
    id: int
    name: str
    stage: str | None = None  # Dockerfile stage ("build-alpha", "final"); None for internal work
    index: int | None = None
    total: int | None = None
    instruction: str = ""
    status: StepStatus = StepStatus.RUNNING
    seconds: float | None = None
    error: str | None = None
    output: list[str] = field(default_factory=list)

    @property
    def is_from(self) -> bool:
        return self.instruction.startswith("FROM ")

    @property
    def finished(self) -> bool:
        return self.status is not StepStatus.RUNNING


@dataclass(frozen=True)
class Event:
    kind: EventKind
    step: Step


class BuildLog:
    """Accumulates steps from plain progress lines; `feed` returns start/finish events for a display."""

    def __init__(self) -> None:
        self.steps: dict[int, Step] = {}
        self.trailer: list[str] = []  # lines outside any step: the client's final error, warnings
        self._in_summary = False

    def feed(self, line: str) -> list[Event]:
        line = line.rstrip("\n")
        if line.strip() == "------":
            # The failure summary repeats output already seen; keep it out of the steps.
            self._in_summary = not self._in_summary
            return []
        m = _LINE.match(line)
        if self._in_summary or not m:
            if line.strip():
                self.trailer.append(line)
            return []
        vid, rest = int(m.group(1)), m.group(2)
        step = self.steps.get(vid)
        if step is None:
            step = self.steps[vid] = Step(id=vid, name=rest)
            s = _STAGE.match(rest)
            if s:
                step.stage, step.index, step.total = s.group("stage"), int(s.group("index")), int(s.group("total"))
                step.instruction = s.group("instruction")
            return [Event(EventKind.START, step)]
        if rest == step.name:
            return []
        if step.finished and (rest in ("CACHED", "CANCELED") or _DONE.match(rest)):
            return []  # BuildKit repeats a vertex's final status when several stages share it
        if rest == "CACHED":
            step.status = StepStatus.CACHED
            return [Event(EventKind.FINISH, step)]
        if rest == "CANCELED":
            step.status = StepStatus.CANCELED
            return [Event(EventKind.FINISH, step)]
        if rest.startswith("ERROR"):
            step.status = StepStatus.ERROR
            step.error = rest.partition(":")[2].strip() or rest
            return [Event(EventKind.FINISH, step)]
        d = _DONE.match(rest)
        if d:
            step.status = StepStatus.DONE
            step.seconds = float(d.group(1))
            return [Event(EventKind.FINISH, step)]
        o = _OUTPUT.match(rest)
        if o:
            step.output.append(o.group(2))
        return []

    # ---- questions about a finished build ----

    def stage_steps(self) -> list[Step]:
        """Steps of Dockerfile stages (not BuildKit's internal work), in the order they started."""
        return [s for s in self.steps.values() if s.stage]

    def failed_step(self) -> Step | None:
        """The step whose failure stopped the build (the others are then CANCELED)."""
        return next((s for s in self.steps.values() if s.status is StepStatus.ERROR), None)

    def stages(self) -> dict[str, dict]:
        """Per stage: steps seen, how many came from the cache, seconds spent in steps that ran."""
        out: dict[str, dict] = {}
        for s in self.stage_steps():
            entry = out.setdefault(s.stage, {"steps": 0, "cached": 0, "ran": 0, "seconds": 0.0})
            if s.is_from:
                continue  # resolving the base image is not work the cache can save
            entry["steps"] += 1
            if s.status is StepStatus.CACHED:
                entry["cached"] += 1
            elif s.status is StepStatus.DONE:
                entry["ran"] += 1
                entry["seconds"] = round(entry["seconds"] + (s.seconds or 0.0), 1)
        return out

    def rebuilt_stages(self) -> list[str]:
        return [name for name, e in self.stages().items() if e["ran"]]

    def fully_cached(self) -> bool:
        steps = [s for s in self.stage_steps() if not s.is_from]
        return bool(steps) and all(s.status is StepStatus.CACHED for s in steps)


def parse(text: str) -> BuildLog:
    log = BuildLog()
    for line in text.splitlines():
        log.feed(line)
    return log
