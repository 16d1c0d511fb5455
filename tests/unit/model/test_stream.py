"""Streamed replies (model.stream=true) add up to exactly what the non-streamed path returns."""

from __future__ import annotations

import asyncio
import json

import pytest
from aiohttp import web

from hermes_runner.config import ModelConfig, ProviderConfig, ReasoningApi, ReasoningConfig
from hermes_runner.errors import ModelCallError
from hermes_runner.model.client import Completion, OpenAIChatModel
from hermes_runner.tools.catalog import tools_for

from tests.helpers.run import script

TOOLS = [t.openai_schema() for t in tools_for(["terminal", "file"])]
TERM = {"id": "call_t", "name": "terminal", "arguments": {"command": "echo hi"}}
WRITE = {"id": "call_w", "name": "write_file", "arguments": '{"path": "notes/ü.txt", "content": "line 1\\nline 2"}'}
FINAL = {"content": "final answer", "reasoning": "wrap up"}
USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18,
         "completion_tokens_details": {"reasoning_tokens": 5}, "prompt_tokens_details": {"cached_tokens": 3}}  # fmt: skip


def complete(server, prompt: str, stream: bool, **model_opts) -> Completion:
    cfg = ModelConfig(
        name="scripted", base_url=server.url, reasoning_api=ReasoningApi.none, stream=stream,
        retry_initial_wait_s=0.01, **model_opts,
    )  # fmt: skip

    async def go() -> Completion:
        model = OpenAIChatModel(cfg, ProviderConfig(), ReasoningConfig(), pool_size=4)
        try:
            return await model.complete([{"role": "user", "content": prompt}], TOOLS)
        finally:
            await model.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize("field", ["reasoning", "reasoning_content", "reasoning_details", "think", "scratchpad"])
def test_streamed_reply_equals_the_plain_one(server, field):
    step = {"content": "Résumé ✓ done", "reasoning": "thinking about ünïcode and tools", "reasoning_field": field,
            "tool_calls": [TERM, WRITE], "usage": USAGE, "cost": 0.25}  # fmt: skip
    prompt = script(step, text=f"all parts {field}")
    plain = complete(server, prompt, stream=False)
    streamed = complete(server, prompt, stream=True)
    assert streamed == plain
    assert plain.message["reasoning"] == "thinking about ünïcode and tools"
    assert [c["function"]["name"] for c in plain.message["tool_calls"]] == ["terminal", "write_file"]
    assert json.loads(plain.message["tool_calls"][1]["function"]["arguments"])["path"] == "notes/ü.txt"
    assert plain.usage.reasoning_tokens == 5 and plain.usage.cost_usd == 0.25 and plain.finish_reason == "tool_calls"
    sent = server.requests[-1].body
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    assert "stream" not in server.requests[0].body


def test_one_character_chunks_and_a_length_cut(server):
    server.chunk_chars = 1
    try:
        prompt = script({"content": "cut sho", "reasoning": "r", "finish_reason": "length"}, text="tiny chunks")
        assert complete(server, prompt, stream=True) == complete(server, prompt, stream=False)
    finally:
        server.chunk_chars = 4


def test_a_stream_that_breaks_off_is_retried(server):
    fails = [{"status": 502, "midstream": True}, {"status": 500, "midstream": True, "cut": True}]
    reply = complete(server, script({"fail": fails, **FINAL}, text="breaks off"), stream=True)
    assert reply.retries == 2 and reply.message["content"] == "final answer"
    assert len(server.calls_for("breaks off")) == 3


def test_a_non_retryable_error_in_the_stream_fails_at_once(server):
    with pytest.raises(ModelCallError, match="bad tool schema"):
        complete(
            server, script({"fail": [{"status": 400, "midstream": True, "message": "bad tool schema"}], **FINAL}), True
        )
    assert len(server.requests) == 1


def test_http_errors_before_the_stream_keep_their_status(server):
    with pytest.raises(ModelCallError) as err:
        complete(server, script({"fail": [{"status": 401, "message": "no such key"}], **FINAL}), stream=True)
    assert err.value.status == 401 and "no such key" in str(err.value) and len(server.requests) == 1


def test_server_sent_events_from_other_servers(server):
    """Keep-alive comments, CRLF, `data:` without a space, repeated tool names, signed reasoning blocks."""
    head = {"id": "x", "object": "chat.completion.chunk", "created": 0, "model": "m"}

    def chunk(delta: dict, finish: str | None = None) -> dict:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    detail = {"type": "reasoning.text", "format": "anthropic-claude-v1", "index": 0}
    chunks = [
        chunk({"role": "assistant", "content": None}),
        chunk({"reasoning_details": [{**detail, "text": "first "}]}),
        chunk({"reasoning_details": [{**detail, "text": "second", "signature": None}]}),
        chunk({"reasoning_details": [{**detail, "text": "", "signature": "c2ln"}]}),
        chunk({"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "terminal"}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"name": "terminal", "arguments": '{"command": '}}]}),
        chunk({"tool_calls": [{"index": 0, "function": {"name": "terminal", "arguments": '"ls"}'}}]}),
        chunk({}, "tool_calls"),
        {**head, "choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}},
    ]
    text = ": OPENROUTER PROCESSING\r\n\r\nevent: message\r\n"
    text += "".join(f"data:{json.dumps(c)}\r\n\r\n" for c in chunks) + "data: [DONE]"
    server.handler = lambda body, s: web.Response(text=text, content_type="text/event-stream")
    reply = complete(server, "anything", stream=True)
    assert reply.message["tool_calls"] == [
        {"id": "call_a", "type": "function", "function": {"name": "terminal", "arguments": '{"command": "ls"}'}}
    ]
    assert reply.message["reasoning"] == "first second"
    assert reply.message["reasoning_details"] == [{**detail, "text": "first second", "signature": "c2ln"}]
    assert reply.usage.total_tokens == 5 and reply.finish_reason == "tool_calls" and reply.message["content"] == ""


def test_a_stream_without_choices_is_retried_as_empty(server):
    calls = []

    def handler(body, s):
        calls.append(1)
        if len(calls) == 1:
            return web.Response(text="data: [DONE]\n\n", content_type="text/event-stream")
        return None  # scripted reply

    server.handler = handler
    reply = complete(server, script(FINAL, text="empty first"), stream=True)
    assert reply.retries == 1 and reply.message["content"] == "final answer"
