"""Executors keep `num_workers` sessions in flight and stream outcomes back as they finish."""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from hermes_runner.errors import ConfigError

if TYPE_CHECKING:
    from hermes_runner.budget import RunBudget
    from hermes_runner.config import RunConfig
    from hermes_runner.model.ratelimit import EndpointLimiter
    from hermes_runner.worker import WorkerSpec

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


Work = Callable[[Any], Awaitable[Any]]


@asynccontextmanager
async def open_executor(
    cfg: RunConfig, spec: WorkerSpec, limiter: EndpointLimiter, budget: RunBudget
) -> AsyncIterator[tuple[Executor, Work]]:
    """The configured executor and the `work` to map with it (one prompt -> one Outcome).

    In-process, `limiter` meters every call of the run's model, and `budget` those of tools' models
    (vision, MoA) too. On Ray, each actor paces its share of the rate limit itself, and the budget is
    charged with each prompt's usage as it comes back.
    """
    backend = cfg.executor.backend
    if backend == "local":
        from hermes_runner.worker import session_runner

        async with session_runner(spec, hooks=[limiter, budget], tool_hooks=[budget.tools]) as runner:
            yield LocalExecutor(cfg.num_workers), runner
    elif backend == "ray":
        from hermes_runner.executor_ray import ray_executor

        async with ray_executor(cfg, spec, budget) as (executor, work):
            yield executor, work
    else:
        raise ConfigError(f"unknown executor.backend {backend!r} (local, ray)")
