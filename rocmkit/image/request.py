"""What `rocmkit build` was asked to do, in one frozen object: the CLI makes it from its options and hands it
to `orchestrate.build` (or `orchestrate.dry_run`). Checks that need no engine happen here, when it is made."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from ..errors import UsageError
from ..stacks import Stack
from .build import DEFAULT_TIMEOUT_S
from .plan import DEFAULT_MAX_JOBS, LocalSource

AUTO = "auto"  # --max-jobs auto: sized from the builder's memory and cores once the engine is known
NETWORK_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$")


@dataclass(frozen=True)
class BuildRequest:
    stack: Stack
    targets: tuple[str, ...]
    base_image: str | None = None
    sources: dict[str, LocalSource] = field(default_factory=dict)  # --source NAME=DIR, read and digested
    max_jobs: int | str = DEFAULT_MAX_JOBS  # a number, or AUTO
    tags: tuple[str, ...] = ()  # checked image references; empty: the plan's tag
    push: bool = False
    cache_from: tuple[str, ...] = ()
    cache_to: tuple[str, ...] = ()
    wheelhouse: Path | None = None  # a checked folder of wheels: pip installs only from it
    network: str | None = None
    progress: str = AUTO  # auto, tty or plain
    log_file: Path | None = None  # default: beside the other build logs (build.default_log_path)
    docker_cli: str | None = None  # default: found on PATH (runtime.docker_client.find_cli)
    timeout_s: int = DEFAULT_TIMEOUT_S
    sbom_out: Path | None = None  # default: beside the log, <log name>.cdx.json
    resolve_first: bool = True  # run pip's resolver over the stack before building

    def __post_init__(self) -> None:
        if self.max_jobs != AUTO and (not isinstance(self.max_jobs, int) or self.max_jobs < 1):
            raise UsageError(f"--max-jobs {self.max_jobs!r}: must be at least 1")
        if self.push and not self.tags:
            raise UsageError("--push needs --tag naming where to push",
                             hint="e.g. --tag ghcr.io/ORG/verl-vllm:gfx942 --push")
        if self.network is not None and not NETWORK_RE.match(self.network):
            raise UsageError(f"--network {self.network!r} is not a network name", hint="e.g. none, host, default")
        if self.sbom_out and Path(self.sbom_out).exists():
            raise UsageError(f"--sbom-out {self.sbom_out} already exists", hint="remove it, or name another file")

    @property
    def offline(self) -> bool:
        """Nothing is installed from the index: pip reads only the wheelhouse, or RUN steps have no network."""
        return bool(self.wheelhouse) or self.network == "none"


@dataclass(frozen=True)
class Reporter:
    """Where a build's progress goes: `say` a line (the CLI: stderr), `warn` loudly (mutable refs, stale locks)."""

    say: Callable[[str], None]
    warn: Callable[[str], None]


def targets_for(stack: Stack, arch_spec: str | None) -> list[str]:
    """--arch parsed; without it, the stack's target when it has exactly one."""
    from .. import archs

    if arch_spec:
        return archs.parse_targets(arch_spec)
    if len(stack.targets) == 1:
        return list(stack.targets)
    raise UsageError(f"--arch is required: stack {stack.name} has several targets",
                     hint=f"one of {', '.join(stack.targets)}, or several separated by commas")
