"""Reading one line of an engine's log: where it came from (Ray's "(Actor pid=N)" prefix), the line without its
Ray and vLLM prefixes and colours, and the timestamps two repeats of it differ by. The watchdog, the cause of a
failed run (cause.py) and the log scan (logscan.py) all read lines this way, so the helpers are public here
rather than private names each one imports from the watchdog. Pure."""

from __future__ import annotations

import re

# the timestamps a repeated line differs by: Python logging's "2026-11-26 12:34:59,680", vLLM's "11-26 12:35:09",
# and the time since the cluster started that Ray's autoscaler monitor puts first, "(autoscaler +1m21s)"
STAMP_RE = re.compile(r"(?:\d{4}-)?\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[,.]\d+)?|\(autoscaler \+[\dhms]+\)")
ANSI_RE = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")  # Ray colours its prefixes
# Ray prefixes a worker's line with its actor and pid, "(vLLMHttpServer pid=9553)": one per rollout replica
SOURCE_RE = re.compile(r"^(?:\x1b\[[0-9;]*m)*\((?:(\w+) )?pid=(\d+)(?:, ip=[\d.]+)?\)")
PREFIX_RE = re.compile(r"^(?:\(\S+ pid=\d+\) |\S+ \d\d-\d\d [\d:]+ \[[^\]]+\] )+")


def source(line: str) -> str:
    """The Ray actor and pid a line came from ("vLLMHttpServer pid=9553"), or "driver"."""
    m = SOURCE_RE.match(line)
    return (f"{m.group(1)} pid={m.group(2)}" if m.group(1) else f"pid={m.group(2)}") if m else "driver"


def short(line: str, limit: int = 300) -> str:
    """A log line without its Ray and vLLM prefixes ("(Worker pid=1) ERROR 11-24 12:59:50 [file.py:9] ")."""
    return PREFIX_RE.sub("", ANSI_RE.sub("", line).strip())[:limit]
