"""What an executor is: the `Executor` Protocol and the `Work` it maps (one prompt -> one Outcome)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
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
