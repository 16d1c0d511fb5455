"""`require(name)`: fail (or skip, when opted out) the current test if the machine lacks a requirement."""

from __future__ import annotations

import functools

import pytest

from tests.helpers import system


@functools.cache
def _missing(name: str) -> str | None:
    req = system.BY_NAME[name]
    return system.explain(req, missing) if (missing := req.missing()) else None


def require(name: str) -> None:
    """Fail the current test (or skip it, when its opt-out variable is set) if requirement `name` is missing."""
    req = system.BY_NAME[name]
    if req.opted_out():
        pytest.skip(f"{req.opt_out}=1: {req.purpose} not required")
    if (msg := _missing(name)) is not None:
        pytest.fail(msg, pytrace=False)
