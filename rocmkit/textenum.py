"""One base for rocmkit's named choices: members compare equal to their text, print and format as it (as
enum.StrEnum does from Python 3.11; rocmkit supports 3.10), and JSON writes them as strings."""

from __future__ import annotations

import enum


class TextEnum(str, enum.Enum):
    def __str__(self) -> str:
        return self.value

    def __format__(self, spec: str) -> str:
        return format(self.value, spec)
