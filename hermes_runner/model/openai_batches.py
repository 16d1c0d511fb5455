"""OpenAI's Batch API through the official SDK: upload a batch's requests, create the batch, poll it, read its
results as journal records (model/batch_journal.py). `BatchModel` (model/batch.py) decides what goes when."""

from __future__ import annotations

import asyncio
import logging
import time

import openai

from hermes_runner.config import BatchConfig, ModelConfig
from hermes_runner.model.client import CHAT_PATH
from hermes_runner.model.retry import retrying
from hermes_runner.util import fastjson

log = logging.getLogger(__name__)

ENDPOINT = "/v1" + CHAT_PATH  # the batch line's url and the batch's endpoint
ENDED = {"completed", "expired", "failed", "cancelled"}
WINDOW = "24h"  # the only completion window OpenAI offers
REQUEUED = ("batch_expired", "batch_cancelled", "batch_failed")  # a line's error that is the batch's, not its own


class OpenAIBatches:
    """The files and batches of one endpoint; every request retried like a chat call (model.max_retries)."""

    def __init__(self, api: openai.AsyncOpenAI, model: ModelConfig, cfg: BatchConfig):
        self.api, self.model, self.cfg = api, model, cfg
        self.created = 0  # batches this process created

    async def upload(self, items: dict[str, dict]) -> str:
        """Upload the requests (key -> chat-completions body) as a batch input file; its id."""
        lines = (
            fastjson.dumps({"custom_id": k, "method": "POST", "url": ENDPOINT, "body": b}) for k, b in items.items()
        )
        uploaded = await self._call(
            self.api.files.create, file=("batch.jsonl", b"\n".join(lines) + b"\n"), purpose="batch"
        )
        return uploaded.id

    async def create(self, file_id: str):
        """Create the batch of an uploaded input file."""
        batch = await self._call(
            self.api.batches.create, input_file_id=file_id, endpoint=ENDPOINT, completion_window=WINDOW
        )
        self.created += 1
        return batch

    async def adopt(self, file_id: str):
        """A batch the provider already has for this input file (created just before a kill), if any."""
        async for batch in self.api.batches.list(limit=100):
            if batch.input_file_id == file_id:
                return batch
        return None

    async def wait(self, batch_id: str):
        """The batch once it has ended (polled every poll_s; cancelled past max_wait_h)."""
        started = time.monotonic()
        while True:
            batch = await self._call(self.api.batches.retrieve, batch_id)
            if batch.status in ENDED:
                return batch
            if time.monotonic() - started > self.cfg.max_wait_h * 3600 and batch.status != "cancelling":
                log.warning("batch %s still %s after model.batch.max_wait_h=%g: cancelled", batch_id, batch.status,
                            self.cfg.max_wait_h)  # fmt: skip
                await self._call(self.api.batches.cancel, batch_id)
            await asyncio.sleep(self.cfg.poll_s)

    async def results(self, batch) -> list[dict]:
        """The journal records of every line of the batch's output and error files (a batch-level expiry or
        cancellation answers nothing: that request goes again)."""
        records = []
        for file_id in (batch.output_file_id, batch.error_file_id):
            if file_id:
                content = await self._call(self.api.files.content, file_id)
                lines = (fastjson.loads(line) for line in content.content.splitlines() if line.strip())
                records += [rec for line in lines if (rec := record(line)) is not None]
        return records

    async def _call(self, fn, *args, **kwargs):
        async for attempt in retrying(self.model):
            with attempt:
                return await fn(*args, **kwargs)
        raise AssertionError("unreachable")


def record(line: dict) -> dict | None:
    """The journal record of one result line: a reply, a request's error, or None for a batch-level expiry."""
    key, response, error = line.get("custom_id"), line.get("response") or {}, line.get("error")
    status, body = response.get("status_code"), response.get("body")
    if status == 200 and isinstance(body, dict):
        return {"t": "reply", "key": key, "body": body}
    if isinstance(error, dict) and error.get("code") in REQUEUED:
        return None
    detail = body.get("error") if isinstance(body, dict) else None
    detail = detail if isinstance(detail, dict) else error if isinstance(error, dict) else {}
    return {
        "t": "error",
        "key": key,
        "error": f"HTTP {status}: {detail.get('message') or 'no message'}",
        "status": status,
    }


def batch_error(batch) -> str:
    """Why the provider ended a batch without answering it all (its `errors`, else its status)."""
    errors = getattr(getattr(batch, "errors", None), "data", None) or []
    texts = [f"{e.code}: {e.message}" if getattr(e, "code", None) else str(e.message) for e in errors]
    return "; ".join(texts) or f"the provider ended it {batch.status}"


def describe(exc: BaseException) -> str:
    if isinstance(exc, openai.APIStatusError):
        return f"HTTP {exc.status_code}: {exc.message}"
    return f"{type(exc).__name__}: {exc}"
