"""No traceback for any input: every command's options, taken from the click command registry (rocmkit.cli.COMMANDS,
not a hand list), driven with hostile values (special and unwritable paths, a folder where a file goes, a file where
a folder goes, missing files, empty, huge, negative, unicode, wrong types). Each run must end with a documented exit
code (0, 1, 2, 3, 124), never an exception, and a refusal must name the option or the value it refuses.

25 examples a command (ROCMKIT_HOSTILE_EXAMPLES=N for more, as a search), derandomized: the same cases every run.
Commands run in-process (click's CliRunner) in a temporary folder with HOME there too. Nothing that starts real work
runs: the options in FORCED are always given (build --dry-run --no-resolve, certify --dry-run, run --print,
vf-configs --dry-run), the options in EXCLUDED are never generated, and the commands in NETWORK are left out (each
asks a registry, a git remote or a package index before it can refuse a value; tests/test_paths_cli.py drives their
path options by hand).
"""

from __future__ import annotations

import os
import re

import click
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rocmkit.cli import COMMANDS, cli

# Options given on every run of a command, so that it plans, prints or checks instead of doing the work.
FORCED = {"build": ["--dry-run", "--no-resolve"], "certify": ["--dry-run"], "run": ["--print"],
          "vf-configs": ["--dry-run"]}
# Options never generated, and why.
EXCLUDED = {
    "build": {"dry_run", "no_resolve", "push"},  # forced above; --push publishes
    "certify": {"dry_run"},  # forced above
    "run": {"print_only"},  # forced above
    "vf-configs": {"dry_run"},  # forced above
    "doctor": {"image",  # starts a container
               "level",  # 2 runs the GPU probes (its values are click's IntRange, checked by click)
               "stalled",  # samples live processes with py-spy for up to 30 s
               "code_objects"},  # reads every shared object of this Python (seconds)
    "verl-check": {"image"},  # starts a container
    "stacks": {"do_resolve"},  # asks the package index
}
# Commands that reach the network before their inputs are all checked.
NETWORK = {"outdated": "asks the package index, git remotes and the registry",
           "lock": "resolves base images' digests in their registry",
           "wheelhouse": "pip downloads the stack's wheels"}

HOSTILE_PATHS = ["", "/proc/rocmkit-nope", "/sys/rocmkit-nope", "/proc/rocmkit-nope/x", "/dev/full",
                 "/dev/full/x", "missing/file.toml", "a-folder", "a-file", "a-file/below", "ü/ñ-Ω.txt",
                 "x" * 300, "-"]  # not "/": as root, a folder made or written there is no error, and no test's to make
HOSTILE_NUMBERS = ["-1", "0", "-99999999999999999999", "99999999999999999999", "1e309", "nan", "inf", "abc", "",
                   "\u0663", "1.5", " 7"]
HOSTILE_TEXT = ["", " ", "-", "x" * 600, "ünï©ødé ☃", "a\nb", "../x/../y", "$(true)", "Rocmkit/Verl:latest",
                "a=b", "=", ",", "gfx942,,", "NAME=", "\t"]
NUMBER_TYPES = (click.types.IntParamType, click.types.FloatParamType)


def commands() -> list[str]:
    return [name for name in COMMANDS if name not in NETWORK]


def command(name: str) -> click.Command:
    return cli.get_command(click.Context(cli), name)


def values_for(param: click.Parameter) -> st.SearchStrategy:
    t = param.type
    if isinstance(t, click.Path):
        one = st.sampled_from(HOSTILE_PATHS)
    elif isinstance(t, NUMBER_TYPES):
        one = st.sampled_from(HOSTILE_NUMBERS)
    elif isinstance(t, click.Choice):
        one = st.sampled_from(["", "x", "ÜNICODE", "-1"])
    else:
        one = st.sampled_from(HOSTILE_TEXT + HOSTILE_PATHS + HOSTILE_NUMBERS)
    if param.nargs > 1:
        return st.lists(one, min_size=param.nargs, max_size=param.nargs)
    if param.nargs == -1 or getattr(param, "multiple", False):
        return st.lists(one, min_size=1 if param.required else 0, max_size=2)
    return one.map(lambda v: [v])


