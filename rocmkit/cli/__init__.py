"""The `rocmkit` command: a group whose subcommands live beside it in rocmkit/cli/, imported on first use
(so `rocmkit doctor` does not pay for importing Docker or Jinja), and one place that turns
RocmkitError into `error:`/`hint:` lines and an exit code."""

from __future__ import annotations

import gc
import importlib
import os
import sys

import click

from ..errors import RocmkitError, UsageError

# name -> "module:attribute"; the order here is the order `rocmkit --help` lists them.
COMMANDS = {
    "stacks": "rocmkit.cli.stacks:stacks",
    "render": "rocmkit.cli.render:render",
    "lock": "rocmkit.cli.lock:lock",
    "build": "rocmkit.cli.build:build",
    "bake": "rocmkit.cli.bake:bake",
    "wheelhouse": "rocmkit.cli.wheelhouse:wheelhouse",
    "venv": "rocmkit.cli.venv:venv",
    "doctor": "rocmkit.cli.doctor:doctor",
    "vf-configs": "rocmkit.cli.vf_configs:vf_configs",
    "tune": "rocmkit.cli.tune:tune",
    "verl-check": "rocmkit.cli.verl_check:verl_check",
    "certify": "rocmkit.cli.certify:certify",
    "run": "rocmkit.cli.run:run",
    "slurm": "rocmkit.cli.slurm:slurm",
    "kuberay": "rocmkit.cli.kuberay:kuberay",
    "matrix": "rocmkit.cli.matrix:matrix",
    "outdated": "rocmkit.cli.outdated:outdated",
    "diff": "rocmkit.cli.diff:diff",
}


class RocmkitGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        target = COMMANDS.get(name)
        if target is None:
            return None
        module, attr = target.split(":")
        return getattr(importlib.import_module(module), attr)

    def invoke(self, ctx: click.Context):
        # the subcommand's words, before click consumes them (click 8.2+ keeps the first in _protected_args)
        argv = [*(getattr(ctx, "_protected_args", None) or []), *ctx.args]
        try:
            return super().invoke(ctx)
        except RocmkitError as exc:
            if (ctx.obj or {}).get("debug"):
                raise
            self._fail(ctx, exc)
        except OSError as exc:
            # A path the user gave that cannot be read or written (/proc/x, /sys/x, a full device, a file where a
            # folder goes, no permission): an error naming the option and the path, not a traceback. An OSError on
            # a path the user did not give is rocmkit's own bug and keeps its traceback.
            given = _given_path(argv, exc)
            if given is None or (ctx.obj or {}).get("debug"):
                raise
            option, value = given
            what = f"{option} {value}" if option else value
            problem = exc.strerror or type(exc).__name__
            where = f" ({exc.filename})" if exc.filename and str(exc.filename) != value else ""
            self._fail(ctx, UsageError(f"{what}: {problem}{where}",
                                       hint="give a path this user can read or write (not under /proc or /sys)"))

    @staticmethod
    def _fail(ctx: click.Context, exc: RocmkitError):
        click.echo(f"error: {exc.message}", err=True)
        if exc.hint:
            click.echo(f"hint: {exc.hint}", err=True)
        ctx.exit(exc.exit_code)


def _given_path(argv: list[str], exc: OSError) -> tuple[str | None, str] | None:
    """The (option, value) of the command line whose path the OSError is about: the path itself or a folder above
    it (a file rocmkit writes inside --out DIR); None when the user gave no such path."""
    names = [os.fspath(n) for n in (exc.filename, exc.filename2) if n]
    if not names:
        return None
    found = None
    for i, word in enumerate(argv):
        option, value = (word.split("=", 1) if word.startswith("--") and "=" in word else
                         (argv[i - 1] if i and argv[i - 1].startswith("-") else None, word))
        if not value or (option is None and value.startswith("-")):
            continue
        for name in names:
            n, v = os.path.abspath(name), os.path.abspath(value)
            if n == v or n.startswith(v.rstrip("/") + "/") or v.startswith(n.rstrip("/") + "/"):
                if found is None or len(value) > len(found[1]):
                    found = (option, value)
    return found


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    """rocmkit's version and build identity (rocmkit/buildid.py), the one a doctor document carries: the version
    alone is the same at every commit. Read from the package itself, so a source tree run with `python -m rocmkit`
    says so instead of click's "'rocmkit' is not installed" traceback."""
    if not value or ctx.resilient_parsing:
        return
    from .. import buildid

    ident = buildid.identity()
    source = f", from {ident['source']}" if ident.get("source") else ""
    click.echo(f"rocmkit, version {buildid.describe(ident)}{source}")
    ctx.exit()


@click.group(cls=RocmkitGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Show the version and build and exit.")
@click.option("--debug", is_flag=True, envvar="ROCMKIT_DEBUG", help="Show tracebacks for errors.")
@click.pass_context
def cli(ctx: click.Context, debug: bool) -> None:
    """Provision AMD ROCm environments for RL post-training (verl, Miles) on Instinct GPUs.

    Declared stacks become pinned, multi-stage images (render, build, bake); hosts and containers
    are checked (doctor); a smoke GRPO run certifies that a stack trains (certify).

    Exit codes: 0 ok, 1 a build/check/certification failed, 2 bad usage or input,
    3 a required environment is missing (no Docker engine, no GPU), 124 a deadline passed,
    130/143 interrupted (SIGINT/SIGTERM); whatever the exit, nothing rocmkit started is left running.
    """
    ctx.obj = {"debug": debug}


def main() -> None:
    # Python's default SIGPIPE handling turns `rocmkit ... | head` into a traceback; exit quietly instead.
    try:
        cli.main(prog_name="rocmkit")
    except KeyboardInterrupt:  # Ctrl-C outside a runner (nothing of rocmkit's is running): the shell's code
        click.echo("\ninterrupted", err=True)
        sys.exit(130)
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        sys.exit(1)
    finally:
        # The command is done and the process exits: what is alive now (modules, classes, click's command tree)
        # goes with it. Frozen, the interpreter's exit skips its collection passes over them, which cost as much
        # as a tenth of a `doctor --root` run (benchmarks/doctor_speed.py); modules are still cleared and atexit
        # handlers still run (before the collection, as ever).
        gc.freeze()
