"""Running a build: the build context (Dockerfile, rocmkit's own wheel, local sources), the docker
command line, the full log written to a file, progress on a terminal or plain lines in CI, and on
failure which stage and component broke, with the tail of its output."""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Callable

from ..runtime import proc
from ..runtime.docker_client import DockerCLI
from ..errors import DeadlinePassed, EnvironmentMissing, Failed, UsageError
from .buildlog import BuildLog, Event, EventKind, Step, StepStatus
from .plan import BuildPlan
from .render import WHEELHOUSE_DIR, WHEELHOUSE_MOUNT, image_slug
from .sbomlib import LIB_DIR, vendor
from .selfwheel import build_self_wheel
from .sources import copy_tree, tree_digest
from .stackfiles import fetch_assets, patch_local_sources, write_patches

DIST_DIR = "rocmkit-dist"  # the rendered Dockerfile bind-mounts this folder of the context
SOURCES_DIR = "sources"
DEFAULT_TIMEOUT_S = 8 * 3600  # the heaviest upstream recipes take 1-3 hours cold
TAIL_LINES = 40


@dataclass(frozen=True)
class BuildOptions:
    max_jobs: int
    network: str | None = None
    cache_from: tuple[str, ...] = ()
    cache_to: tuple[str, ...] = ()
    progress: str = "plain"  # "plain": every BuildKit line; "tty": one live row per stage
    timeout_s: int = DEFAULT_TIMEOUT_S
    wheelhouse: Path | None = None  # pip installs only from these files (`rocmkit wheelhouse` makes them)


@dataclass
class BuildOutcome:
    ok: bool
    image_id: str | None
    log: BuildLog
    log_path: Path
    seconds: float
    returncode: int
    wheelhouse: Path | None = None


def default_log_path(plan: BuildPlan) -> Path:
    """$ROCMKIT_LOG_DIR, else $XDG_STATE_HOME/rocmkit/logs (~/.local/state/rocmkit/logs), one file per build."""
    if os.environ.get("ROCMKIT_LOG_DIR"):
        base = Path(os.environ["ROCMKIT_LOG_DIR"])
    else:
        base = Path(os.environ.get("XDG_STATE_HOME") or Path.home() / ".local" / "state") / "rocmkit" / "logs"
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return base / f"build-{image_slug(plan.stack.name, plan.targets)}-{stamp}-{os.getpid()}.log"


def fill_wheelhouse(ctx: Path, wheelhouse: Path | None) -> None:
    """The context's wheelhouse/ folder, which every pip step mounts: empty, or the files of `wheelhouse`
    (hard links where the file system allows, so a gigabyte of wheels costs no copy)."""
    dest = ctx / WHEELHOUSE_DIR
    dest.mkdir(parents=True, exist_ok=True)
    for f in sorted(wheelhouse.iterdir()) if wheelhouse else ():
        if f.is_file() and f.suffix in (".whl", ".gz", ".zip"):
            try:
                os.link(f, dest / f.name)
            except OSError:
                shutil.copy2(f, dest / f.name)


def prepare_context(plan: BuildPlan, dockerfile: str, ctx: Path, wheelhouse: Path | None = None) -> Path:
    """Fill `ctx` with what the rendered Dockerfile reads: rocmkit-dist/ (rocmkit's own wheel, installed in
    the final stage, and the CycloneDX library its SBOM step mounts), wheelhouse/, sources/<name>/ for each local
    component (the stack's patches checked and applied here), patches/ for the cloned ones, and assets/ (downloaded
    and verified here). Returns the Dockerfile's path."""
    ctx.mkdir(parents=True, exist_ok=True)
    build_self_wheel(ctx / DIST_DIR)
    vendor(ctx / DIST_DIR / LIB_DIR)
    fill_wheelhouse(ctx, wheelhouse)
    for stage in plan.stages:
        if not stage.local:
            continue
        dest = ctx / SOURCES_DIR / stage.component.name
        copy_tree(Path(stage.local.path), dest)
        # The plan (tag, labels, manifest) records the digest taken when the options were read; the copy
        # must be that same tree, or the image would not be what its labels say.
        if tree_digest(dest) != stage.local.digest:
            raise UsageError(f"--source {stage.component.name}={stage.local.path}: the folder changed while the "
                             "build was being prepared", hint="run the build again once the folder is settled")
    write_patches(plan, ctx)
    patch_local_sources(plan, ctx, SOURCES_DIR)
    fetch_assets(plan, ctx)
    dockerfile_path = ctx / "Dockerfile"
    dockerfile_path.write_text(dockerfile)
    return dockerfile_path


