"""The one way rocmkit starts a process (or a container) and stops it.

`run()` starts argv in its own process group, sends every output line to a log file and a callback (or, labelled
with the stream it came on, to another: a tool's own errors on stderr apart from its tasks' output), and
holds its deadline while output flows (a reader thread feeds a queue; the caller's thread watches the
clock and the signals). On the deadline, SIGINT or SIGTERM it stops the whole process tree (SIGTERM,
then SIGKILL after a grace period) and calls the caller's `cleanup` for what lives outside the tree; a
deadline returns a timed-out Result, a signal raises Interrupted (exit 130/143). This module knows nothing
of Docker: runtime/container.py starts a container as a `docker run --label io.rocmkit.run=<id>` process
and passes a cleanup that removes the containers carrying that label, so the same path stops them.
"""

from __future__ import annotations

import contextlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from ..errors import EnvironmentMissing, Interrupted

GRACE_S = 10.0  # between SIGTERM and SIGKILL: time for a docker client to pass the signal on
DRAIN_S = 2.0  # after the child exits: how long its last lines may take to arrive
CLEANUP_GRACE_S = 3.0  # what cleanup removed (a container) is gone; its client only has to notice
TAIL_LINES = 60


@dataclass
class Result:
    argv: list[str]
    returncode: int | None  # None when it was stopped at the deadline
    timed_out: bool
    seconds: float
    tail: list[str] = field(default_factory=list)  # the last lines of output
    stdout: list[str] | None = None  # every stdout line, when asked for with keep_stdout (stderr kept apart)
    stopped: str | None = None  # why stop_when stopped it (returncode None then, as at a deadline)

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out

    @property
    def output(self) -> str:
        return "\n".join(self.tail)


def new_run_label() -> str:
    """A value that names one run (its containers' label, its files in shared places)."""
    return uuid.uuid4().hex[:16]


