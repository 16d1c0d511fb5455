"""What an executor is: the `Executor` Protocol, the `Work` it maps (one prompt -> one Outcome), and the
redispatch loop of those whose sessions run in slots that may die."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Protocol, Self, TypeVar

from hermes_runner.agent.session import Failure, Outcome
from hermes_runner.dataset import Prompt

log = logging.getLogger(__name__)

WORKER_LOST = "WorkerLost"

T = TypeVar("T")
R = TypeVar("R")


class Executor(Protocol):
    def map_unordered(self, work: Callable[[T], Awaitable[R]], items: Iterator[T]) -> AsyncIterator[R]:
        """Run `work` over `items` lazily, at most `num_workers` at a time, yielding in finish order."""

    def stop(self) -> None:
        """Start no new item; in-flight ones finish."""

    def cancel(self) -> None:
        """Start no new item and cancel the in-flight ones."""

    @property
    def in_flight(self) -> int: ...


Work = Callable[[Any], Awaitable[Any]]


@dataclass
class Slot:
    """A place sessions run in (a worker process, a Ray actor): its number, state and how many sessions it holds."""

    number: int
    state: str = "starting"  # starting | ready | ... | dead
    load: int = 0


class Dispatcher:
    """The redispatch loop of the executors whose sessions run in slots that may die (worker processes, Ray
    actors): each prompt goes to the least-loaded ready slot; one lost with its slot is sent again (up to
    `executor.max_redispatch` times), then recorded as failed. The executor gives `_send`, `_gone`, `_cap`."""

    noun = "worker"  # what a slot is, in log lines and errors
    lost_errors: tuple[type[BaseException], ...] = ()  # what `_send` raises when the slot died under the prompt
    slots: Sequence[Slot]
    max_redispatch: int
    _changed: asyncio.Condition
    _stopping: bool
    stop: Callable[[], None]  # (the executor's own: start no new item)

    def _cap(self) -> int:
        """Sessions one slot may hold."""

    async def _send(self, slot: Slot, prompt: Prompt, started: float) -> Outcome: ...

    async def start(self) -> None: ...

    async def close(self) -> None: ...

    @asynccontextmanager
    async def running(self) -> AsyncIterator[tuple[Self, Work]]:
        """The executor started, and its `work`; closed on exit."""
        try:
            await self.start()
            yield self, self.work
        finally:
            await self.close()

    def _gone(self, slot: Slot, exc: BaseException) -> str:
        """The slot died under a prompt (`exc`): what to say of it."""
        return str(exc)

    async def work(self, prompt: Prompt) -> Outcome:
        """Run one prompt in some slot; send it again if that slot dies."""
        started, lost = time.monotonic(), 0
        while True:
            slot = await self._acquire()
            if slot is None:
                if not self._stopping:
                    log.error("no %s is left: no new prompt starts (rerun to continue)", self.noun)
                    self.stop()
                return failure(prompt, WORKER_LOST, f"no {self.noun} is left", started)
            try:
                return await self._send(slot, prompt, started)
            except self.lost_errors as exc:
                lost += 1
                why = self._gone(slot, exc)
                if lost > self.max_redispatch:
                    bound = f"lost with its {self.noun} {lost} times (executor.max_redispatch={self.max_redispatch})"
                    return failure(prompt, WORKER_LOST, f"{why}; {bound}", started)
                log.warning("prompt %d lost with %s %d (%s): sent again", prompt.index, self.noun, slot.number, why)
            finally:
                await self._release(slot)

    async def _acquire(self) -> Slot | None:
        """The least-loaded ready slot holding fewer than `_cap()` sessions, its load taken (waits for one);
        None once every slot is dead."""
        async with self._changed:
            while True:
                limit = self._cap()
                free = [s for s in self.slots if s.state == "ready" and s.load < limit]
                if free:
                    slot = min(free, key=lambda s: s.load)
                    slot.load += 1
                    return slot
                if all(s.state == "dead" for s in self.slots):
                    return None
                await self._changed.wait()

    async def _release(self, slot: Slot) -> None:
        """Give back a session's place in `slot` (at once: a cancellation while waiting for the lock keeps it
        given back), and wake whoever waits for one."""
        slot.load = max(0, slot.load - 1)
        async with self._changed:
            self._changed.notify_all()


def failure(prompt: Prompt, error_type: str, error: str, started: float) -> Failure:
    """The Failure of a prompt its executor could not run to an outcome."""
    return Failure(prompt, error_type, error, duration_s=time.monotonic() - started)
