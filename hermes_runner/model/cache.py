"""The response cache: every paid model reply on disk (diskcache, SQLite), replayed by any later identical call.

A call's key is the sha256 of a canonical JSON of everything that determines the reply: the endpoint's identity,
the request body as sent (model, messages, tools, tool_choice, sampling parameters, extra_body, reasoning; the
stream flag left out: a streamed reply is the same reply; a budget note's seconds left out, model/note.py), the run's seed, the sample index of the prompt (so k
samples stay k draws) and how many identical calls the same attempt made before. No header and no API key is
part of a key or of a value; errors are never stored. A reply is stored as soon as it arrives, before the
session uses it, so a run killed after the call replays it on resume instead of paying for it again.

A hit makes no call: the meters of the wrapped model (rate limiter, run budget) never see it, and its usage is
`saved`, not spent. A cache that cannot be opened, read or written (corrupt, full, read-only) turns into misses
with one warning; the run goes on.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import sqlite3
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from hermes_runner.config import SERVED, CacheConfig, CacheMode, ModelConfig
from hermes_runner.model.base import ChatModel, Completion
from hermes_runner.model.note import keyed
from hermes_runner.usage import Usage

log = logging.getLogger(__name__)

ENV_DIR = "HERMES_RUNNER_CACHE_DIR"  # the default cache.dir when set
KEY_VERSION = 1  # part of every key: a change of what a key covers starts a fresh keyspace
UNKEYED = ("stream", "stream_options")  # request fields that do not change the reply
BUSY_TIMEOUT_S = 10.0  # SQLite busy timeout: a cache locked longer than this is a miss, not a stalled call


def default_dir() -> Path:
    """Where the cache lives unless cache.dir says: shared by every run of this user."""
    if env := os.environ.get(ENV_DIR):
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "hermes-runner" / "responses"


def cache_dir(cfg: CacheConfig) -> Path:
    return Path(cfg.dir).expanduser() if cfg.dir else default_dir()


@dataclass
class CallScope:
    """The calls of one attempt of one prompt: its sample index, and the calls it made so far by key."""

    sample: int = 0
    seen: dict[str, int] = field(default_factory=dict)


# Set by each session attempt in its own task (agent/session.py): calls outside one are sample 0, uncounted.
CALL_SCOPE: ContextVar[CallScope | None] = ContextVar("hermes_call_scope", default=None)


def endpoint_identity(model: ModelConfig) -> str:
    """The endpoint as the key sees it: the base URL normalised (scheme and host lower-case, no trailing slash),
    or for a served model its weights (the served URL is a new port every run)."""
    if model.base_url == SERVED or model.serve.enabled:
        return f"served:{model.serve.model_path or model.name}"
    parts = urlsplit(model.base_url.strip())
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path.rstrip("/"), parts.query, ""))


def fingerprint(identity: str, body: dict, seed: int, sample: int, occurrence: int) -> str:
    """The key of one call: sha256 of the canonical JSON of what determines its reply."""
    request = {k: v for k, v in body.items() if k not in UNKEYED}
    canon = json.dumps(
        {"v": KEY_VERSION, "endpoint": identity, "request": request, "seed": seed, "sample": sample, "n": occurrence},
        sort_keys=True,
        ensure_ascii=False,
        separators=(",", ":"),
        default=str,
    )
    return hashlib.sha256(canon.encode()).hexdigest()


def call_key(identity: str, body: dict, seed: int) -> str:
    """The fingerprint of this call in its prompt's attempt (CALL_SCOPE): the same call again in one attempt is a
    new draw, with a key of its own."""
    scope = CALL_SCOPE.get()
    base = fingerprint(identity, body, seed, scope.sample if scope else 0, 0)
    if scope is None:
        return base
    n = scope.seen.get(base, 0)
    scope.seen[base] = n + 1
    return base if n == 0 else fingerprint(identity, body, seed, scope.sample, n)


def encode(completion: Completion) -> str:
    """What is stored of a reply: message, finish reason, usage, answering model (never retries or errors)."""
    return json.dumps(
        {
            "message": completion.message,
            "finish_reason": completion.finish_reason,
            "usage": completion.usage.as_dict(),
            "model": completion.model,
        },
        ensure_ascii=False,
    )


def decode(value: str) -> Completion:
    d = json.loads(value)
    return Completion(d["message"], d.get("finish_reason"), Usage.from_dict(d.get("usage")), 0, d.get("model") or "")


class ResponseCache:
    """The diskcache store of one process; every failure of it is a miss (or a reply not kept), said once."""

    def __init__(self, cfg: CacheConfig):
        self.cfg = cfg
        self.dir = cache_dir(cfg)
        self.reads = cfg.mode in (CacheMode.readwrite, CacheMode.read)
        self.writes = cfg.mode in (CacheMode.readwrite, CacheMode.write)
        self._warned = False
        self.store = None
        import diskcache  # here: a run with the cache off does not pay its import (~0.1 s)

        # what turns a call into a miss: SQLite's errors (corrupt, full, read-only), the file system's, a lock
        # held past BUSY_TIMEOUT_S
        self.errors: tuple[type[BaseException], ...] = (sqlite3.Error, OSError, diskcache.Timeout)
        try:
            self.store = open_store(self.dir, cfg.size_limit)
        except self.errors as exc:
            self._warn("cannot be opened", exc)

    def _warn(self, what: str, exc: BaseException) -> None:
        if not self._warned:
            self._warned = True
            log.warning(
                "response cache %s %s (%s: %s): calls it cannot answer go to the endpoint, the run goes on "
                "(`hermes-cache clear --dir %s` starts it afresh)",
                self.dir, what, type(exc).__name__, exc, self.dir,
            )  # fmt: skip
        log.debug("response cache error", exc_info=exc)

    def get(self, key: str) -> Completion | None:
        if self.store is None or not self.reads:
            return None
        try:
            value = self.store.get(key)
            return None if value is None else decode(value)
        except (*self.errors, ValueError, KeyError, TypeError) as exc:
            self._warn("cannot be read", exc)
            return None

    def put(self, key: str, completion: Completion) -> None:
        if self.store is None or not self.writes:
            return
        try:
            self.store.set(key, encode(completion), expire=self.cfg.expire)
        except self.errors as exc:
            self._warn("cannot be written", exc)

    def close(self) -> None:
        if self.store is not None:
            self.store.close()


def open_store(directory: Path, size_limit: int = 4 * 2**30):
    """The diskcache Cache in `directory` (made if missing), least-recently-stored eviction beyond `size_limit`."""
    import diskcache

    return diskcache.Cache(
        str(directory), size_limit=size_limit, eviction_policy="least-recently-stored", timeout=BUSY_TIMEOUT_S
    )


def remove_store(directory: Path) -> None:
    """Remove a cache SQLite cannot read (its database and value files): the next run starts a new one."""
    import shutil

    for path in directory.iterdir():
        if path.name in ("cache.db", "cache.db-wal", "cache.db-shm"):
            path.unlink()
        elif path.is_dir() and len(path.name) == 2 and all(c in "0123456789abcdef" for c in path.name):
            shutil.rmtree(path)  # diskcache's files of large values


def open_cache(cfg: CacheConfig) -> ResponseCache | None:
    """The run's cache, or None when cache=off."""
    return None if cfg.mode == CacheMode.off else ResponseCache(cfg)


