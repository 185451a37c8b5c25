"""A user's verl launch script (or a plain overrides file) read into the Hydra overrides it passes to
`verl.trainer.main_ppo`, each with the line it came from.

A script is not parsed here: real bash runs it in a sandbox (script_sandbox.py) where python, ray and
torchrun are recording stand-ins, so what is read is the exact argv bash hands to `main_ppo`, with the
caller's environment, `--env`, `--arg` and `--gpus` in place of what the script reads from outside. This
module turns those records into Invocations: the entry module found in each recorded command, the Hydra
flags read, and each override traced back to the line that wrote it (the first traced command whose
expanded words hold its exact text, then the nearest line of the script that spells its key), and the
variables the script exported to the call, in the order it set them. A plain overrides file (one `key=value`
a line) is read without bash.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field

from ..errors import InputFileError
from . import script_sandbox
from .script_sandbox import Record, Run, Traced

ENTRY_MODULE = "verl.trainer.main_ppo"
ENTRY_FILE = "verl/trainer/main_ppo.py"
RUNNERS = ("python", "torchrun")  # stand-ins whose arguments name a module or file to run
OVERRIDE_RE = re.compile(r"^(~|\+\+|\+)?([A-Za-z_][\w\-@/]*(?:\.[\w\-@/]+)*)(=.*)?$", re.S)
ASSIGN_RE = re.compile(r"^[A-Za-z_]\w*(?:\[[^]]*\])?\+?=\(?")
HYDRA_VALUE_FLAGS = {"--config-name": "config_name", "-cn": "config_name", "--config-path": "config_path",
                     "-cp": "config_path", "--config-dir": "config_dir", "-cd": "config_dir"}
DEFAULT_GPUS = 8
DEFAULT_TIMEOUT = 20.0
TRACE_WORDS_KEEP = 20000  # traced commands searched for an override's text


@dataclass
class Override:
    text: str
    key: str  # the dotted key, without +, ++ or ~
    line: int
    prefix: str = ""

    def to_json(self) -> dict:
        return {"text": self.text, "key": self.key, "line": self.line}


@dataclass
class Invocation:
    """One `main_ppo` command in a file (a plain overrides file is one invocation)."""
    file: str
    line: int
    overrides: list[Override]
    config_name: str = "ppo_trainer"
    config_name_line: int | None = None
    # As bash passed it. Hydra reads a relative one against the folder of verl/trainer/main_ppo.py, not the
    # working directory (hydra/_internal/utils.py compute_search_path_dir); `cwd` is bash's $PWD at the call.
    config_path: str | None = None
    problems: list[tuple[str, int, str]] = field(default_factory=list)  # (severity, line, message)
    cwd: str | None = None
    argv: list[str] = field(default_factory=list)  # the whole recorded command, stand-in name first
    # What the script exported to this command: set or changed against the environment it was given (ReadOptions'
    # env, $HOME private), without the sandbox's own variables; in the order the script set them.
    env: dict[str, str] = field(default_factory=dict)


@dataclass
class ReadOptions:
    """What a script reads from outside: the caller's environment (HOME aside), `--env`, `--arg`, `--gpus`."""
    env: dict[str, str] = field(default_factory=lambda: dict(os.environ))
    args: list[str] = field(default_factory=list)
    gpus: int | None = None  # None: GPU queries answer DEFAULT_GPUS, and the findings say it was assumed
    timeout: float = DEFAULT_TIMEOUT
    cwd: str = field(default_factory=os.getcwd)


# ---- plain overrides files ----

def read_overrides_file(path: str, text: str) -> Invocation:
    """One override a line; blank lines and `#` comments skipped; a trailing backslash tolerated."""
    inv = Invocation(file=path, line=1, overrides=[])
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip().removesuffix("\\").strip()
        if not line or line.startswith("#"):
            continue
        m = OVERRIDE_RE.match(line)
        if not m:
            inv.problems.append(("error", n, f"{line!r} is not a Hydra override"))
            continue
        inv.overrides.append(Override(text=line, key=m.group(2), line=n, prefix=m.group(1) or ""))
    return inv


def is_script(path: str, text: str) -> bool:
    """A shell script (run by bash), not an overrides file: a `#!` line, a shell suffix, or a main_ppo mention."""
    return text.startswith("#!") or path.endswith((".sh", ".bash")) or "main_ppo" in text


# ---- scripts ----

