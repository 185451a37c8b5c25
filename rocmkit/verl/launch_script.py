"""A user's verl launch script (or a plain overrides file) read into the Hydra overrides it passes to
`verl.trainer.main_ppo`, each with the line it came from. Pure: text in, data out.

The script is read the way bash reads it, as far as a checker can without running it: backslash-newline
continuations, single and double quotes, `#` comments, `;` `&&` `||` `|` `&` and newlines between commands,
redirections. `$VAR`, `${VAR}` and `${VAR:-default}` expand from assignments made earlier in the script
(`VAR=...`, `export VAR=...`); anything else — a variable the script does not set (it comes from the
caller's environment), `$1`, `$(...)`, arithmetic, a `for` loop variable — is left unresolved and named,
never guessed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

ENTRY_MODULE = "verl.trainer.main_ppo"
OVERRIDE_RE = re.compile(r"^(~|\+\+|\+)?([A-Za-z_][\w\-@/]*(?:\.[\w\-@/]+)*)(=.*)?$", re.S)
ASSIGN_RE = re.compile(r"^([A-Za-z_]\w*)=(.*)$", re.S)
NAME_RE = re.compile(r"[A-Za-z_]\w*")
SPECIAL = set("@*#?$!-0123456789")
OPERATORS = ("&&", "||", ";;", ";", "|", "&")
DECLARE = {"export", "readonly", "declare", "local", "typeset"}
HYDRA_VALUE_FLAGS = {"--config-name": "config_name", "-cn": "config_name", "--config-path": "config_path",
                     "-cp": "config_path", "--config-dir": "config_dir", "-cd": "config_dir"}


@dataclass
class Word:
    text: str
    line: int
    unresolved: list[str] = field(default_factory=list)  # what the text depends on and the script does not set


@dataclass
class Override:
    text: str | None  # None: its value depends on something unresolved
    key: str  # the dotted key, without +, ++ or ~
    line: int
    unresolved: list[str] = field(default_factory=list)
    prefix: str = ""

    def to_json(self) -> dict:
        return {"text": self.text, "key": self.key, "line": self.line, "unresolved": self.unresolved}


@dataclass
class Invocation:
    """One `main_ppo` command in a file (a plain overrides file is one invocation)."""
    file: str
    line: int
    overrides: list[Override]
    config_name: str = "ppo_trainer"
    config_name_line: int | None = None
    config_path: str | None = None
    problems: list[tuple[str, int, str]] = field(default_factory=list)  # (severity, line, message)


class _Vars:
    def __init__(self):
        self.known: dict[str, str] = {}
        self.unknown: dict[str, list[str]] = {}  # assigned from what this reader cannot know: name -> why

    def get(self, name: str) -> str | None:
        return None if name in self.unknown else self.known.get(name)

    def why(self, name: str) -> str:
        """What an unresolved $name stands on: `$name`, or `$name (from $HOME)`."""
        causes = self.unknown.get(name)
        return f"${name}" + (f" (from {', '.join(causes)})" if causes and causes != [f"${name}"] else "")


def _lex(text: str, env: _Vars, on_command) -> None:
    """Split into commands of words, expanding variables as bash would when the command runs (assignments of
    a command are applied before the next command is read)."""
    i, n, line = 0, len(text), 1
    words: list[Word] = []
    cur: list[str] = []
    cur_line, cur_unres, cur_started = 1, [], False

    def flush_word():
        nonlocal cur, cur_started, cur_unres
        if cur_started:
            words.append(Word("".join(cur), cur_line, cur_unres))
        cur, cur_started, cur_unres = [], False, []

    def start():
        nonlocal cur_started, cur_line
        if not cur_started:
            cur_started, cur_line = True, line

    def flush_command(sep: str):
        nonlocal words
        flush_word()
        if words:
            on_command(words, sep)
        words = []

    def expand(j: int) -> tuple[int, str | None, str | None]:
        """At text[j] == '$': (next index, value or None, what is unresolved)."""
        nxt = text[j + 1] if j + 1 < n else ""
        if nxt == "(":  # $( ... ) or $(( ... )): find the matching parenthesis, value unknown
            depth, k = 0, j + 1
            while k < n:
                depth += {"(": 1, ")": -1}.get(text[k], 0)
                k += 1
                if depth == 0:
                    break
            return k, None, text[j:k]
        if nxt == "{":
            k = text.find("}", j + 2)
            if k < 0:
                return n, None, text[j:]
            body = text[j + 2:k]
            m = re.match(r"^([A-Za-z_]\w*)(?:(:?[-=])(.*))?$", body, re.S)
            if not m:
                return k + 1, None, "${" + body + "}"
            value = env.get(m.group(1))
            if value is None and m.group(2):
                value = _expand_plain(m.group(3), env)
                if value is None:
                    return k + 1, None, "${" + body + "}"
                if m.group(2).endswith("="):
                    env.known[m.group(1)] = value
            return k + 1, value, None if value is not None else env.why(m.group(1))
        m = NAME_RE.match(text, j + 1)
        if m:
            value = env.get(m.group(0))
            return m.end(), value, None if value is not None else env.why(m.group(0))
        if nxt and nxt in SPECIAL:
            return j + 2, None, "$" + nxt
        return j + 1, "$", None

    while i < n:
        c = text[i]
        if c == "\\" and i + 1 < n and text[i + 1] == "\n":  # line continuation
            i += 2
            line += 1
            continue
        if c == "\n":
            flush_command("\n")
            line += 1
            i += 1
            continue
        if c in " \t":
            flush_word()
            i += 1
            continue
        if c == "#" and not cur_started:
            while i < n and text[i] != "\n":
                i += 1
            continue
        op = next((o for o in OPERATORS if text.startswith(o, i)), None)
        if op:
            flush_command(op)
            i += len(op)
            continue
        if c in "<>" or (c.isdigit() and not cur_started and re.match(r"\d+[<>]", text[i:i + 3])):
            flush_word()  # a redirection: the operator and its target are not arguments
            m = re.match(r"\d*(?:>>|>&|<&|&>|<<|>|<)\s*", text[i:])
            i += m.end() if m else 1
            while i < n and text[i] not in " \t\n;|&":
                i += 1
            continue
        start()
        if c == "\\":
            cur.append(text[i + 1] if i + 1 < n else "")
            i += 2
        elif c == "'":
            k = text.find("'", i + 1)
            k = n if k < 0 else k
            chunk = text[i + 1:k]
            cur.append(chunk)
            line += chunk.count("\n")
            i = k + 1
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                if text[i] == "\\" and i + 1 < n and text[i + 1] in '$`"\\\n':
                    if text[i + 1] == "\n":
                        line += 1
                    else:
                        cur.append(text[i + 1])
                    i += 2
                elif text[i] == "$":
                    i, value, missing = expand(i)
                    cur.append(value or "")
                    if missing:
                        cur_unres.append(missing)
                elif text[i] == "`":
                    k = text.find("`", i + 1)
                    k = n if k < 0 else k
                    cur_unres.append(text[i:k + 1])
                    i = k + 1
                else:
                    line += text[i] == "\n"
                    cur.append(text[i])
                    i += 1
            i += 1
        elif c == "$":
            i, value, missing = expand(i)
            cur.append(value or "")
            if missing:
                cur_unres.append(missing)
        elif c == "`":
            k = text.find("`", i + 1)
            k = n if k < 0 else k
            cur_unres.append(text[i:k + 1])
            i = k + 1
        else:
            cur.append(c)
            i += 1
    flush_command("\n")


def _expand_plain(text: str, env: _Vars) -> str | None:
    """A default value's own expansions (`${A:-$B}`), or None if any is unresolved."""
    out: list[str] = []
    unresolved: list[str] = []

    def take(words, sep):
        for w in words:
            out.append(w.text)
            unresolved.extend(w.unresolved)

    _lex(text.replace("\n", " "), env, take)
    return None if unresolved else " ".join(out)


