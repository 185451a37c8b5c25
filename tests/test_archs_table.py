"""The arch table is edited as rocmkit/resources/archs.toml and read from archs.json (rocmkit/archs.py says why):
the JSON must be exactly what `python -m rocmkit.archs` writes from the TOML. And the table's ROCm minimums compare
as dotted releases."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

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



@pytest.mark.parametrize("version, supported", [
    ("6.0.0", True), ("6.0", True), ("6", True), ("7.0.2", True), ("10.0", True),  # 6.0 is 6.0.0; 10 > 6 as numbers
    ("6.4.1-120", True),  # /opt/rocm/.info/version carries a build number
    ("5.7.1", False), ("5.99", False),
    ("", False), ("abc", False), ("6.x", False), ("6.0rc1", False), ("٦.0", False),  # not a dotted release
])
def test_rocm_supports_compares_dotted_releases(version, supported):
    gfx942 = archs.all_archs()["gfx942"]
    assert gfx942.min_rocm == "6.0.0"
    assert archs.rocm_supports(version, gfx942) is supported
