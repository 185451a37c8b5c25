"""Level 2 of `rocmkit doctor`, the GPU probes: measure.py (GEMM, memory, copies, all-reduce), p2p.py,
megatron.py and vram.py measure; judge.py judges the figures on the verdict lines of verdict.py; run.py
runs them all (`from rocmkit.host.probes import run as probes`; probes.measure, findings_for, run_probes).

vram.py, megatron.py and allreduce_ranks.py also run by name inside a target (`python -m
rocmkit.host.probes.vram ARGS.json`): importing this package must not import them, so it exports nothing.
It once handed out run.py's functions through a module `__getattr__`, and `measure` came back as the
submodule measure.py once run.py had imported it (tests/test_exports.py holds every package to that rule).
"""
