"""Waiting on a condition, never on the clock: a test polls until what it needs holds, with a generous timeout."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class WaitTimeout(AssertionError):
    """The condition did not hold within the timeout."""


def wait_for(
    pred: Callable[[], T],
    timeout: float,
    what: str = "the condition",
    *,
    state: Callable[[], object] | None = None,
    gone: Callable[[], str | None] | None = None,
    interval: float = 0.05,
) -> T:
    """Poll `pred()` until it is truthy and return its value (checked at least once, even with timeout 0).

    Fails with `WaitTimeout` at the timeout, saying what it waited for and what `state()` says then; fails at
    once when `gone()` returns a message (e.g. the process that was to get there exited)."""
    end = time.monotonic() + timeout
    while True:
        if got := pred():
            return got
        if gone is not None and (why := gone()) is not None:
            raise AssertionError(f"{why} before {what}")
        if time.monotonic() >= end:
            seen = f" ({state()})" if state is not None else ""
            raise WaitTimeout(f"timed out after {timeout:g} s waiting for {what}{seen}")
        time.sleep(interval)


def exited(proc) -> Callable[[], str | None]:
    """A `gone` for `wait_for`: the subprocess (a Popen) exited, with its code."""
    return lambda: None if proc.poll() is None else f"the process exited ({proc.returncode})"
