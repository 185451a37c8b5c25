"""Runs the cells of the stack × command matrix (tests/test_stack_matrix.py) in one process, with click's
CliRunner, against whichever rocmkit `import rocmkit` finds: the test runs it as a script with only an installed
wheel on PYTHONPATH and a temporary folder as the working folder, so neither the source tree nor the
repository root is what the commands see.

    python stackmatrix.py CELLS.json RESULTS.json

CELLS.json: [{"id", "argv", "env", "cwd", "save"}]; in order (a cell may name a file an earlier cell saved). "cwd":
the folder the cell runs in (relative: under the working folder; default the working folder itself). "save":
write the cell's stdout, parsed as JSON, to that path, less the keys it names after a colon
("out/x.json:manifest" saves doc["manifest"]). RESULTS.json: {id: {"exit", "stdout", "stderr", "traceback"}},
plus "__rocmkit__": the file rocmkit was imported from.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path


def main(cells_path: str, results_path: str) -> None:
    from click.testing import CliRunner

    import rocmkit
    from rocmkit.cli import cli

    results: dict = {"__rocmkit__": rocmkit.__file__}
    home = os.getcwd()
    for cell in json.loads(Path(cells_path).read_text()):
        os.chdir(os.path.join(home, cell.get("cwd") or "."))
        runner = CliRunner()
        start = time.monotonic()
        r = runner.invoke(cli, cell["argv"], env=cell.get("env") or None, catch_exceptions=True)
        tb = None
        if r.exception is not None and not isinstance(r.exception, SystemExit):
            tb = "".join(traceback.format_exception(type(r.exception), r.exception, r.exception.__traceback__))
        results[cell["id"]] = {"exit": r.exit_code, "stdout": r.stdout, "stderr": r.stderr, "traceback": tb,
                             "seconds": round(time.monotonic() - start, 2)}
        if cell.get("save") and r.exit_code == 0:
            path, _, key = cell["save"].partition(":")
            doc = json.loads(r.stdout)
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            Path(path).write_text(json.dumps(doc[key] if key else doc))
    Path(results_path).write_text(json.dumps(results))


if __name__ == "__main__":
    main(*sys.argv[1:3])
