"""What an executor is: the `Executor` Protocol and the `Work` it maps (one prompt -> one Outcome)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from typing import Any, Protocol, TypeVar

T = TypeVar("T")
R = TypeVar("R")


class Executor(Protocol):
    def map_unordered(self, work: Callable[[T], Awaitable[R]], items: Iterator[T]) -> AsyncIterator[R]:
        """Run `work` over `items` lazily, at most `num_workers` at a time, yielding in finish order."""
        ...

    def stop(self) -> None:
        """Start no new item; in-flight ones finish."""
        ...

    def cancel(self) -> None:
        """Start no new item and cancel the in-flight ones."""
        ...

    @property
    def in_flight(self) -> int: ...


Work = Callable[[Any], Awaitable[Any]]


class Slot(Protocol):
    """A place sessions run in (a worker process, a Ray actor): its state and how many sessions it holds."""

    state: str  # ready | ... | dead
    load: int


S = TypeVar("S", bound=Slot)


async def acquire(changed: asyncio.Condition, slots: Sequence[S], cap: Callable[[], int]) -> S | None:
    """The least-loaded ready slot holding fewer than `cap()` sessions, its load taken (waits for one on
    `changed`); None once every slot is dead."""
    async with changed:
        while True:
            limit = cap()
            free = [s for s in slots if s.state == "ready" and s.load < limit]
            if free:
                slot = min(free, key=lambda s: s.load)
                slot.load += 1
                return slot
            if all(s.state == "dead" for s in slots):
                return None
            await changed.wait()


async def release(changed: asyncio.Condition, slot: Slot) -> None:
    """Give back a session's place in `slot` (at once: a cancellation while waiting for the lock keeps it given
    back), and wake whoever waits for one."""
    slot.load = max(0, slot.load - 1)
    async with changed:
        changed.notify_all()