@contextlib.contextmanager
def _signals_noted() -> Iterator[list[int]]:
    """SIGINT/SIGTERM recorded instead of raised while a child runs, so the child is stopped first."""
    received: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield received
        return
    previous = {s: signal.signal(s, lambda signum, _frame: received.append(signum))
                for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield received
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


def _prctl():
    """libc's prctl, loaded once (before any fork: a child only calls it); None off Linux or where it is missing."""
    global _PRCTL
    if _PRCTL is None and sys.platform.startswith("linux"):
        try:
            import ctypes

            _PRCTL = ctypes.CDLL(None, use_errno=True).prctl
        except (OSError, AttributeError):
            _PRCTL = False
    return _PRCTL or None


def _become_subreaper() -> None:
    """Descendants orphaned by their parent (a crashed driver's Ray daemons) are re-parented to rocmkit
    instead of init, so the cleanup still finds them. Linux only; elsewhere nothing changes."""
    global _SUBREAPER
    prctl = _prctl()
    if _SUBREAPER or prctl is None:
        return
    prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    _SUBREAPER = True


_SUBREAPER = False
_PRCTL = None


def _dies_with_us() -> Callable[[], None] | None:
    """For a run's child, in it before exec: SIGKILL when the thread that started it ends (PR_SET_PDEATHSIG). run()
    waits in that thread for the child's end, so this fires only when rocmkit itself is killed (kill -9, the
    kernel's OOM killer, a batch system's hard limit): a run whose watcher is gone would go on holding its GPUs.
    Linux only; elsewhere None."""
    prctl = _prctl()
    if prctl is None:
        return None

    def set_death_signal() -> None:
        prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG

    return set_death_signal
# The trees of the runs and Background processes alive in this process: a run adopts only what is no other's.
# The lock is held from a child's start to its tree's registration, and while a run picks what to adopt, so no
# run sees another's child before that child has its tree.
_TREES: set[_Tree] = set()
_TREES_LOCK = threading.RLock()


class _Tree:
    """Every process the child started, remembered as it runs (pid with its start time, so a reused pid
    is never mistaken for one of them), plus whatever became rocmkit's own child since the run began and
    belongs to no other tree of this process (runs in other threads, Background servers).

    The child itself is signalled and reaped only through its Popen: were psutil to reap it, Popen's own
    wait would find no such child and report exit status 0, a failure read as success."""

    def __init__(self, child: subprocess.Popen, adopt: bool = True):
        import psutil

        self.child, self.pid, self.adopt = child, child.pid, adopt  # adopt: see members
        self.started = time.time() - 1.0
        self.seen: dict[int, float] = {}
        self._psutil = psutil
        self._last = 0.0
        with _TREES_LOCK:
            _TREES.add(self)

    def _others(self) -> set[int]:
        """The processes of the other live trees of this process, never adopted by this one (under _TREES_LOCK)."""
        pids: set[int] = set()
        for t in _TREES - {self}:
            pids.add(t.pid)
            pids.update(list(t.seen))  # (list: another thread's note() may add to it meanwhile)
            try:
                pids.update(p.pid for p in self._psutil.Process(t.pid).children(recursive=True))
            except self._psutil.Error:
                pass
        return pids

    def note(self, every_s: float = 0.5) -> None:
        if time.monotonic() - self._last < every_s:
            return
        self._last = time.monotonic()
        try:
            for p in self._psutil.Process(self.pid).children(recursive=True):
                self.seen[p.pid] = p.create_time()
        except self._psutil.Error:
            pass

    def members(self) -> list:
        psutil = self._psutil
        out = []
        candidates = dict(self.seen)
        try:
            candidates[self.pid] = psutil.Process(self.pid).create_time()
            for p in psutil.Process(self.pid).children(recursive=True):
                candidates[p.pid] = p.create_time()
        except psutil.Error:
            pass
        if self.adopt:
            with _TREES_LOCK:
                others = self._others()
                # Each run's child leads a session of its own (start_new_session): a process its tree orphaned is
                # re-parented to rocmkit, out of that tree, but keeps the session. It is that run's, not ours.
                sessions = {t.pid for t in _TREES - {self}}
                try:
                    mine = psutil.Process(os.getpid()).children(recursive=True)
                except psutil.Error:
                    mine = []
            for p in mine:
                try:
                    if p.pid not in others and p.create_time() >= self.started and os.getsid(p.pid) not in sessions:
                        candidates[p.pid] = p.create_time()
                except (psutil.Error, ProcessLookupError, PermissionError):
                    continue
        for pid, created in candidates.items():
            try:
                p = psutil.Process(pid)
                if p.create_time() == created and p.status() != psutil.STATUS_ZOMBIE:
                    out.append(p)
            except psutil.Error:
                continue
        return out

    def stop(self, grace_s: float) -> None:
        """SIGTERM to the process group and every member, then SIGKILL to what is left after grace_s. The
        child goes through its Popen (which never signals a pid it has reaped), the rest through psutil."""
        psutil = self._psutil
        members = [p for p in self.members() if p.pid != self.pid]
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGTERM)
        self.child.terminate()
        for p in members:
            with contextlib.suppress(psutil.Error):
                p.terminate()
        deadline = time.monotonic() + grace_s
        _, alive = psutil.wait_procs(members, timeout=grace_s)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.child.wait(timeout=max(0.0, deadline - time.monotonic()))
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, signal.SIGKILL)
        self.child.kill()
        for p in alive:
            with contextlib.suppress(psutil.Error):
                p.kill()
        psutil.wait_procs(alive, timeout=grace_s)
        with _TREES_LOCK:  # stopped: its processes are no longer kept from other trees' adoption
            _TREES.discard(self)


def _start(argv: list[str], adopt: bool, **popen) -> tuple[subprocess.Popen, _Tree]:
    """The child and its tree, registered before any other run can pick what to adopt (_TREES_LOCK)."""
    with _TREES_LOCK:
        try:
            child = subprocess.Popen(argv, **popen)
        except OSError as exc:
            raise EnvironmentMissing(f"cannot start {argv[0]}: {exc.strerror or exc}") from None
        return child, _Tree(child, adopt=adopt)