def entry_at(argv: list[str]) -> int | None:
    """Where `main_ppo` is named in a runner's arguments (`-m verl.trainer.main_ppo`, or its file), exactly:
    `main_ppo_sync` or another module is not it."""
    for i, a in enumerate(argv):
        if a == f"-m{ENTRY_MODULE}" or a == ENTRY_MODULE and i and argv[i - 1] in ("-m", "--module"):
            return i
        if a == ENTRY_FILE or a.endswith("/" + ENTRY_FILE):
            return i
    return None


def _runs(record: Record) -> str | None:
    """What a runner's record runs (`-m MODULE` or a file), for saying what a script ran instead of main_ppo."""
    argv = record.argv
    for i, a in enumerate(argv):
        if a in ("-m", "--module") and i + 1 < len(argv):
            return f"{record.name} -m {argv[i + 1]}"
        if a.startswith("-m") and len(a) > 2 and record.name != "torchrun":
            return f"{record.name} -m {a[2:]}"
        if a == "-c":
            return None
        if not a.startswith("-"):
            return f"{record.name} {a}"
    return None


def _is_runner(record: Record) -> bool:
    return record.name in RUNNERS or bool(script_sandbox.PYTHON_RE.match(record.name))


def _words(text: str) -> list[str]:
    """The words of a traced command, and of the values of its assignments (`A=(x y)`, `X='a=1 b=2'`)."""
    try:
        tokens = shlex.split(text)
    except ValueError:
        tokens = text.split()
    out = []
    for t in tokens:
        out.append(t)
        m = ASSIGN_RE.match(t)
        if m:
            value = t[m.end():]
            out += [value, *value.split()]
        if t.endswith(")"):
            out.append(t[:-1])
    return out


class _Lines:
    """Finds the line that wrote an override: the first traced command of the script whose expanded words
    hold its exact text, then, around it, the nearest line of the script spelling the text or its key."""

    def __init__(self, script: str, text: str, trace: list[Traced]):
        self.source = text.splitlines()
        self.first: dict[str, int] = {}
        for t in [t for t in trace if t.source == script][:TRACE_WORDS_KEEP]:
            for w in _words(t.text):
                self.first.setdefault(w, t.line)

    def _nearest(self, pattern: re.Pattern, around: int) -> int | None:
        found = [n for n, line in enumerate(self.source, 1)
                 if not line.lstrip().startswith("#") and pattern.search(line)]
        return min(found, key=lambda n: (abs(n - around), n)) if found else None

    def of(self, text: str, key: str, fallback: int) -> int:
        around = self.first.get(text, fallback)
        exact = re.compile(r"(?<![\w.\-/])" + re.escape(text) + r"(?![\w.\-/])") if text else None
        spelled = re.compile(r"(?<![\w.\-/])" + re.escape(key) + r"(?=[=\s\"']|$)")
        return (exact and self._nearest(exact, around)) or self._nearest(spelled, around) or around


def _invocation(path: str, script: str, record: Record, at: int, lines: _Lines) -> Invocation:
    here = record.line if record.source == script else 0
    inv = Invocation(file=path, line=here, overrides=[], cwd=record.cwd, argv=[record.name, *record.argv])
    if record.source != script:
        inv.problems.append(("note", 0, f"main_ppo runs from {record.source or 'another script'}, line "
                                        f"{record.line}: its overrides' lines are not this file's"))
    rest = record.argv[at + 1:]
    k = 0
    while k < len(rest):
        word = rest[k]
        line = lines.of(word, word.partition("=")[0].lstrip("+~"), here) if here else 0
        if word.startswith("-"):
            flag, eq, value = word.partition("=")
            if flag in HYDRA_VALUE_FLAGS:
                if not eq:
                    k += 1
                    value = rest[k] if k < len(rest) else ""
                line = lines.of(value, flag, here) if here else 0
                if HYDRA_VALUE_FLAGS[flag] == "config_name":
                    inv.config_name, inv.config_name_line = re.sub(r"\.yaml$", "", value), line
                elif HYDRA_VALUE_FLAGS[flag] == "config_path":
                    inv.config_path = value
            else:
                inv.problems.append(("warning", line, f"{word}: a Hydra flag this check does not read"))
            k += 1
            continue
        m = OVERRIDE_RE.match(word)
        if not m:
            inv.problems.append(("error", line, f"{word!r} is not a Hydra override (key=value, +key=value, "
                                                "++key=value or ~key)"))
        else:
            inv.overrides.append(Override(text=word, key=m.group(2), line=line, prefix=m.group(1) or ""))
        k += 1
    return inv


