"""The arch table is edited as rocmkit/resources/archs.toml and read from archs.json (rocmkit/archs.py says why):
the JSON must be exactly what `python -m rocmkit.archs` writes from the TOML."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from rocmkit import archs

REPO = Path(__file__).resolve().parent.parent


def test_archs_json_is_archs_toml():
    written = Path(archs._resource("archs.json")).read_text(encoding="utf-8")
    assert written == archs.json_text(archs.toml_table()), \
        "rocmkit/resources/archs.json is not archs.toml's data: run `python -m rocmkit.archs` and commit both"


def test_python_m_rocmkit_archs_writes_the_json(tmp_path):
    # the command the failure above names, run on a copy of the package so the checkout is left as it is
    pkg = tmp_path / "rocmkit"
    (pkg / "resources").mkdir(parents=True)
    for name in ("__init__.py", "archs.py", "errors.py", "fileio.py", "tomlread.py"):
        (pkg / name).write_text((REPO / "rocmkit" / name).read_text())
    (pkg / "resources" / "archs.toml").write_text((REPO / "rocmkit/resources/archs.toml").read_text())
    subprocess.run([sys.executable, "-m", "rocmkit.archs"], cwd=tmp_path, check=True, timeout=60)
    assert (pkg / "resources" / "archs.json").read_text() == archs.json_text(archs.toml_table())

