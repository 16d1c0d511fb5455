"""Pre-started containers, so a prompt does not wait for `docker start` (~0.3 s).

A pooled container is never reused: each one serves exactly one prompt, then is removed like
any other. Pools are per spec (image, working dir, user) and only for specs asked for more
than once, so a dataset with one image per row starts nothing it will not use; the total of
idle containers is capped, the oldest going first.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Hashable

log = logging.getLogger(__name__)


class WarmPool:
    def __init__(
        self,
        size: int,
        create: Callable[[Hashable], Awaitable[str]],
        remove: Callable[[str], Awaitable[None]],
        max_age_s: float,
    ):
        self.size = size
        self.max_idle = 4 * size
        self._create = create
        self._remove = remove
        self._max_age = max_age_s
        self._ready: dict[Hashable, deque[tuple[str, float]]] = {}
        self._asked: Counter = Counter()
        self._filling: Counter = Counter()
        self._tasks: set[asyncio.Task] = set()
        self._closed = False

    def take(self, spec: Hashable) -> str | None:
        """A started container for `spec`, or None; tops the pool up either way."""
        if not self.size or self._closed:
            return None
        self._asked[spec] += 1
        q = self._ready.setdefault(spec, deque())
        got = None
        while q and got is None:
            cid, born = q.popleft()
            if time.monotonic() - born < self._max_age:
                got = cid
            else:
                self._spawn(self._remove(cid))
        if self._asked[spec] >= 2:
            for _ in range(self.size - len(q) - self._filling[spec]):
                self._filling[spec] += 1
                self._spawn(self._fill(spec))
        return got

    def _spawn(self, coro: Awaitable) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _fill(self, spec: Hashable) -> None:
        try:
            cid = await self._create(spec)
        except Exception as exc:  # noqa: BLE001 - the prompt that needs it will create its own
            log.warning("could not pre-start a container: %s", exc)
            return
        finally:
            self._filling[spec] -= 1
        if self._closed:
            await self._remove(cid)
            return
        self._ready[spec].append((cid, time.monotonic()))
        while sum(len(q) for q in self._ready.values()) > self.max_idle:
            oldest = min((q for q in self._ready.values() if q), key=lambda q: q[0][1])
            self._spawn(self._remove(oldest.popleft()[0]))

    async def close(self) -> None:
        """Remove every idle container and wait for fills under way."""
        self._closed = True
        idle = [cid for q in self._ready.values() for cid, _ in q]
        self._ready.clear()
        await asyncio.gather(*(self._remove(cid) for cid in idle), return_exceptions=True)
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
