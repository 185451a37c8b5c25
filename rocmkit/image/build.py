"""Running a build: the build context (Dockerfile, rocmkit's own wheel, local sources), the docker
command line, the full log written to a file, progress on a terminal or plain lines in CI, and on
failure which stage and component broke, with the tail of its output."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Callable

from .buildlog import BuildLog, Event, Step
from ..engine import DockerCLI
from ..errors import EnvironmentMissing, Failed, UsageError
from .plan import BuildPlan
from .render import WHEELHOUSE_DIR, WHEELHOUSE_MOUNT
from .selfwheel import build_self_wheel
from .sources import copy_tree, tree_digest

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
    progress: str = "plain"  # "plain": every BuildKit line; "tty": step summaries and a live status line
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
    return base / f"build-{plan.stack.name}-{'-'.join(plan.targets)}-{stamp}-{os.getpid()}.log"


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
    the final stage), wheelhouse/ and sources/<name>/ for each local component. Returns the Dockerfile's path."""
    ctx.mkdir(parents=True, exist_ok=True)
    build_self_wheel(ctx / DIST_DIR)
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

class PlainDisplay:
    """CI: every line BuildKit prints, as is."""

    def __init__(self, write: Callable[[str], None]):
        self.write = write

    def line(self, text: str, events: list[Event]) -> None:
        self.write(text)

    def close(self) -> None:
        pass


class TerminalDisplay:
    """A terminal: one line per step of a Dockerfile stage that ran or failed (cached ones are only
    counted), and a status line, redrawn every second, naming the steps running now and for how long."""

    def __init__(self, stream=None):
        self.stream = stream or sys.stderr
        self.running: dict[int, tuple[Step, float]] = {}
        self.cached = 0
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.width = shutil.get_terminal_size((100, 20)).columns
        self.ticker = threading.Thread(target=self._tick, daemon=True)
        self.ticker.start()

    def _fit(self, text: str) -> str:
        return text if len(text) < self.width else text[: self.width - 2] + "…"

    def _status(self) -> str:
        now = time.monotonic()
        parts = [f"[{s.stage} {s.index}/{s.total}] {now - t0:.0f}s" for s, t0 in self.running.values()]
        cached = f" ({self.cached} steps cached so far)" if self.cached else ""
        return self._fit("  running: " + ", ".join(parts) + cached) if parts else ""

    def _draw(self, lines: list[str]) -> None:
        self.stream.write("\r\x1b[K")
        for text in lines:
            self.stream.write(self._fit(text) + "\n")
        self.stream.write(self._status())
        self.stream.flush()

    def _tick(self) -> None:
        while not self.stop.wait(1.0):
            with self.lock:
                self._draw([])

    def line(self, text: str, events: list[Event]) -> None:
        out = []
        for ev in events:
            s = ev.step
            if not s.stage:
                continue
            if ev.kind == "start" and not s.finished:
                self.running[s.id] = (s, time.monotonic())
            elif ev.kind == "finish":
                self.running.pop(s.id, None)
                if s.status == "cached" or s.is_from:
                    self.cached += s.status == "cached"
                    continue  # the summary after the build counts them; one line each would bury the work
                mark = {"done": f"{s.seconds or 0:7.1f}s", "error": "  FAILED",
                        "canceled": "canceled"}[s.status]
                out.append(f"  {mark}  [{s.stage} {s.index}/{s.total}] {s.instruction}")
        if out:
            with self.lock:
                self._draw(out)

    def close(self) -> None:
        self.stop.set()
        self.ticker.join()
        self.stream.write("\r\x1b[K")
        self.stream.flush()


# ---- running ----

def run_build(cli: DockerCLI, argv: list[str], log_path: Path, display, timeout_s: int) -> tuple[int, BuildLog, float]:
    """Run the docker command; every line goes to the log file, the parser and the display."""
    log = BuildLog()
    log_path.parent.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    timed_out = threading.Event()
    with open(log_path, "w", encoding="utf-8", errors="replace") as logf:
        logf.write("$ " + " ".join(argv) + "\n")
        logf.flush()
        try:
            proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env=cli.build_env(), text=True, errors="replace", bufsize=1)
        except OSError as exc:
            raise EnvironmentMissing(f"cannot run {cli.path}: {exc}") from None

        def kill() -> None:
            timed_out.set()
            proc.kill()

        timer = threading.Timer(timeout_s, kill)
        timer.start()
        try:
            assert proc.stdout is not None
            for line in proc.stdout:
                logf.write(line)
                logf.flush()
                text = line.rstrip("\n")
                display.line(text, log.feed(text))
            rc = proc.wait()
        except KeyboardInterrupt:
            proc.terminate()  # the docker client cancels the build when it is stopped
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
            raise
        finally:
            timer.cancel()
            display.close()
    if timed_out.is_set():
        log.trailer.append(f"rocmkit: the build ran past --timeout {timeout_s}s and was stopped")
        rc = rc or 124
    return rc, log, time.monotonic() - start


def failure(plan: BuildPlan, log: BuildLog, log_path: Path, rc: int) -> Failed:
    """Failed naming the stage and component that broke; its tail goes in `Failed.tail`."""
    step = log.failed_step()
    components = {s.name: s.component.name for s in plan.stages}
    if step is not None:
        where = f"stage {step.stage}" if step.stage else f"step {step.name}"
        comp = components.get(step.stage or "")
        what = f" (component {comp})" if comp else (" (the final image)" if step.stage == "final" else "")
        message = f"build failed in {where}{what}"
        if step.stage:
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
        display = TerminalDisplay() if opts.progress == "tty" else PlainDisplay(write)
        rc, log, seconds = run_build(cli, argv, log_path, display, opts.timeout_s)
        image_id = iidfile.read_text().strip() if rc == 0 and iidfile.exists() else None
    return BuildOutcome(ok=rc == 0 and bool(image_id), image_id=image_id, log=log, log_path=log_path,
                        seconds=seconds, returncode=rc, wheelhouse=opts.wheelhouse)