def args_for(name: str) -> st.SearchStrategy:
    cmd = command(name)
    params = [p for p in cmd.params if p.name not in EXCLUDED.get(name, ()) and p.name != "help"]

    @st.composite
    def build(draw):
        chosen = draw(st.lists(st.sampled_from(params), min_size=1, max_size=3, unique_by=lambda p: p.name))
        args, positional, given_ = list(FORCED.get(name, [])), [], []
        for p in chosen:
            if isinstance(p, click.Option) and p.is_flag:
                args.append(p.opts[0])
                given_.append((p.opts[0], None))
                continue
            vals = draw(values_for(p))
            if isinstance(p, click.Argument):
                positional += vals
                given_ += [(None, v) for v in vals]
            elif p.nargs > 1:
                args += [p.opts[-1], *vals]
                given_.append((p.opts[-1], vals))
            else:
                for v in vals:
                    args += [f"{p.opts[-1]}={v}"] if v.startswith("-") else [p.opts[-1], v]
                    given_.append((p.opts[-1], v))
        return name, args + (["--", *positional] if positional else []), given_

    return build()


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    home = tmp_path_factory.mktemp("hostile")
    (home / "a-folder").mkdir()
    (home / "a-file").write_text("not what any option expects\n")
    return home


ENV = {"ROCMKIT_DEBUG": None, "ROCMKIT_DOCKER": "/nonexistent/docker", "PIP_NO_INDEX": "1"}


def named(output: str, given_) -> bool:
    """The refusal is an `error:` (click's `Error:`) that names an option it was given, a value it was given, or the
    option or argument the command lacks."""
    if not re.search(r"^(error|Error): ", output, re.M):
        return False
    if re.search(r"(?<![\w-])--[a-z]|Missing argument '[A-Z]|'[A-Z]+(\.\.\.)?'|^error: [A-Z]+ ", output, re.M):
        return True  # an option, or an argument by its metavar (IMAGE, 'FILES...')
    for opt, val in given_:
        if opt and opt in output:
            return True
        for v in (val if isinstance(val, list) else [val]):
            if v is None:
                continue
            if (v and v.strip() and (v[:60] in output or repr(v)[:60] in output)) or repr(v) in output:
                return True
    return False


def run_hostile(sandbox, name, args, given_):
    env = dict(ENV, HOME=str(sandbox), XDG_CACHE_HOME=str(sandbox / ".cache"))
    old = os.getcwd()
    os.chdir(sandbox)
    try:
        r = CliRunner().invoke(cli, [name, *args], env=env, catch_exceptions=True)
    finally:
        os.chdir(old)
    shown = f"rocmkit {name} {args!r}\nexit {r.exit_code}\n{r.output[-2000:]}"
    assert r.exception is None or isinstance(r.exception, SystemExit), f"{shown}\n{r.exc_info and r.exc_info[1]!r}"
    assert "Traceback" not in r.output, shown
    assert r.exit_code in (0, 1, 2, 3, 124), shown
    if r.exit_code == 2:
        assert named(r.output, given_), f"the refusal names neither the option nor its value:\n{shown}"


@pytest.mark.parametrize("name", commands())
def test_no_traceback_for_hostile_options(sandbox, name):
    @settings(max_examples=int(os.environ.get("ROCMKIT_HOSTILE_EXAMPLES", "25")), derandomize=True, deadline=None, database=None,
              suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
    @given(args_for(name))
    def check(case):
        _, args, given_ = case
        run_hostile(sandbox, name, args, given_)

    check()


def test_every_command_is_driven_or_left_out_with_a_reason():
    assert set(commands()) | set(NETWORK) == set(COMMANDS)
    for name, excluded in EXCLUDED.items():
        assert excluded <= {p.name for p in command(name).params}, name  # a renamed option is noticed