def run(argv: list[str], *, env: dict[str, str] | None = None, cwd: str | Path | None = None,
        timeout: float | None = None, on_line: Callable[[str], None] | None = None,
        log_path: Path | None = None, cleanup: Callable[[], object] | None = None, what: str | None = None,
        grace_s: float = GRACE_S, keep_stdout: bool = False, passthrough: bool = False,
        input_text: str | None = None, stop_when: Callable[[Callable[[], list[int]]], str | None] | None = None,
        on_stop: Callable[[list[int]], object] | None = None,
        on_stream_line: Callable[[str, str], object] | None = None) -> Result:
    """Run argv to completion or to its deadline; see the module docstring. `env` replaces the environment
    (None: inherit). `what` names the work in the Interrupted message. With keep_stdout, stdout is read apart
    from stderr and returned whole in Result.stdout (a JSON document a command prints); both still reach the
    log and on_line. `on_stream_line(stream, line)` gets every line labelled with its stream, "stdout" or
    "stderr", read apart (srun's refusals on stderr, its tasks' frames on stdout). With passthrough the child
    uses this terminal itself (an interactive container): nothing is read, and on a terminal it stays in the
    foreground process group so it can read the keyboard.
    `input_text` is written to the child's stdin, which is then closed (a short request, as a credential
    helper reads one); otherwise stdin is /dev/null. `stop_when` is asked several times a second while the
    child runs (after each line, and when none comes), with a callable that lists the pids of the child's tree
    (a watchdog reads what they do): a reason it returns stops the tree as a deadline does, and the Result
    carries the reason (a certification's watchdog). `on_stop` is then called with the pids of
    the child's tree before anything is stopped (a stall report reads them as they stand). `cleanup` removes what the child started
    outside its process tree (runtime/container.py: the run's containers): called before the tree is stopped
    when the run is cut short (a stopped client would leave its container running), and again after it."""
    _become_subreaper()
    started = time.monotonic()
    interactive = passthrough and sys.stdin.isatty()
    piped = None if passthrough else subprocess.PIPE
    apart = keep_stdout or on_stream_line is not None  # stderr read on its own
    with _signals_noted() as received:
        stdin = None if passthrough else subprocess.PIPE if input_text is not None else subprocess.DEVNULL
        child, tree = _start(argv, adopt=True, stdin=stdin, stdout=piped,
                             stderr=piped if apart else (None if passthrough else subprocess.STDOUT),
                             env=env, cwd=cwd, text=True, errors="replace", bufsize=1, start_new_session=not interactive,
                             preexec_fn=_dies_with_us())
        watch = _Watch(child, tree, started + timeout if timeout else None, received, stop_when)
        try:
            if input_text is not None:
                with contextlib.suppress(BrokenPipeError):  # a child that exits unread says why in its output
                    child.stdin.write(input_text)
                    child.stdin.close()
            if passthrough:
                watch.wait()
            else:
                watch.pump(on_line, log_path, keep_stdout, on_stream_line)
        finally:
            stopped = watch.timed_out or watch.stopped is not None or bool(received) or child.poll() is None
            try:
                if on_stop and watch.stopped is not None and not received:
                    on_stop([p.pid for p in watch.tree.members()])
            finally:  # whatever the report did, the tree goes
                if cleanup and stopped:
                    cleanup()  # first: a stopped client would leave its container running
                # Whatever is left of the tree goes: all of it at a deadline or signal, leftovers after an exit.
                watch.tree.stop(CLEANUP_GRACE_S if cleanup else grace_s)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.wait(timeout=grace_s)
                if cleanup:
                    cleanup()
        if received:
            raise Interrupted(received[0], what or Path(argv[0]).name)
    if log_path and (watch.timed_out or watch.stopped):
        with open(log_path, "a", encoding="utf-8") as handle:
            handle.write(f"rocmkit: stopped at the deadline ({timeout:g} s)\n" if watch.timed_out
                         else f"rocmkit: stopped: {watch.stopped}\n")
    cut_short = watch.timed_out or watch.stopped is not None
    return Result(argv=list(argv), returncode=None if cut_short else child.returncode,
                  timed_out=watch.timed_out, seconds=time.monotonic() - started, tail=watch.tail,
                  stdout=watch.stdout if keep_stdout else None, stopped=watch.stopped)


