"""Machine-readable output: every document carries `"schema": "rocmkit.<kind>/v1"`."""

from __future__ import annotations

import json
from typing import Any


def document(kind: str, body: dict[str, Any], version: int = 1) -> dict[str, Any]:
    """Wrap `body` as a versioned rocmkit document of the given kind."""
    return {"schema": f"rocmkit.{kind}/v{version}", **body}


def dumps(doc: Any) -> str:
    """The one JSON style rocmkit prints and writes: indented, stable key order as built."""
    return json.dumps(doc, indent=2, default=str) + "\n"
