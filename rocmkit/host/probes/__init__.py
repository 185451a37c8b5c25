"""Level 2 of `rocmkit doctor`, the GPU probes: measure.py (GEMM, memory, copies, all-reduce), p2p.py,
megatron.py and vram.py measure; judge.py judges the figures on the verdict lines of verdict.py; run.py
runs them all (measure, findings_for, run_probes).

vram.py, megatron.py and allreduce_ranks.py also run by name inside a target (`python -m
rocmkit.host.probes.vram ARGS.json`): importing this package must not import them, so run.py's entry points
are named here but imported only when asked for.
"""

RUN = ("measure", "findings_for", "run_probes")


def __getattr__(name: str):
    if name in RUN:
        from . import run

        return getattr(run, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
