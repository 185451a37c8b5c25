"""TOML reading with errors that name the file (tomllib on 3.11+, tomli before)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

from .errors import InputFileError, UsageError


def load_toml_text(text: str, origin: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputFileError(origin, "", f"not valid TOML: {exc}") from None


def load_toml_file(path: str | Path) -> dict[str, Any]:
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(f"{p}: no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{p}: cannot read: {exc}") from None
    return load_toml_text(text, str(p))
