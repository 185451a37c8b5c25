"""`doctor --only`: the ids a user names, checked before anything is read against the ids the checks, the probes
and the baseline comparison declare. A selector that matches none of them would run no check and print "doctor
passed"; it is a usage error naming the closest ids instead.
"""

from __future__ import annotations

from ..errors import UsageError
from . import baseline, checks
from .checks import all_checks


def parse_only(only: str | None, *, level: int, baseline_file: bool = False) -> set[str] | None:
    """The selectors of `--only ID,...` (None: every finding). Raises UsageError for one that selects nothing."""
    if not only:
        return None
    wanted = {o.strip() for o in only.split(",") if o.strip()}
    if not wanted:
        raise UsageError(f"--only {only!r} names no id")
    level1 = [i for check in all_checks() for i in getattr(check, "ids", ())]
    level1.append(f"{checks.INTERNAL_AREA}.internal.*")  # run_checks' own finding for a crashed check
    for o in sorted(wanted):
        if matches(o, level1):
            continue
        # Only now the other families' ids: the probes' catalog is not imported on level 1's path.
        probe_ids = _probe_ids()
        if matches(o, probe_ids):
            if level < 2:
                raise UsageError(f"--only {o}: probe findings come only from the GPU probes",
                                  hint="add --level 2 (it measures this host's GPUs), or select a level-1 id")
            continue
        if matches(o, baseline.IDS):
            if not baseline_file:
                raise UsageError(f"--only {o}: baseline findings come only from a comparison",
                                  hint="add --baseline FILE (a saved `rocmkit doctor --json` run)")
            continue
        raise UsageError(f"--only {o}: no check has such an id", hint=_hint(o, level1 + probe_ids + list(baseline.IDS)))
    return wanted


def matches(selector: str, ids) -> bool:
    """A selector names an id, a prefix of ids ("gpu" → "gpu.kfd") or a member of a declared family
    ("env.arch.gfx942" of "env.arch.*")."""
    for i in ids:
        base = i[:-2] if i.endswith(".*") else i
        if selector == base or base.startswith(selector + ".") or (i.endswith(".*") and selector.startswith(base + ".")):
            return True
    return False


def _probe_ids() -> list[str]:
    from .probes.catalog import declared_ids
    from .probes.verdict import AREA

    # probe.gpu (no GPU to measure) and probe.internal (a probe crashed) come from the run, not the catalog
    return sorted(declared_ids()) + [f"{AREA}.gpu", f"{AREA}.internal"]


def _hint(selector: str, ids: list[str]) -> str:
    import difflib

    names = sorted({i[:-2] if i.endswith(".*") else i for i in ids})
    names += sorted({n.split(".")[0] for n in names})  # the areas, so "kernl" finds "kernel"
    close = difflib.get_close_matches(selector, names, n=3, cutoff=0.6)
    areas = ", ".join(sorted({n.split(".")[0] for n in names}))
    listing = f"ids start with one of: {areas} (`rocmkit doctor --json` lists every finding's id)"
    return f"did you mean {' or '.join(close)}? {listing}" if close else listing