def _in_order(env: dict[str, str], trace: list[Traced]) -> dict[str, str]:
    """The variables in the order of the first traced command that names them (`export A=1`, `B=2`)."""
    if not env:
        return env
    named = re.compile(r"(?<![\w$])(" + "|".join(map(re.escape, env)) + r")(?![\w])")
    first: dict[str, tuple[int, int]] = {}
    for n, t in enumerate(trace[:TRACE_WORDS_KEEP]):
        for m in named.finditer(t.text):
            first.setdefault(m.group(1), (n, m.start()))
        if len(first) == len(env):
            break
    return dict(sorted(env.items(), key=lambda kv: (first.get(kv[0], (len(trace), 0)), kv[0])))


def _strays(script: str, run: Run, lines: _Lines) -> list[tuple[int, int, str, tuple]]:
    """Overrides bash ran as a command of their own (`reward.num_workers=2 trainer.nnodes=1`, then "command not
    found"): a comment, a blank line or a missing backslash ended the main_ppo command before them. One finding per
    break, on the line that ended the command, with the overrides it cut off (a missing backslash cuts off every
    line after it: one error naming that line, not one per override). Each with the number of main_ppo commands
    traced before it (its own command is the last of them) and the overrides cut off by a break it names."""
    groups: list[dict] = []
    commands = 0
    for t in run.trace:
        words = _words(t.text)
        if words and words[0] not in ("echo", "printf") and entry_at(words) is not None:
            commands += 1
        if t.source != script or not words or not _dotted(words[0]):
            continue
        found = [(w, lines.of(w, w.partition("=")[0].lstrip("+~"), t.line)) for w in dict.fromkeys(words)
                 if _dotted(w)]
        first, last = min(n for _, n in found), max(n for _, n in found)
        prev = groups[-1] if groups else None
        if prev and prev["commands"] == commands and _ends_at(lines.source, first) in range(prev["first"],
                                                                                         prev["last"] + 1):
            prev["words"] += found  # the next line without its backslash, after lines already cut off
            prev["last"] = max(prev["last"], last)
            continue
        groups.append({"commands": commands, "first": first, "last": last, "words": found})
    out = []
    for g in groups:
        end = _ends_at(lines.source, g["first"])
        why = _why_it_ends(lines.source, end) if end else None
        if why is None:  # not a continued command cut short: each override said where it is
            out += [(g["commands"], n, f"{w} is not passed to main_ppo: the command ends before this line (a "
                                       "comment or a missing backslash)", ()) for w, n in g["words"]]
            continue
        names = [w for w, _ in g["words"]]
        shown = ", ".join(names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        span = f"line {g['first']}" if g["first"] == g["last"] else f"lines {g['first']}-{g['last']}"
        out.append((g["commands"], end, f"the main_ppo command ends at line {end}: {why}, so the {len(names)} "
                    f"override(s) after it ({span}: {shown}) are not passed to main_ppo (bash ran them as a command "
                    "of their own); the rest of this check reads them as passed, as the lines meant",
                    tuple(g["words"])))
    return list(dict.fromkeys(out))


def _continues(line: str) -> bool:
    """Whether a line continues onto the next: it ends with a backslash and is not a comment."""
    return line.rstrip("\n").endswith("\\") and not line.lstrip().startswith("#")


def _ends_at(source: list[str], first: int) -> int | None:
    """The line that ended the command before a stray one starting at line `first` (1-based): the line before it,
    past blank and comment lines that no backslash carried into the command."""
    n = first - 1
    while n >= 2 and not _continues(source[n - 2]) and (not source[n - 1].strip()
                                                         or source[n - 1].lstrip().startswith("#")):
        n -= 1
    return n if 1 <= n <= len(source) else None


def _why_it_ends(source: list[str], n: int) -> str | None:
    """Why line n ended the command; None where it ends as a command should (its own last line)."""
    text = source[n - 1]
    shown = text.strip()[:120]
    carried = n >= 2 and _continues(source[n - 2])
    if not text.strip():
        return "it is blank, and a blank line ends a command continued by backslashes" if carried else None
    if text.lstrip().startswith("#"):
        return f"`{shown}` is a comment, and a comment line ends a command continued by backslashes" \
            if carried else None
    if re.search(r"\\[ \t]+$", text):
        return f"`{shown}` has a space after its backslash, which then escapes the space, not the line's end"
    if not _continues(text):
        return f"`{shown}` does not end with a backslash"
    return None


def _dotted(word: str) -> bool:
    return "=" in word and "." in word.partition("=")[0] and bool(OVERRIDE_RE.match(word))


def _bash_said(script: str, run: Run) -> str:
    """bash's own last message about the script (`line 7: NGPUS: unbound variable`), else its last stderr line."""
    mine = [s.split(": ", 1)[1] for s in run.stderr if s.startswith(f"{script}: line ")]
    return (mine or [s for s in run.stderr if s.strip()] or [""])[-1]


def _stopped(run: Run, timeout: float) -> str:
    last = run.last
    at = f" while running line {last.line}: {last.text.splitlines()[0][:200]}" if last else ""
    return f"stopped after {timeout:g} s{at}"


def read_script(path: str, text: str, options: ReadOptions | None = None) -> list[Invocation]:
    """Every main_ppo command bash runs in the script; InputFileError when it runs none, saying why."""
    options = options or ReadOptions()
    gpus = options.gpus if options.gpus is not None else DEFAULT_GPUS
    run = script_sandbox.run(path, options.args, {**options.env}, options.cwd, gpus, options.timeout)
    lines = _Lines(path, text, run.trace)
    found = []
    for r in run.records:
        at = entry_at(r.argv) if _is_runner(r) else None
        if at is not None:
            found.append(_invocation(path, path, r, at, lines))
            found[-1].env = _in_order(script_sandbox.exported(r.env, run.given), run.trace)
    if not found:
        ran = sorted({what for r in run.records if _is_runner(r) and (what := _runs(r))})
        if run.timed_out:
            why = f"{_stopped(run, options.timeout)}, before it ran {ENTRY_MODULE}"
            hint = ("--script-timeout SECONDS gives it longer; in the sandbox sleep returns at once and no Ray "
                    "cluster or file appears, so a loop that waits for one never ends")
        elif run.exit_status:
            why = f"exited with status {run.exit_status} before it ran {ENTRY_MODULE}: {_bash_said(path, run)}"
            hint = ("--env NAME=VALUE, --arg VALUE (its $1, $2...) and --gpus N set what the script reads from "
                    "outside; it runs with a private empty $HOME and /tmp")
        else:
            why = f"runs no {ENTRY_MODULE}" + (f" (it ran {'; '.join(ran)})" if ran else "")
            hint = "a launch script that runs python3 -m verl.trainer.main_ppo, or one override (key=value) a line"
        raise InputFileError(path, "", why, allowed=hint)
    last = found[-1]
    strays = _strays(path, run, lines)
    for commands, line, msg, cut in strays:
        inv = found[min(max(commands, 1), len(found)) - 1]
        inv.problems.append(("error", line, msg))
        # checked as the lines meant: their own findings, not the defaults' that stand in for them (a missing
        # backslash is one error, not one for every key it cut off)
        for word, n in cut:
            m = OVERRIDE_RE.match(word)
            inv.overrides.append(Override(text=word, key=m.group(2), line=n, prefix=m.group(1) or ""))
        if "a space after its backslash" in msg:  # the escaped space main_ppo got as a word: said by this error
            inv.problems = [p for p in inv.problems if not re.match(r"'\s+' is not a Hydra override", p[2])]
    said = _bash_said(path, run)
    if run.timed_out:
        last.problems.append(("note", last.line, f"the script was {_stopped(run, options.timeout)}, after its "
                                                 "main_ppo command (--script-timeout sets the deadline)"))
    elif run.exit_status and not (strays and any(w in said for _, _, _, cut in strays for w, _ in cut[:1])
                                  or strays and said.endswith("command not found")):  # said above
        last.problems.append(("note", last.line, f"the script exited with status {run.exit_status} after its "
                                                 f"main_ppo command: {_bash_said(path, run)}"))
    if options.gpus is None:
        for q in script_sandbox.gpu_queries(run.records)[:1]:
            for inv in found:
                inv.problems.append(("note", q.line if q.source == path else inv.line,
                                     f"{q.name}: answered {gpus} GPUs, an assumption (--gpus N sets it)"))
    return found


def read(path: str, text: str, options: ReadOptions | None = None) -> list[Invocation]:
    """A launch script's main_ppo commands, or a plain overrides file; [] for an overrides file with none."""
    if is_script(path, text):
        return read_script(path, text, options)
    inv = read_overrides_file(path, text)
    return [inv] if inv.overrides else []
