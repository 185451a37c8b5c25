"""The fleet preflight, `rocmkit doctor --fleet`: the doctor on every node of a Slurm allocation at once (run.py),
the nodes compared with each other and with the fleet's median (compare.py, pure), and the report a person and a
job script read: JSON, one self-contained HTML page, passing/failing node lists and an --exclude line (report.py,
html.py)."""
