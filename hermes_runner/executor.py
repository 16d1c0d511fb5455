"""Executors keep `num_workers` sessions in flight and stream outcomes back as they finish."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from hermes_runner.errors import ConfigError

if TYPE_CHECKING:
    from hermes_runner.budget import RunBudget
    from hermes_runner.config import RunConfig
    from hermes_runner.ratelimit import EndpointLimiter
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
    """Sessions as asyncio tasks in this process (one shared HTTP pool, no per-prompt threads)."""

    def __init__(self, num_workers: int):
        if num_workers < 1:
            raise ValueError("num_workers must be >= 1")
        self.num_workers = num_workers
        self._stopping = False
        self._tasks: set[asyncio.Task] = set()
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

    async def map_unordered(self, work: Callable[[T], Awaitable[R]], items: Iterator[T]) -> AsyncIterator[R]:
        exhausted = False
        try:
            while True:
                while not exhausted and not self._stopping and len(self._tasks) < self.num_workers:
                    item = next(items, None)
                    if item is None:
                        exhausted = True
                        break
                    self._tasks.add(asyncio.ensure_future(work(item)))
                if not self._tasks:
                    return
                waker = asyncio.ensure_future(self._wake.wait())
                done, _ = await asyncio.wait(self._tasks | {waker}, return_when=asyncio.FIRST_COMPLETED)
                waker.cancel()
                self._wake.clear()
                for t in done - {waker}:
                    self._tasks.discard(t)
                    if t.cancelled():
                        continue
                    yield t.result()
        finally:
            for t in self._tasks:
                t.cancel()
            if self._tasks:
                await asyncio.gather(*self._tasks, return_exceptions=True)
            self._tasks.clear()


Work = Callable[[Any], Awaitable[Any]]


@asynccontextmanager
async def open_executor(
    cfg: RunConfig, spec: WorkerSpec, limiter: EndpointLimiter, budget: RunBudget
) -> AsyncIterator[tuple[Executor, Work]]:
    """The configured executor and the `work` to map with it (one prompt -> one Outcome).

    In-process, `limiter` and `budget` meter every model call. On Ray, each actor paces its share
    of the rate limit itself and the budget is charged with each prompt's usage as it comes back.
    """
    backend = cfg.executor.backend
    if backend == "local":
        from hermes_runner.worker import session_runner

        async with session_runner(spec, hooks=[limiter, budget]) as runner:
            yield LocalExecutor(cfg.num_workers), runner
    elif backend == "ray":
        from hermes_runner.executor_ray import ray_executor

        async with ray_executor(cfg, spec, budget) as (executor, work):
            yield executor, work
    else:
        raise ConfigError(f"unknown executor.backend {backend!r} (local, ray)")
