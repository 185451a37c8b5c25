"""The wheel ships every package of the source tree (an unlisted package installs nowhere), the
templates and the data files."""

from __future__ import annotations

import sys
from pathlib import Path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

REPO = Path(__file__).resolve().parent.parent


def test_every_python_package_is_listed_in_pyproject():
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    on_disk = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "rocmkit").rglob("__init__.py")}
    assert on_disk - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"
    assert "rocmkit.templates" in listed
