"""One limiter per endpoint, shared by all sessions: request and token rates, 429 back-off, adaptive concurrency."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import openai

from hermes_runner.config import RateLimitConfig
from hermes_runner.errors import RemoteCallError
from hermes_runner.model.base import CallHook, Completion
from hermes_runner.model.retry import retry_after_seconds

log = logging.getLogger(__name__)

EPISODE_S = 5.0  # 429s closer together than this are one rate-limit episode
DECREASE = 0.75  # concurrency factor applied once per episode


class Pacer:
    """Spaces out events so that at most `per_minute` units pass in any minute (with a one-second burst)."""

    def __init__(self, per_minute: float):
        self.interval = 60.0 / per_minute  # seconds per unit
        self.burst = max(1.0, per_minute / 60.0)  # units allowed at once
        self._tat = 0.0  # theoretical arrival time of the next unit
        self._lock = asyncio.Lock()

    async def take(self, units: float = 1.0) -> float:
        """Wait until `units` may pass; return the time waited."""
        async with self._lock:
            now = time.monotonic()
            tat = max(self._tat, now)
            allowed_at = tat - (self.burst - 1.0) * self.interval
            wait = max(0.0, allowed_at - now)
            self._tat = tat + units * self.interval
        if wait:
            await asyncio.sleep(wait)
        return wait

    def give_back(self, units: float) -> None:
        """Correct an estimate that was too high."""
        self._tat -= units * self.interval


@dataclass
class LimiterState:
    calls: int = 0
    errors: int = 0  # failed attempts (retried or not)
    retries: int = 0  # attempts made again after a failed one
    rate_limited: int = 0
    waiting: int = 0  # sessions currently held by the limiter
    cooldown_until: float = 0.0
    concurrency: int = 0
    backoff_s: float = 0.0  # wall time covered by 429 cool-downs so far


@dataclass
class Throttle:
    """What the endpoint limiter reports: retries, 429s, back-off and concurrency."""

    retries: int = 0
    rate_limited: int = 0
    backoff_s: float = 0.0  # wall time spent in 429 cool-downs so far
    backing_off_s: float = 0.0  # left of the current cool-down
    waiting: int = 0  # sessions held by request/token pacing
    concurrency: int = 0
    max_concurrency: int = 0

    def describe(self) -> str:
        parts = []
        if self.retries:
            parts.append(f"retries {self.retries}")
        if self.rate_limited:
            parts.append(f"429s {self.rate_limited}")
        if self.backing_off_s > 0:
            parts.append(f"backing off {self.backing_off_s:.1f}s")
        if self.waiting:
            parts.append(f"throttled {self.waiting}")
        if self.concurrency < self.max_concurrency:
            parts.append(f"concurrency {self.concurrency}/{self.max_concurrency}")
        return " ".join(parts)


class EndpointLimiter(CallHook):
    """The model-call hook of one endpoint: paces requests and tokens per minute, and adapts concurrency."""

    def __init__(self, cfg: RateLimitConfig, max_concurrency: int, on_concurrency: Callable[[int], None] | None = None):
        self.cfg = cfg
        self.requests = Pacer(cfg.requests_per_minute) if cfg.requests_per_minute else None
        self.tokens = Pacer(cfg.tokens_per_minute) if cfg.tokens_per_minute else None
        self.max_concurrency = max_concurrency
        self.on_concurrency = on_concurrency
        self.state = LimiterState(concurrency=max_concurrency)
        self._last_episode = -1e9
        self._successes = 0
        self._pending_estimate: dict[int, float] = {}

    @property
    def throttled(self) -> bool:
        s = self.state
        return s.waiting > 0 or s.cooldown_until > time.monotonic() or s.concurrency < self.max_concurrency

    def throttle(self) -> Throttle:
        """What the progress display and the summary show of this endpoint."""
        s = self.state
        left = max(0.0, s.cooldown_until - time.monotonic())
        return Throttle(
            s.retries, s.rate_limited, s.backoff_s - left, left, s.waiting, s.concurrency, self.max_concurrency
        )

    def describe(self) -> str:
        return self.throttle().describe()

    async def before_call(self, estimate_tokens: float = 0.0) -> None:
        self.state.waiting += 1
        try:
            while (left := self.state.cooldown_until - time.monotonic()) > 0:
                await asyncio.sleep(left)
            if self.requests:
                await self.requests.take()
            if self.tokens and estimate_tokens:
                await self.tokens.take(estimate_tokens)
                self._pending_estimate[id(asyncio.current_task())] = estimate_tokens
        finally:
            self.state.waiting -= 1
        self.state.calls += 1

    def after_call(self, exc: BaseException | None, completion: Completion | None) -> None:
        task = id(asyncio.current_task())
        estimate = self._pending_estimate.pop(task, 0.0)
        if completion is not None:
            if self.tokens:
                actual = completion.usage.total_tokens
                if actual > estimate:
                    self.tokens._tat += (actual - estimate) * self.tokens.interval
                else:
                    self.tokens.give_back(estimate - actual)
            self._on_success()
            return
        if exc is None:
            return
        self.state.errors += 1
        if isinstance(exc, openai.APIStatusError) and exc.status_code == 429:
            self._on_rate_limited(retry_after_seconds(exc))
        elif isinstance(exc, RemoteCallError) and exc.status_code == 429:  # a call of a worker process
            self._on_rate_limited(exc.retry_after)

    def on_retry(self, exc: BaseException | None) -> None:
        """The client will make the failed call again (after its back-off)."""
        self.state.retries += 1

    def _on_rate_limited(self, retry_after: float | None) -> None:
        s = self.state
        s.rate_limited += 1
        now = time.monotonic()
        wait = retry_after if retry_after is not None else 1.0
        until = max(s.cooldown_until, now + min(wait, 300.0))
        s.backoff_s += until - max(s.cooldown_until, now)  # (overlapping cool-downs count once)
        s.cooldown_until = until
        if self.cfg.adaptive and now - self._last_episode > EPISODE_S:
            self._last_episode = now
            self._set_concurrency(max(self.cfg.min_concurrency, int(s.concurrency * DECREASE)))
        self._successes = 0

    def _on_success(self) -> None:
        s = self.state
        if not self.cfg.adaptive or s.concurrency >= self.max_concurrency:
            return
        self._successes += 1
        if self._successes >= s.concurrency:  # one clean round at this level: add one session
            self._successes = 0
            self._set_concurrency(s.concurrency + 1)

    def _set_concurrency(self, n: int) -> None:
        n = max(1, min(n, self.max_concurrency))
        if n != self.state.concurrency:
            log.debug("rate limiting: concurrency %d -> %d", self.state.concurrency, n)
            self.state.concurrency = n
            if self.on_concurrency:
                self.on_concurrency(n)
