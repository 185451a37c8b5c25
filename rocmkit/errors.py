"""The one error hierarchy. The CLI turns these into `error:`/`hint:` lines and an exit code."""

from __future__ import annotations


class RocmkitError(Exception):
    """A failure the user can act on. Never shown with a traceback unless --debug."""

    exit_code = 2

    def __init__(self, message: str, hint: str | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint


class UsageError(RocmkitError):
    """Bad usage or bad input: unknown arch, malformed stack file, conflicting options (exit 2)."""

    exit_code = 2


class InputFileError(UsageError):
    """A field of an input file is missing or wrong. Names the file, the field and what is allowed."""

    def __init__(self, path: str, field: str, problem: str, allowed: str | None = None):
        where = f"{path}: {field}" if field else str(path)
        message = f"{where}: {problem}"
        super().__init__(message, hint=f"allowed: {allowed}" if allowed else None)
        self.path = str(path)
        self.field = field


class EnvironmentMissing(RocmkitError):
    """Something the command needs is absent: a Docker engine, a GPU, a tool (exit 3)."""

    exit_code = 3


class Failed(RocmkitError):
    """The work ran and its result is a failure: a build, a check, a certification (exit 1)."""

    exit_code = 1


class NotAllRead(RocmkitError):
    """The work ran and what it read passed, but it could not read everything it checks (exit 4): `stacks
    --resolve` without the sources of git components, whose requirements are then left out. Not 0, so that CI
    can tell it from a full answer; not 3, which says the environment is missing something."""

    exit_code = 4


class DeadlinePassed(RocmkitError):
    """A --timeout ran out: what was running was stopped (exit 124, as coreutils' timeout)."""

    exit_code = 124


class Interrupted(RocmkitError):
    """SIGINT or SIGTERM reached rocmkit: what it ran was stopped first (exit 130 / 143, as a shell reports)."""

    def __init__(self, signum: int, what: str):
        import signal

        name = signal.Signals(signum).name
        super().__init__(f"{what} stopped: rocmkit received {name}")
        self.exit_code = 128 + signum