def _is_entry(word: str) -> bool:
    return word == ENTRY_MODULE or word.endswith("verl/trainer/main_ppo.py")


def _invocation(path: str, words: list[Word], at: int) -> Invocation:
    inv = Invocation(file=path, line=words[at].line, overrides=[])
    rest = words[at + 1:]
    k = 0
    while k < len(rest):
        w = rest[k]
        if w.text.startswith("-"):
            flag, eq, value = w.text.partition("=")
            if flag in HYDRA_VALUE_FLAGS:
                if not eq:
                    k += 1
                    value_word = rest[k] if k < len(rest) else Word("", w.line)
                    value, unres = value_word.text, value_word.unresolved
                else:
                    unres = w.unresolved
                if unres:
                    inv.problems.append(("error", w.line, f"{flag} depends on {', '.join(unres)}, which the script "
                                                         "does not set: the config cannot be known"))
                elif HYDRA_VALUE_FLAGS[flag] == "config_name":
                    inv.config_name, inv.config_name_line = re.sub(r"\.yaml$", "", value), w.line
                elif HYDRA_VALUE_FLAGS[flag] == "config_path":
                    inv.config_path = value
            else:
                inv.problems.append(("warning", w.line, f"{w.text}: a Hydra flag this check does not read"))
            k += 1
            continue
        if not w.text and w.unresolved:  # "$@", $EXTRA_ARGS: arguments the checker cannot see
            inv.problems.append(("note", w.line, f"{' '.join(w.unresolved)}: arguments from outside the script "
                                                 "are not checked"))
            k += 1
            continue
        m = OVERRIDE_RE.match(w.text)
        if not m:
            inv.problems.append(("error", w.line, f"{w.text!r} is not a Hydra override (key=value, +key=value, "
                                                  "++key=value or ~key)"))
        else:
            prefix, key = m.group(1) or "", m.group(2)
            inv.overrides.append(Override(text=None if w.unresolved else w.text, key=key, line=w.line,
                                          unresolved=list(dict.fromkeys(w.unresolved)), prefix=prefix))
        k += 1
    return inv