class CachedModel:
    """A `ChatModel` that answers a call from the cache when it can, and stores every reply the wrapped model
    gets. The wrapped model's hooks (rate limiter, budget) see only the calls it really makes."""

    def __init__(
        self,
        inner: ChatModel,
        cache: ResponseCache,
        identity: str,
        seed: int,
        request_body: Callable[[list[dict], list[dict]], dict] | None = None,
    ):
        self.inner = inner
        self.cache = cache
        self.identity = identity
        self.seed = seed
        # the request as sent (what the key covers): the client's own, e.g. OpenAIChatModel.request_body
        self.request_body = request_body or inner.request_body  # type: ignore[attr-defined]

    def key(self, messages: list[dict], tools: list[dict]) -> str:
        body = self.request_body(keyed(messages), tools)  # a budget note's seconds left out (model/note.py)
        return call_key(self.identity, body, self.seed)

    async def complete(self, messages: list[dict], tools: list[dict]) -> Completion:
        key = self.key(messages, tools)
        if self.cache.reads:
            hit = await asyncio.to_thread(self.cache.get, key)
            if hit is not None:
                hit.cached = True
                return hit
        completion = await self.inner.complete(messages, tools)
        if self.cache.writes:
            await asyncio.to_thread(self.cache.put, key, completion)  # before the session uses it
        return completion

    async def aclose(self) -> None:
        await self.inner.aclose()
