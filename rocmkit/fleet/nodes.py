"""Slurm host lists ("gpu-[01-03,07],login1") to node names and back. Pure; the same grammar as Slurm's
hostlist (scontrol show hostnames), so a list from SLURM_JOB_NODELIST or a user's --nodes reads without Slurm.
Only plain ASCII is read: Python's \\d and int() take any Unicode digit, so "n[１-２]" (full-width digits, as an
input method types them) would silently become n1, n2 while Slurm refuses it or names other nodes."""

from __future__ import annotations

import re

from ..errors import UsageError

NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_RANGE_RE = re.compile(r"^([0-9]+)(?:-([0-9]+))?$")


def _split_top(text: str) -> list[str]:
    """Split at the commas outside brackets."""
    parts, depth, cur = [], 0, ""
    for ch in text:
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise UsageError(f"node list {text!r}: a ']' without its '['")
        if ch == "," and depth == 0:
            parts.append(cur)
            cur = ""
        else:
            cur += ch
    if depth:
        raise UsageError(f"node list {text!r}: a '[' without its ']'")
    return parts + [cur]


def _expand_one(item: str, whole: str) -> list[str]:
    m = re.match(r"^([^\[]*)\[([^\]]+)\](.*)$", item)
    if not m:
        if not NAME_RE.match(item):
            raise UsageError(f"node list {whole!r}: {item!r} is not a node name")
        return [item]
    prefix, ranges, rest = m.groups()
    out = []
    for r in ranges.split(","):
        rm = _RANGE_RE.match(r.strip())
        if not rm:
            raise UsageError(f"node list {whole!r}: {r!r} is not a number or a range like 01-16")
        lo, hi = rm.group(1), rm.group(2) or rm.group(1)
        if int(hi) < int(lo) or int(hi) - int(lo) > 100_000:
            raise UsageError(f"node list {whole!r}: the range {r!r} runs backwards or is absurdly long")
        width = len(lo) if lo.startswith("0") else 0  # "01-16": zero-padded as written
        for n in range(int(lo), int(hi) + 1):
            out += [f"{prefix}{n:0{width}d}{tail}" for tail in _expand_one(rest, whole)] if rest else \
                [f"{prefix}{n:0{width}d}"]
    for name in out:
        if not NAME_RE.match(name):
            raise UsageError(f"node list {whole!r}: {name!r} is not a node name")
    return out


MAX_NODES = 1_000_000  # more names than any cluster has: a typo (a[1-100000]b[1-100000]), refused before made


def _count(item: str) -> int:
    """How many names an item of a host list makes (its bracket groups' sizes multiplied), before making them."""
    total = 1
    for group in re.findall(r"\[([^\]]*)\]", item):
        size = 0
        for r in group.split(","):
            rm = _RANGE_RE.match(r.strip())
            size += (int(rm.group(2) or rm.group(1)) - int(rm.group(1)) + 1) if rm else 1
        total *= max(size, 1)
    return total


def ascii_only(text: str, what: str = "node list") -> None:
    """Refuse a host list with any character outside plain ASCII, naming the first one and where it is."""
    import unicodedata

    for i, ch in enumerate(text):
        if not ch.isascii():
            name = unicodedata.name(ch, "unnamed")
            raise UsageError(f"{what} {text[:80]!r}: {ch!r} (U+{ord(ch):04X} {name}) at position {i + 1} is not "
                             "plain ASCII", hint="type node names and ranges in plain ASCII (n[1-2]): Slurm knows no "
                                                 "other characters, and a full-width digit is not a digit to it")


def expand(text: str) -> list[str]:
    """The node names of a host list, in order, each once; plain ASCII only."""
    ascii_only(text)
    names: list[str] = []
    seen: set[str] = set()
    items = [i.strip() for i in _split_top(text.strip())]
    if sum(_count(i) for i in items if i) > MAX_NODES:
        raise UsageError(f"node list {text[:80]!r}: more than {MAX_NODES} names", hint="check the ranges")
    for item in items:
        if not item:
            continue
        for n in _expand_one(item, text):
            if n not in seen:
                seen.add(n)
                names.append(n)
    if not names:
        raise UsageError(f"node list {text!r} names no node")
    return names


def compress(names: list[str]) -> str:
    """Node names as a short host list Slurm reads back (gpu-01,gpu-02,gpu-03 → gpu-[01-03])."""
    groups: dict[tuple[str, int, str], list[int]] = {}
    plain: list[str] = []
    order: list[object] = []
    for name in names:
        m = re.match(r"^(.*?)([0-9]+)$", name)
        if not m:
            plain.append(name)
            order.append(name)
            continue
        prefix, digits = m.groups()
        key = (prefix, len(digits) if digits.startswith("0") else 0, "")
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(int(digits))
    out = []
    for key in order:
        if isinstance(key, str):
            out.append(key)
            continue
        prefix, width, _ = key
        nums = sorted(set(groups[key]))
        runs, start = [], nums[0]
        for a, b in zip(nums, nums[1:] + [None]):
            if b != a + 1:
                runs.append(f"{start:0{width}d}" + (f"-{a:0{width}d}" if a != start else ""))
                start = b
        out.append(f"{prefix}{runs[0]}" if len(runs) == 1 and "-" not in runs[0] else f"{prefix}[{','.join(runs)}]")
    return ",".join(out)