def read_script(path: str, text: str) -> list[Invocation]:
    """Every main_ppo command in a shell script, and lines that look like overrides but reach no command
    (a comment or a missing backslash ended the command before them)."""
    env = _Vars()
    found: list[Invocation] = []
    strays: list[Word] = []

    def on_command(words: list[Word], sep: str):
        first = 0
        while first < len(words) and words[first].text in DECLARE:
            first += 1
        if first < len(words) and words[first].text == "for" and len(words) > first + 1:
            env.unknown[words[first + 1].text] = ["a for loop"]  # a loop variable takes several values
        at = next((j for j, w in enumerate(words) if _is_entry(w.text)), None)
        if at is not None:
            found.append(_invocation(path, words, at))
        else:
            assigns = [ASSIGN_RE.match(w.text) for w in words[first:]]
            if all(assigns) and assigns:
                for w, m in zip(words[first:], assigns):
                    if w.unresolved:
                        env.unknown[m.group(1)] = [c.split(" (from ")[-1].rstrip(")") if " (from " in c else c
                                                   for c in w.unresolved]
                    else:
                        env.known[m.group(1)] = m.group(2)
                        env.unknown.pop(m.group(1), None)
            elif found and OVERRIDE_RE.match(words[0].text) and "." in words[0].text.partition("=")[0]:
                strays.extend(w for w in words if OVERRIDE_RE.match(w.text))

    _lex(text, env, on_command)
    for w in strays:
        found[-1].problems.append(("error", w.line, f"{w.text} is not passed to main_ppo: the command ends before "
                                                    "this line (a comment or a missing backslash)"))
    return found


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


def read(path: str, text: str) -> list[Invocation]:
    """A launch script if it runs main_ppo, else a plain overrides file; [] if it is neither."""
    invocations = read_script(path, text) if ENTRY_MODULE in text or "main_ppo.py" in text else []
    if invocations:
        return invocations
    inv = read_overrides_file(path, text)
    return [inv] if inv.overrides else []