def _builtin_cache_from(value: str) -> str:
    """docker build's built-in BuildKit imports cache only from registry images, given by plain reference."""
    if "=" not in value:
        return value
    fields = dict(part.split("=", 1) for part in value.split(",") if "=" in part)
    if fields.get("type") == "registry" and fields.get("ref"):
        return fields["ref"]
    raise EnvironmentMissing(f"--cache-from {value}: this docker client's built-in BuildKit reads cache only from "
                             "registry images", hint="give an image reference, or build with a docker buildx plugin")


def build_command(cli: DockerCLI, opts: BuildOptions, ctx: Path, dockerfile: Path, iidfile: Path) -> list[str]:
    """The docker command line. No -t: the image is tagged through the engine only after success."""
    argv = cli.build_argv() + ["--progress=plain", "--iidfile", str(iidfile), "-f", str(dockerfile),
                               "--target", "final", "--build-arg", f"MAX_JOBS={opts.max_jobs}"]
    if opts.wheelhouse:
        argv += ["--build-arg", "PIP_NO_INDEX=1", "--build-arg", f"PIP_FIND_LINKS={WHEELHOUSE_MOUNT}"]
    if opts.network:
        argv += ["--network", opts.network]
    if cli.mode == "buildx":
        argv.append("--load")  # a docker-container builder keeps its result unless told to load it
        for v in opts.cache_from:
            argv += ["--cache-from", v]
        for v in opts.cache_to:
            argv += ["--cache-to", v]
    else:
        for v in opts.cache_from:
            argv += ["--cache-from", _builtin_cache_from(v)]
        for v in opts.cache_to:
            if v.replace(" ", "") not in ("type=inline", "inline"):
                raise EnvironmentMissing(
                    f"--cache-to {v}: {cli.path} builds with built-in BuildKit, which can only embed the cache in "
                    "the image (--cache-to type=inline)",
                    hint="use --cache-to type=inline (then push the image), or a docker buildx plugin with a "
                         "docker-container builder for registry, gha or local caches")
            argv += ["--build-arg", "BUILDKIT_INLINE_CACHE=1"]
    return argv + [str(ctx)]


# ---- progress ----

class StageView:
    """A terminal: one row per Dockerfile stage (waiting, running with its step, done, cached, FAILED) and
    its time, in one live table (progress.Board)."""

    def __init__(self, plan: BuildPlan):
        from ..progress import Board

        rows = ["base"] + [s.name for s in plan.stages] + ["final"]
        self.board = Board(f"building {plan.stack.name} for {';'.join(plan.targets)}", rows)
        self.steps: dict[str, list[Step]] = {}

    def __enter__(self) -> "StageView":
        self.board.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.board.__exit__(*exc)

    def line(self, text: str, events: list[Event]) -> None:
        for ev in events:
            s = ev.step
            if not s.stage:
                continue
            seen = self.steps.setdefault(s.stage, [])
            if s not in seen:
                seen.append(s)
            if ev.kind is EventKind.START and not s.finished:
                self.board.set(s.stage, "running", f"[{s.index}/{s.total}] {_short(s.instruction)}")
            elif s.status is StepStatus.ERROR:
                self.board.set(s.stage, "FAILED", f"[{s.index}/{s.total}] {s.instruction}")
            elif s.status is StepStatus.CANCELED:
                self.board.set(s.stage, "canceled")
            elif s.index == s.total:  # the stage's last step finished
                cached = all(x.status is StepStatus.CACHED or x.is_from for x in seen)
                self.board.set(s.stage, "cached" if cached else "done")

    def finish(self, ok: bool) -> None:
        """After a successful build, stages BuildKit never needed to finish (their result was in the cache
        further down) are cached."""
        if ok:
            for name, row in self.board.rows.items():
                if row["state"] in ("waiting", "running"):
                    self.board.set(name, "cached")


