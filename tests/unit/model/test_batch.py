"""Batch mode's model against the scripted Batch API through the real SDK: one batch per round, the discount,
expired and failed batches sent once more, per-request errors, the journal's resume (no batch sent twice)."""

from __future__ import annotations

import asyncio
import contextlib
import json

import pytest

from hermes_runner.config import BatchConfig, ModelConfig, PriceConfig, ProviderConfig, ReasoningConfig
from hermes_runner.errors import ModelCallError
from hermes_runner.model.batch import BatchModel
from hermes_runner.model.batch_journal import BatchJournal
from hermes_runner.model.client import OpenAIChatModel
from hermes_runner.usage import price_cost

from tests.helpers.run import script
from tests.helpers.wait import wait_for

PRICE = PriceConfig(prompt_per_mtok=2.0, completion_per_mtok=8.0)
SECRET = "sk-batch-test-secret-0123456789"


def batch_model(server, tmp_path, monkeypatch, **options) -> BatchModel:
    monkeypatch.setenv("BATCH_TEST_KEY", SECRET)
    cfg = ModelConfig(name="scripted", base_url=server.url, api_key_env="BATCH_TEST_KEY", price=PRICE,
                      retry_initial_wait_s=0.01)  # fmt: skip
    client = OpenAIChatModel(cfg, ProviderConfig(), ReasoningConfig())
    batch = BatchConfig(enabled=True, poll_s=0.01, linger_s=0.0, **options)
    return BatchModel(client, batch, BatchJournal.open(tmp_path / "journal.jsonl"), "endpoint", 0)


def asked(i: int, *steps: dict) -> list[dict]:
    return [{"role": "user", "content": script(*(steps or [{"content": f"answer {i}"}]), text=f"task {i}")}]


async def ask_all(model: BatchModel, conversations: list[list[dict]]) -> list:
    """Every conversation's call from its own session, all counted in flight (so they go as one batch)."""
    with contextlib.ExitStack() as stack:
        for _ in conversations:
            stack.enter_context(model.session())
        return await asyncio.gather(*(model.complete(c, []) for c in conversations), return_exceptions=True)


async def closed(model: BatchModel) -> None:
    await model.aclose()
    await model.client.aclose()


def test_calls_go_as_one_batch_at_the_discounted_price(server, tmp_path, monkeypatch):
    async def main():
        model = batch_model(server, tmp_path, monkeypatch)
        try:
            return await ask_all(model, [asked(i) for i in range(3)])
        finally:
            await closed(model)

    got = asyncio.run(main())
    assert [c.message["content"] for c in got] == ["answer 0", "answer 1", "answer 2"]
    assert [len(b["custom_ids"]) for b in server.batch_api.created] == [3]
    full = price_cost(got[0].usage, PRICE)
    assert full > 0 and got[0].usage.cost_usd == pytest.approx(full * 0.5)
    assert SECRET not in (tmp_path / "journal.jsonl").read_text()  # the key never reaches the run dir


def test_an_expired_batch_goes_once_more_and_a_second_failure_fails_with_the_providers_error(
    server, tmp_path, monkeypatch
):
    server.batch_api.end_next("expired", answered=1)  # the first line answered, two expire: they go again

    async def main():
        model = batch_model(server, tmp_path, monkeypatch)
        try:
            first = await ask_all(model, [asked(i) for i in range(3)])
            server.batch_api.end_next("failed", n=2)  # the next batch fails, and so does its resend
            second = await ask_all(model, [asked(i) for i in range(3, 5)])
            return first, second
        finally:
            await closed(model)

    first, second = asyncio.run(main())
    assert [c.message["content"] for c in first] == ["answer 0", "answer 1", "answer 2"]
    assert [len(b["custom_ids"]) for b in server.batch_api.created] == [3, 2, 2, 2]  # 2 resent; 2 failed twice
    assert all(isinstance(e, ModelCallError) and "failed: scripted_failure: the batch failed" in str(e) for e in second)


