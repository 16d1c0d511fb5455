"""Batch mode (model.batch.enabled): every session's next model call joins the provider's current batch.

`BatchModel` is a `ChatModel`: `complete` queues the request body and waits for its reply. A batch goes once every
session in flight waits on the model (or `max_requests` calls wait), `linger_s` later if that still holds: the
requests as a JSONL file (`custom_id`, `method`, `url`, `body`), `files.create(purpose="batch")`,
`batches.create(completion_window="24h")`, then `batches.retrieve` every `poll_s` until it ends; the output and error
files answer each call by its `custom_id`. The session then runs its tools and its next call joins the next batch.

Everything sent and fetched is in the batch journal (model/batch_journal.py), so a resumed run polls the batches in
flight instead of sending them again, and replays fetched replies for nothing. The requests of an expired, failed
or cancelled batch (also one past `max_wait_h`) go once more in a new batch; if that one does not answer them
either, their prompts fail with the provider's error. A request the provider answered with an error (in the error
file) fails its prompt only. Costs are the price table's times `discount`, unless the reply carries its cost.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Iterator

from hermes_runner.config import BatchConfig, PriceConfig
from hermes_runner.errors import ModelCallError
from hermes_runner.model.base import Completion
from hermes_runner.model.batch_journal import BatchJournal
from hermes_runner.model.cache import call_key
from hermes_runner.model.client import OpenAIChatModel, parse_completion
from hermes_runner.model.openai_batches import OpenAIBatches, batch_error, describe
from hermes_runner.usage import fill_cost

log = logging.getLogger(__name__)


def batch_price(price: PriceConfig, discount: float) -> PriceConfig:
    """The price table at the batch discount."""
    cached = price.cached_prompt_per_mtok
    return PriceConfig(
        price.prompt_per_mtok * discount,
        price.completion_per_mtok * discount,
        None if cached is None else cached * discount,
    )


class BatchModel:
    """The run's model in batch mode: calls gathered into provider batches, each answered from its batch's files."""

    def __init__(self, client: OpenAIChatModel, cfg: BatchConfig, journal: BatchJournal, identity: str, seed: int):
        self.client, self.cfg, self.journal = client, cfg, journal
        self.provider = OpenAIBatches(client.client, client.cfg, cfg)
        self.identity, self.seed = f"batch:{identity}", seed
        self.price = batch_price(client.cfg.price, cfg.discount)
        self._queue: dict[str, dict] = {}  # key -> request body, waiting for the next batch
        self._futures: dict[str, asyncio.Future] = {}  # key -> its reply body (queued or in a batch in flight)
        self._bodies: dict[str, dict] = {}  # key -> request body, until answered
        self._active = 0  # sessions in flight (`session()`); 0: not counted, a batch goes after linger_s
        self._waiting = 0  # calls waiting on a reply
        self._changed = asyncio.Event()
        self._tasks: set[asyncio.Task] = set()
        self._started = False

    def request_body(self, messages: list[dict], tools: list[dict]) -> dict:
        return self.client.request_body(messages, tools)

    @contextlib.contextmanager
    def session(self) -> Iterator[None]:
        """Count a session in flight while it runs: a batch waits for every counted session's next call."""
        self._active += 1
        try:
            yield
        finally:
            self._active -= 1
            self._changed.set()

    def key(self, body: dict) -> str:
        """The call's fingerprint (model/cache.py): a repeat of the same call in one attempt is a new one."""
        return call_key(self.identity, body, self.seed)

    async def complete(self, messages: list[dict], tools: list[dict]) -> Completion:
        self._start()
        body = self.request_body(messages, tools)
        key = self.key(body)
        if key in self.journal.replies:  # fetched before (an earlier life of the run): paid then, free now
            done = self._completion(self.journal.replies[key])
            done.cached = True
            return done
        hooks = self.client.hooks
        for h in hooks:
            await h.before_call(sum(len(str(m.get("content") or "")) for m in messages) / 4 + 1)
        fut = self._futures.get(key)
        if fut is None:  # (else: the same call is queued or in a batch in flight, e.g. sent before a kill)
            fut = self._futures[key] = asyncio.get_running_loop().create_future()
            self._queue[key] = body
        self._bodies[key] = body  # (kept until answered: an expired batch's requests go again)
        self._waiting += 1
        self._changed.set()
        try:
            reply = await asyncio.shield(fut)
            completion = self._completion(reply)
        except BaseException as exc:
            for h in hooks:
                h.after_call(exc, None)
            raise
        finally:
            self._waiting -= 1
        for h in hooks:
            h.after_call(None, completion)
        return completion

    def _completion(self, reply: dict) -> Completion:
        completion = parse_completion(reply)
        fill_cost(completion.usage, self.price)
        return completion

    def _start(self) -> None:
        """Start the flusher, and follow the batches an earlier life left in flight (first call only)."""
        if self._started:
            return
        self._started = True
        self._spawn(self._flusher())
        for batch in self.journal.pending():
            self._expect(batch.keys)
            self._spawn(self._follow(batch.id, batch.keys, batch.attempt))
        for file_id, keys in list(self.journal.uploads.items()):
            self._expect(keys)
            self._spawn(self._create(file_id, keys, 1, adopt=True))

    def _expect(self, keys: list[str]) -> None:
        for key in keys:
            if key not in self._futures and key not in self.journal.replies:
                fut = self._futures[key] = asyncio.get_running_loop().create_future()
                fut.add_done_callback(_consume)

    def _spawn(self, coro) -> None:
        task = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    def _ready(self) -> bool:
        return bool(self._queue) and (len(self._queue) >= self.cfg.max_requests or self._waiting >= self._active)

    async def _flusher(self) -> None:
        while True:
            await self._changed.wait()
            self._changed.clear()
            while self._ready():
                if len(self._queue) < self.cfg.max_requests and self.cfg.linger_s:
                    await asyncio.sleep(self.cfg.linger_s)  # a finished session's replacement may still join
                    if not self._ready():
                        break
                keys = list(self._queue)[: self.cfg.max_requests]
                items = {k: self._queue.pop(k) for k in keys}
                self._spawn(self._submit(items, 1))

    async def _submit(self, items: dict[str, dict], attempt: int) -> None:
        """Upload the requests and create their batch; fail their calls if the provider refuses."""
        try:
            file_id = await self.provider.upload(items)
            self.journal.append({"t": "upload", "file": file_id, "keys": list(items)})
        except Exception as exc:  # noqa: BLE001 - each waiting call fails with it
            self._fail(list(items), f"batch upload failed: {describe(exc)}", getattr(exc, "status_code", None))
            return
        await self._create(file_id, list(items), attempt)

    async def _create(self, file_id: str, keys: list[str], attempt: int, adopt: bool = False) -> None:
        """Create the batch of an uploaded file (or adopt the one a killed life created for it), and follow it."""
        try:
            batch = await self.provider.adopt(file_id) if adopt else None
            batch = batch or await self.provider.create(file_id)
            self.journal.append({"t": "batch", "id": batch.id, "file": file_id, "keys": keys, "attempt": attempt})
        except Exception as exc:  # noqa: BLE001
            self._fail(keys, f"batch creation failed: {describe(exc)}", getattr(exc, "status_code", None))
            return
        log.info("batch %s: %d requests sent (attempt %d)", batch.id, len(keys), attempt)
        await self._follow(batch.id, keys, attempt)

    async def _follow(self, batch_id: str, keys: list[str], attempt: int) -> None:
        """Poll the batch until it ends, then answer its calls (or send the unanswered ones again, once)."""
        try:
            batch = await self.provider.wait(batch_id)
            records = await self.provider.results(batch)
        except Exception as exc:  # noqa: BLE001 - the batch stays in the journal: a rerun follows it again
            self._fail(keys, f"batch {batch_id} could not be followed: {describe(exc)}", None, record=False)
            return
        self.journal.append(*records, {"t": "done", "id": batch_id, "status": batch.status})  # one fsync
        for rec in records:
            if rec["t"] == "reply":
                self._resolve(rec["key"], rec["body"])
            else:
                self._fail([rec["key"]], rec["error"], rec["status"], record=False)
        answered = {rec["key"] for rec in records}
        left = [k for k in keys if k not in answered]
        if not left:
            return
        why = batch_error(batch)
        if attempt == 1 and batch.status != "completed":
            log.warning(
                "batch %s %s (%s): its %d unanswered requests go once more", batch_id, batch.status, why, len(left)
            )
            again = {k: self._bodies[k] for k in left if k in self._bodies}
            for key in set(left) - set(again):  # sent by a killed life, not asked again yet: asked anew when it is
                self._futures.pop(key, None)
            if again:
                await self._submit(again, 2)
            return
        self._fail(left, f"batch {batch_id} {batch.status}: {why}", None)

    def _resolve(self, key: str, body: dict) -> None:
        self._bodies.pop(key, None)
        fut = self._futures.pop(key, None)
        if fut is not None and not fut.done():
            fut.set_result(body)

    def _fail(self, keys: list[str], message: str, status: int | None, record: bool = True) -> None:
        """Fail these calls with the provider's error (recorded in the journal unless told not to)."""
        if record:
            self.journal.append(*({"t": "error", "key": k, "error": message, "status": status} for k in keys))
        for key in keys:
            self._bodies.pop(key, None)
            fut = self._futures.pop(key, None)
            if fut is not None and not fut.done():
                fut.set_exception(ModelCallError(message, status))

    async def aclose(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        for fut in self._futures.values():
            fut.cancel()
        self.journal.close()  # (the client is closed by its owner)


def _consume(fut: asyncio.Future) -> None:
    """Retrieve the outcome of a call nobody may wait for (a batch's request whose prompt does not come back)."""
    if not fut.cancelled():
        fut.exception()