def _short(instruction: str) -> str:
    """A step as a reader wants it in one line: the command, without BuildKit's mount options."""
    return " ".join(re.sub(r"--mount=\S+", " ", instruction).split())


class PlainView:
    """CI and --progress plain: every line BuildKit prints, as is."""

    def __init__(self, write: Callable[[str], None]):
        self.write = write

    def __enter__(self) -> "PlainView":
        return self

    def __exit__(self, *exc) -> None:
        pass

    def line(self, text: str, events: list[Event]) -> None:
        self.write(text)

    def finish(self, ok: bool) -> None:
        pass


# ---- running ----

def run_build(cli: DockerCLI, argv: list[str], log_path: Path, view, timeout_s: int) -> tuple[int, BuildLog, float]:
    """Run the docker client through the runner: every line to the log file, the parser and the view. At the
    deadline, on SIGINT or SIGTERM the client is stopped (which cancels the build in the engine)."""
    log = BuildLog()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    log_path.write_text("$ " + " ".join(argv) + "\n")
    with view:
        result = proc.run(argv, env=cli.build_env(), timeout=timeout_s, log_path=log_path, what="the build",
                          on_line=lambda text: view.line(text, log.feed(text)))
        view.finish(result.ok)
    if result.timed_out:
        running = sorted({s.stage for s in log.steps.values() if s.stage and not s.finished})
        raise DeadlinePassed(
            f"the build ran past --timeout {timeout_s}s and was stopped"
            + (f" while {', '.join(running)} {'was' if len(running) == 1 else 'were'} running" if running else ""),
            hint=f"full log: {log_path}; the docker client was stopped, which cancels the build in the engine")
    return result.returncode, log, result.seconds


# What the base check (basecheck.py) prints for each component the base or a later install changed.
BASECHECK_LINE = re.compile(r"rocmkit: (component \S+: the stack declares .*)$")


def failure(plan: BuildPlan, log: BuildLog, log_path: Path, rc: int) -> Failed:
    """Failed naming the stage and component that broke; its tail goes in `Failed.tail`."""
    step = log.failed_step()
    components = {s.name: s.component.name for s in plan.stages}
    if step is not None:
        where = f"stage {step.stage}" if step.stage else f"step {step.name}"
        comp = components.get(step.stage or "")
        what = f" (component {comp})" if comp else (" (the final image)" if step.stage == "final" else "")
        message = f"build failed in {where}{what}"
        drift = [m.group(1) for line in step.output if (m := BASECHECK_LINE.search(line))]
        if drift:  # the base check's own words say more than its long printf instruction
            message += f", step {step.index}/{step.total}: " + "; ".join(drift)
        elif step.stage:
            message += f", step {step.index}/{step.total}: {step.instruction[:160]}"
        tail = step.output[-TAIL_LINES:] + ([f"ERROR: {step.error}"] if step.error else [])
    else:
        message = f"the docker build failed (exit code {rc}) before any stage ran"
        tail = log.trailer[-TAIL_LINES:]
    err = Failed(message, hint=f"full log: {log_path}")
    err.tail = tail  # type: ignore[attr-defined]
    err.stage = step.stage if step else None  # type: ignore[attr-defined]
    return err


def build_image(plan: BuildPlan, dockerfile: str, cli: DockerCLI, opts: BuildOptions, log_path: Path,
                write: Callable[[str], None]) -> BuildOutcome:
    """Prepare the context in a temporary folder, build, and return the outcome (the image is untagged)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="rocmkit-build-") as tmp:
        ctx = Path(tmp) / "context"
        dockerfile_path = prepare_context(plan, dockerfile, ctx, opts.wheelhouse)
        iidfile = Path(tmp) / "image-id"
        argv = build_command(cli, opts, ctx, dockerfile_path, iidfile)
        view = StageView(plan) if opts.progress == "tty" else PlainView(write)
        rc, log, seconds = run_build(cli, argv, log_path, view, opts.timeout_s)
        image_id = iidfile.read_text().strip() if rc == 0 and iidfile.exists() else None
    return BuildOutcome(ok=rc == 0 and bool(image_id), image_id=image_id, log=log, log_path=log_path,
                        seconds=seconds, returncode=rc, wheelhouse=opts.wheelhouse)
