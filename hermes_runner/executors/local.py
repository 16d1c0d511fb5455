"""The in-process executor: sessions as asyncio tasks."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator

from hermes_runner.executors.base import R, T


class LocalExecutor:
    """Sessions as asyncio tasks in this process (one shared HTTP pool, no per-prompt threads).

    Each finished task queues itself through a done-callback, so a completion costs O(1)
    however many sessions are in flight (no `asyncio.wait` over all of them per event).
    """

    def __init__(self, num_workers: int):
        if num_workers < 1:
            raise ValueError("num_workers must be >= 1")
        self.num_workers = num_workers
        self._stopping = False
        self._tasks: set[asyncio.Task] = set()
        self._finished: deque[asyncio.Task] = deque()
        self._wake = asyncio.Event()

    @property
    def in_flight(self) -> int:
        return len(self._tasks)

    def stop(self) -> None:
        self._stopping = True
        self._wake.set()

    def cancel(self) -> None:
        self.stop()
        for t in self._tasks:
            t.cancel()

    def set_limit(self, n: int) -> None:
        """Change how many sessions may be in flight (adaptive concurrency)."""
        self.num_workers = max(1, n)
        self._wake.set()

    def _done(self, task: asyncio.Task) -> None:
        self._tasks.discard(task)
        self._finished.append(task)
        self._wake.set()

    async def map_unordered(self, work: Callable[[T], Awaitable[R]], items: Iterator[T]) -> AsyncIterator[R]:
        exhausted = False
        try:
            while True:
                while self._finished:  # results first: a consumer that stops on one starts nothing more
                    t = self._finished.popleft()
                    if not t.cancelled():
                        yield t.result()
                while not exhausted and not self._stopping and len(self._tasks) < self.num_workers:
                    item = next(items, None)
                    if item is None:
                        exhausted = True
                        break
                    task = asyncio.ensure_future(work(item))
                    self._tasks.add(task)
                    task.add_done_callback(self._done)
                if not self._tasks and not self._finished:
                    return
                self._wake.clear()
                if not self._finished:
                    await self._wake.wait()
        finally:
            for t in self._tasks:
                t.cancel()
            if self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)
            self._tasks.clear()
            self._finished.clear()
