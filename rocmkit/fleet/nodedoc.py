"""A node's output is untrusted input: its doctor document found in what the node printed, checked against the
schema the fleet reads, and its exit status read (a signal named). Pure.

Whatever a node prints must never break the fleet: a login script's banner before the document, a library's
warning after it, an older or broken rocmkit's document with a field of another type, a doctor killed by a
signal. Each of those is said about that node, and the other nodes' results stand. The schema below is what
compare.py, report.py and html.py read from a node's document; a document that passes it cannot make them raise.
"""

from __future__ import annotations

import json
import math
import signal
from typing import Any

STATUSES = ("pass", "warn", "fail", "skip")
MAX_TRIES = 64  # places a document may start at ("{" at a line's start): a banner has few, a flood is cut off
MAX_PROBLEMS = 4  # named in the message; the rest counted


def extract(text: str) -> tuple[Any, str]:
    """(the doctor document in `text`, what was around it). The document is the first JSON object that starts a
    line, parses whole and has a `rocmkit.doctor/` schema; the text before and after it is tolerated and
    returned (for the report), never parsed. (None, "") when there is none; (the first JSON object that parsed,
    …) when no object has the doctor's schema, so validate() can say what is wrong with it."""
    decoder = json.JSONDecoder()
    starts = [0] if text.startswith("{") else []
    i = text.find("\n{")
    while i >= 0 and len(starts) < MAX_TRIES:
        starts.append(i + 1)
        i = text.find("\n{", i + 1)
    first = None
    for start in starts:
        try:
            obj, end = decoder.raw_decode(text, start)
        except ValueError:
            continue
        around = (text[:start] + text[end:]).strip()
        if isinstance(obj, dict) and str(obj.get("schema", "")).startswith("rocmkit.doctor/"):
            return obj, around
        if first is None:
            first = (obj, around)
    return first if first is not None else (None, "")


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean", type(None): "null",
            int: "a number", float: "a number"}.get(type(value), type(value).__name__)


def _text(value: Any, *, optional: bool = False) -> bool:
    return isinstance(value, str) or (optional and value is None)


def validate(doc: Any) -> list[str]:
    """What is wrong with a node's doctor document, as the fleet reads it ([] when nothing is): each problem names
    the field ("findings[3].status: missing")."""
    if not isinstance(doc, dict):
        return [f"the document is {_kind(doc)}, not an object"]
    problems: list[str] = []
    schema = doc.get("schema")
    if not (isinstance(schema, str) and schema.startswith("rocmkit.doctor/")):
        problems.append(f"schema: {schema!r}, not a rocmkit doctor document (schema rocmkit.doctor/v1)" if "schema" in doc else "schema: missing")
    findings = doc.get("findings")
    if not isinstance(findings, list):
        problems.append(f"findings: {_kind(findings)}, not a list" if "findings" in doc else "findings: missing")
        findings = []
    for i, f in enumerate(findings):
        if len(problems) > MAX_PROBLEMS * 4:
            break
        problems += [f"findings[{i}]{p}" for p in _finding(f)]
    for key, check in (("fingerprint", _fingerprint), ("rocmkit", _identity)):
        if key in doc:
            problems += [f"{key}{p}" for p in check(doc[key])]
    for key, kinds in (("summary", dict), ("level", int), ("exit_code", int)):
        if key in doc and not (isinstance(doc[key], kinds) and not isinstance(doc[key], bool)):
            problems.append(f"{key}: {_kind(doc[key])}, not {_kind(kinds())}")
    return problems


def _finding(f: Any) -> list[str]:
    if not isinstance(f, dict):
        return [f": {_kind(f)}, not an object"]
    out = []
    for key in ("id", "status", "title"):
        if key not in f:
            out.append(f".{key}: missing")
        elif not isinstance(f[key], str):
            out.append(f".{key}: {_kind(f[key])}, not a string")
    if isinstance(f.get("status"), str) and f["status"] not in STATUSES:
        out.append(f".status: {f['status'][:40]!r}, not one of {', '.join(STATUSES)}")
    if not _text(f.get("fix"), optional=True):
        out.append(f".fix: {_kind(f['fix'])}, not a string")
    ev = f.get("evidence")
    if ev is not None and not isinstance(ev, dict):
        out.append(f".evidence: {_kind(ev)}, not an object")
    elif ev and str(f.get("id", "")).startswith("probe."):  # the figures the fleet compares (host/baseline.figures)
        if "gpus" in ev and not isinstance(ev["gpus"], list):
            out.append(f".evidence.gpus: {_kind(ev['gpus'])}, not a list")
        values = [ev.get("value")] + [r.get("value") for r in ev.get("gpus") or [] if isinstance(r, dict)] \
            if isinstance(ev.get("gpus") or [], list) else [ev.get("value")]
        if any(isinstance(v, float) and not math.isfinite(v) for v in values):
            out.append(".evidence: a figure that is not a finite number")
    return out


def _fingerprint(fp: Any) -> list[str]:
    if not isinstance(fp, dict):
        return [f": {_kind(fp)}, not an object"]
    out = [f".{k}: {_kind(fp[k])}, not a string" for k in ("kernel", "amdgpu", "rocm")
           if k in fp and not _text(fp[k], optional=True)]
    for key, value_ok, what in (("gpus", lambda v: isinstance(v, dict), "an object"),
                                ("packages", lambda v: _text(v, optional=True), "a string"),
                                ("env", _text, "a string"), ("rdma", _text, "a string")):
        if key not in fp:
            continue
        if not isinstance(fp[key], dict):
            out.append(f".{key}: {_kind(fp[key])}, not an object")
            continue
        bad = [k for k, v in fp[key].items() if not value_ok(v)]
        if bad:
            out.append(f".{key}.{bad[0]}: {_kind(fp[key][bad[0]])}, not {what}")
    return out


def _identity(ident: Any) -> list[str]:
    if not isinstance(ident, dict):
        return [f": {_kind(ident)}, not an object"]
    return [f".{k}: {_kind(ident.get(k))}, not a string" for k in ("version", "build") if not _text(ident.get(k))]


def problem_text(problems: list[str]) -> str:
    shown = "; ".join(problems[:MAX_PROBLEMS])
    return shown + (f" (and {len(problems) - MAX_PROBLEMS} more)" if len(problems) > MAX_PROBLEMS else "")


def signal_of(rc: int | None) -> str | None:
    """The signal an exit status says the doctor died of, as a shell reports one (128 + N): "SIGSEGV"; None for
    an ordinary exit. 124 is coreutils' timeout's own, never a signal."""
    if rc is None or rc <= 128 or rc > 128 + 64:
        return None
    try:
        return signal.Signals(rc - 128).name
    except ValueError:
        return f"signal {rc - 128}"
