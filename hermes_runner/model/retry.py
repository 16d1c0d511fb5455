"""Retries of endpoint calls: which errors are worth another attempt, how long to wait, one `retrying` loop.

Chat calls (model/client.py) and image calls (tools/backends/endpoints.py) retry the same way, through
`tenacity` only (the SDK's own retries are off)."""

from __future__ import annotations

import email.utils
import errno
import time
from collections.abc import Callable

import openai
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, wait_exponential_jitter
from tenacity.stop import StopBaseT

from hermes_runner.config import ModelConfig
from hermes_runner.errors import BrokenStream, EmptyResponse, MalformedReply

RETRYABLE_STATUS = {408, 409, 429}
REFUSED_MAX_WAIT_S = 2.0  # waits between retries of a refused connection: 0.5 s, 1 s, 2 s, 2 s, ...


def connection_refused(exc: BaseException | None) -> bool:
    """Whether an error was caused by a refused connection: the SDK reports it as `APITimeoutError` ("Request
    timed out.") on its aiohttp transport, with the ConnectionRefusedError (ECONNREFUSED) down the cause chain;
    asyncio joins the refusals of several addresses (localhost: ::1 and 127.0.0.1) into one OSError."""
    seen = 0
    while exc is not None and seen < 16:
        if isinstance(exc, ConnectionRefusedError) or getattr(exc, "errno", None) == errno.ECONNREFUSED:
            return True
        if isinstance(exc, OSError) and _all_refused(str(exc)):
            return True
        exc, seen = getattr(exc, "os_error", None) or exc.__cause__ or exc.__context__, seen + 1
    return False


def _all_refused(text: str) -> bool:
    """`Multiple exceptions: [Errno 111] ..., [Errno 111] ...` (asyncio's create_connection)."""
    return text.startswith("Multiple exceptions:") and text.count("[Errno") == text.count(
        f"[Errno {errno.ECONNREFUSED}]"
    )


def is_retryable(exc: BaseException) -> bool:
    if isinstance(exc, (openai.APIConnectionError, EmptyResponse, MalformedReply)):  # includes APITimeoutError
        return True
    if isinstance(exc, BrokenStream):
        return exc.status is None or exc.status in RETRYABLE_STATUS or exc.status >= 500
    if isinstance(exc, openai.APIStatusError):
        if exc.status_code == 429 and "exceeded your current quota" in str(exc).lower():
            return False  # out of credit: waiting does not help
        return exc.status_code in RETRYABLE_STATUS or exc.status_code >= 500
    return False


def retry_after_seconds(exc: BaseException | None) -> float | None:
    """The server's requested delay (retry-after-ms, retry-after seconds or HTTP date)."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if not headers:
        return None
    for name, scale in (("retry-after-ms", 1000.0), ("retry-after", 1.0)):
        value = headers.get(name)
        if value is None:
            continue
        try:
            return max(0.0, float(value) / scale)
        except ValueError:
            parsed = email.utils.parsedate_to_datetime(value) if name == "retry-after" else None
            if parsed is not None:
                return max(0.0, parsed.timestamp() - time.time())
    return None


class RetryAfterWait:
    """Wait what the server asks for (capped), else exponential backoff with jitter."""

    def __init__(self, initial: float, cap: float):
        self._cap = cap
        self._backoff = wait_exponential_jitter(multiplier=initial, max=min(60.0, cap), jitter=initial)

    def __call__(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        if connection_refused(exc):
            return min(0.5 * 2 ** (state.attempt_number - 1), REFUSED_MAX_WAIT_S, self._cap)
        asked = retry_after_seconds(exc)
        if asked is not None:
            return min(asked, self._cap)
        return self._backoff(state)


def retrying(
    cfg: ModelConfig,
    stop: StopBaseT | None = None,
    before_sleep: Callable[[RetryCallState], None] | None = None,
) -> AsyncRetrying:
    """The retry loop of one call to `cfg`'s endpoint: up to `max_retries` retries of retryable errors (or
    until `stop`), waiting what the server asks for, else backing off; the last error is raised."""
    attempts = stop_after_attempt(cfg.max_retries + 1)
    return AsyncRetrying(
        stop=attempts | stop if stop is not None else attempts,
        wait=RetryAfterWait(cfg.retry_initial_wait_s, cfg.retry_max_wait_s),
        retry=retry_if_exception(is_retryable),
        reraise=True,
        before_sleep=before_sleep,
    )