class _Watch:
    """The loop around a running child: the clock, the signals noted, and (piped) its output lines."""

    def __init__(self, child: subprocess.Popen, tree: _Tree, deadline: float | None, received: list[int],
                 stop_when: Callable[[], str | None] | None = None):
        self.child, self.tree, self.deadline, self.received = child, tree, deadline, received
        self.stop_when = stop_when
        self.stopped: str | None = None
        self.timed_out = False
        self.tail: list[str] = []
        self.stdout: list[str] = []

    def _past_deadline(self, now: float) -> bool:
        """The deadline passed, or stop_when gave a reason: either way the child is stopped."""
        self.timed_out = self.deadline is not None and now >= self.deadline
        if not self.timed_out and self.stop_when is not None and self.child.poll() is None:
            self.stopped = self.stop_when(lambda: [p.pid for p in self.tree.members()])
        return self.timed_out or self.stopped is not None

    def wait(self) -> None:
        """The child owns the terminal: just watch the clock, the signals and its exit."""
        while not self.received and not self._past_deadline(time.monotonic()):
            self.tree.note()
            if self.child.poll() is not None:
                return
            time.sleep(0.1)

    def pump(self, on_line, log_path: Path | None, keep_stdout: bool, on_stream_line=None) -> None:
        lines: queue.Queue = queue.Queue()

        def read(stream, name: str) -> None:
            for line in stream:
                lines.put((name, line.rstrip("\n")))
            lines.put((name, None))

        apart = keep_stdout or on_stream_line is not None
        streams = [(self.child.stdout, "stdout")] + ([(self.child.stderr, "stderr")] if apart else [])
        for stream, name in streams:
            threading.Thread(target=read, args=(stream, name), daemon=True).start()
        open_streams = len(streams)
        exited_at = None
        log = open(log_path, "a", encoding="utf-8", errors="replace") if log_path else None
        try:
            while not self.received:
                self.tree.note()
                now = time.monotonic()
                if self._past_deadline(now):
                    return
                if exited_at is None and self.child.poll() is not None:
                    exited_at = now
                if exited_at is not None and (open_streams == 0 or now - exited_at > DRAIN_S):
                    return  # exited, and its output read (or something it started still holds it open)
                wait = 0.2 if self.deadline is None else max(0.0, min(0.2, self.deadline - now))
                if open_streams == 0:  # its output closed; it is done when it exits (most often, now)
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        self.child.wait(timeout=wait)
                    continue
                try:
                    name, text = lines.get(timeout=wait)
                except queue.Empty:
                    continue
                if text is None:
                    open_streams -= 1
                    continue
                if keep_stdout and name == "stdout":
                    self.stdout.append(text)
                self.tail.append(text)
                del self.tail[:-TAIL_LINES]
                if log:
                    log.write(text + "\n")
                    log.flush()
                if on_line:
                    on_line(text)
                if on_stream_line:
                    on_stream_line(name, text)
        finally:
            if log:
                log.close()


class Background:
    """A process that runs beside others (a server beside its client), in its own process group, its output
    sent to log_path (None: this process's own stdout and stderr). watch() remembers its descendants and
    stop() ends all of them; as a context manager it is stopped on every way out. Unlike run(), the caller
    holds the clock and the signals; only this process's tree is stopped, never its siblings."""

    def __init__(self, argv: list[str], *, env: dict[str, str] | None = None, log_path: Path | None = None,
                 cwd: str | Path | None = None):
        _become_subreaper()
        self.argv = list(argv)
        self._log = open(log_path, "a", encoding="utf-8", errors="replace") if log_path else None
        try:
            self.child, self.tree = _start(argv, adopt=False, stdin=subprocess.DEVNULL, stdout=self._log,
                                           stderr=subprocess.STDOUT if self._log else None, env=env, cwd=cwd,
                                           start_new_session=True)
        except EnvironmentMissing:
            if self._log:
                self._log.close()
            raise

    def poll(self) -> int | None:
        """Its exit status, or None while it runs; notes its descendants as it goes."""
        self.tree.note()
        return self.child.poll()

    def stop(self, grace_s: float = GRACE_S) -> int | None:
        self.tree.stop(grace_s)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.child.wait(timeout=grace_s)
        if self._log:
            self._log.close()
            self._log = None
        return self.child.returncode

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def capture(argv: list[str], *, timeout: float, env: dict[str, str] | None = None, keep_stdout: bool = False,
            input_text: str | None = None) -> Result:
    """Run a short command and keep its output (merged stdout and stderr) in Result.tail; with keep_stdout,
    stdout alone in Result.stdout too."""
    out: list[str] = []
    result = run(argv, env=env, timeout=timeout, on_line=out.append, keep_stdout=keep_stdout, input_text=input_text)
    result.tail = out
    return result
