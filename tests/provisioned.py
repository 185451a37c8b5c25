"""What CI's provisioning made, read from the environment: a failure where CI provisioned it
(ROCMKIT_REQUIRE_<AREA>=1), a skip elsewhere."""

from __future__ import annotations

import os

import pytest


def provisioned(var: str, what: str, require: str) -> str:
    """The value `var` that a provisioning step exported (`what` names the step and what it makes)."""
    value = os.environ.get(var)
    if not value:
        message = f"{var} is not set: {what}"
        if os.environ.get(f"ROCMKIT_REQUIRE_{require}") == "1":
            pytest.fail(message)
        pytest.skip(message)
    return value
