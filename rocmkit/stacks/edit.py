"""A stack file's text with some pins replaced in place: every comment, blank line and key order kept, so the
proposed upgrade is one small reviewed diff. Edits are exact: a value to replace must be found exactly where
the stack says it is, or the edit is refused (never a guess)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from ..errors import UsageError

_HEADER = re.compile(r"^\s*\[\[?\s*([A-Za-z0-9_.\-]+)\s*\]\]?\s*(#.*)?$")
_NAME = re.compile(r'^\s*name\s*=\s*"([^"]*)"', re.MULTILINE)


@dataclass(frozen=True)
class Edit:
    """Replace the string `old` by `new` in the section of `component` ("base" for the [base] table and its
    subtables). With key, only `key = "old"`; add_after: when `key` is absent, insert `key = "new"` after the
    line holding `add_after = ...`."""

    component: str
    old: str | None
    new: str
    key: str | None = None
    add_after: str | None = None


def _sections(lines: list[str]) -> list[tuple[str, int, int]]:
    """(owner, first line, end line) of each table: "base" for [base*], a component's name, "" otherwise."""
    starts = [(i, m.group(1)) for i, line in enumerate(lines) if (m := _HEADER.match(line))]
    out = []
    for k, (i, header) in enumerate(starts):
        end = starts[k + 1][0] if k + 1 < len(starts) else len(lines)
        owner = ""
        if header == "base" or header.startswith("base."):
            owner = "base"
        elif header == "component":
            m = _NAME.search("".join(lines[i + 1:end]))
            owner = f"component:{m.group(1)}" if m else ""
        out.append((owner, i, end))
    return out


def _q(value: str) -> str:
    return json.dumps(value)  # a TOML basic string of these values (no control characters) is a JSON string


def apply(text: str, edits: list[Edit], origin: str) -> str:
    lines = text.splitlines(keepends=True)
    for e in edits:
        owner = "base" if e.component == "base" else f"component:{e.component}"
        spans = [(a, b) for o, a, b in _sections(lines) if o == owner]
        if not spans:
            raise UsageError(f"{origin}: cannot find the table of {e.component} to rewrite")
        done = 0
        for a, b in spans:
            for i in range(a, b):
                line = lines[i]
                if e.key:
                    pat = re.compile(rf"^(\s*{re.escape(e.key)}\s*=\s*){re.escape(_q(e.old))}" if e.old is not None
                                     else "(?!)")
                    if pat.search(line):
                        lines[i] = pat.sub(lambda m, new=e.new: m.group(1) + _q(new), line, count=1)
                        done += 1
                elif _q(e.old) in line:
                    lines[i] = line.replace(_q(e.old), _q(e.new))
                    done += 1
        if not done and e.add_after:
            pat = re.compile(rf"^(\s*){re.escape(e.add_after)}\s*=")
            for a, b in spans:
                for i in range(a, b):
                    m = pat.match(lines[i])
                    if m and not done:
                        eol = "\n" if lines[i].endswith("\n") else ""
                        if not eol:
                            lines[i] += "\n"
                        lines.insert(i + 1, f"{m.group(1)}{e.key} = {_q(e.new)}\n")
                        done = 1
        if not done:
            what = f"{e.key} = {_q(e.old)}" if e.key else _q(e.old)
            raise UsageError(f"{origin}: cannot find {what} in the table of {e.component} to rewrite",
                             hint="the value may be written in another TOML form; change it by hand")
    return "".join(lines)