def test_a_request_the_provider_refuses_fails_only_its_own_call(server, tmp_path, monkeypatch):
    bad = asked(1, {"fail": [{"status": 400, "message": "bad tool schema"}], "content": "never"})

    async def main():
        model = batch_model(server, tmp_path, monkeypatch)
        try:
            return await ask_all(model, [asked(0), bad, asked(2)])
        finally:
            await closed(model)

    ok0, err, ok2 = asyncio.run(main())
    assert (ok0.message["content"], ok2.message["content"]) == ("answer 0", "answer 2")
    assert isinstance(err, ModelCallError) and err.status == 400 and "bad tool schema" in str(err)
    assert len(server.batch_api.created) == 1  # a request's own error is not sent again


def test_a_batch_in_flight_at_a_kill_is_followed_not_sent_again_and_fetched_replies_cost_nothing(
    server, tmp_path, monkeypatch
):
    conversations = [asked(i) for i in range(3)]
    server.batch_api.hold()

    async def killed():  # sends its batch, then dies while the batch is in flight
        model = batch_model(server, tmp_path, monkeypatch)
        calls = asyncio.ensure_future(ask_all(model, conversations))
        await asyncio.to_thread(wait_for, lambda: server.batch_api.in_flight(), 30, "the batch to be created")
        await asyncio.to_thread(wait_for, lambda: model.journal.pending(), 30, "the batch in the journal")
        calls.cancel()
        await closed(model)

    async def resumed():
        model = batch_model(server, tmp_path, monkeypatch)
        try:
            return await ask_all(model, conversations)
        finally:
            await closed(model)

    asyncio.run(killed())
    server.batch_api.release()
    got = asyncio.run(resumed())
    assert [c.message["content"] for c in got] == ["answer 0", "answer 1", "answer 2"]
    assert len(server.batch_api.created) == 1 and not any(c.cached for c in got)  # paid once, now
    again = asyncio.run(resumed())
    assert [c.message["content"] for c in again] == ["answer 0", "answer 1", "answer 2"]
    assert len(server.batch_api.created) == 1 and all(c.cached for c in again)  # from the journal: no charge


def test_an_upload_whose_batch_was_created_unrecorded_is_adopted(server, tmp_path, monkeypatch):
    conversations = [asked(i) for i in range(2)]

    async def main():
        model = batch_model(server, tmp_path, monkeypatch)
        try:  # a killed life: uploaded and created, but died before it recorded the batch
            keys = [model.key(model.request_body(c, [])) for c in conversations]
            lines = [{"custom_id": k, "method": "POST", "url": "/v1/chat/completions",
                      "body": model.request_body(c, [])} for k, c in zip(keys, conversations, strict=True)]  # fmt: skip
            data = "".join(json.dumps(line) + "\n" for line in lines).encode()
            uploaded = await model.provider.api.files.create(file=("b.jsonl", data), purpose="batch")
            await model.provider.api.batches.create(
                input_file_id=uploaded.id, endpoint="/v1/chat/completions", completion_window="24h"
            )
            model.journal.append({"t": "upload", "file": uploaded.id, "keys": keys})
        finally:
            await closed(model)
        model = batch_model(server, tmp_path, monkeypatch)
        try:
            return await ask_all(model, conversations)
        finally:
            await closed(model)

    got = asyncio.run(main())
    assert [c.message["content"] for c in got] == ["answer 0", "answer 1"]
    assert len(server.batch_api.created) == 1


def test_a_journal_line_torn_by_a_kill_does_not_swallow_the_next_record(tmp_path) -> None:
    path = tmp_path / "journal.jsonl"
    journal = BatchJournal.open(path)
    journal.append({"t": "reply", "key": "a", "body": {"id": "1"}})
    journal.close()
    with path.open("ab") as fp:  # a kill in the middle of the next write
        fp.write(b'{"t": "reply", "key": "b", "bo')
    journal = BatchJournal.open(path)
    journal.append({"t": "reply", "key": "c", "body": {"id": "3"}})
    journal.close()
    assert set(BatchJournal.open(path).replies) == {"a", "c"}
