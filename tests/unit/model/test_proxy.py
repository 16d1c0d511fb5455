"""The recording model proxy on its unix socket: the prompt's token only, replies as chat.completion objects or one
SSE stream, refusals and model errors as OpenAI-style error bodies."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import aiohttp

from hermes_runner.errors import ModelCallError, Refused
from hermes_runner.model.base import Completion
from hermes_runner.model.proxy import SOCKET, ModelProxy
from hermes_runner.usage import Usage

CALL = {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": '{"command": "ls"}'}}


async def _post(path: Path, token: str, body: dict) -> tuple[int, bytes]:
    async with aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=str(path))) as http:
        headers = {"Authorization": f"Bearer {token}"}
        async with http.post("http://proxy/v1/chat/completions", json=body, headers=headers) as resp:
            return resp.status, await resp.read()


def test_answers_its_own_token_only_and_records_through_serve(tmp_path):
    seen: list[dict] = []

    async def serve(body: dict) -> Completion:
        seen.append(body)
        if body["messages"][0]["content"] == "refuse":
            raise Refused("budget spent", 400)
        if body["messages"][0]["content"] == "fail":
            raise ModelCallError("HTTP 500: boom", 500)
        msg = {"role": "assistant", "content": "hi", "tool_calls": [CALL], "reasoning": "think"}
        return Completion(msg, "tool_calls", Usage(prompt_tokens=7, completion_tokens=3, total_tokens=10), model="m1")

    async def main():
        proxy = ModelProxy()
        a, b = tmp_path / "a", tmp_path / "b"
        a.mkdir(), b.mkdir()
        ra, rb = await proxy.open(a, serve, "run-model"), await proxy.open(b, serve, "run-model")
        try:
            ask = {"messages": [{"role": "user", "content": "x"}]}
            out = {
                "ok": await _post(a / SOCKET, ra.token, ask),
                "other_token": await _post(a / SOCKET, rb.token, ask),
                "no_token": await _post(a / SOCKET, "", ask),
                "stream": await _post(b / SOCKET, rb.token, {**ask, "stream": True}),
                "refused": await _post(a / SOCKET, ra.token, {"messages": [{"role": "user", "content": "refuse"}]}),
                "failed": await _post(a / SOCKET, ra.token, {"messages": [{"role": "user", "content": "fail"}]}),
                "bad": await _post(a / SOCKET, ra.token, {"prompt": "x"}),
            }
        finally:
            await proxy.aclose()
        return out, (a / SOCKET).exists()

    out, left = asyncio.run(main())
    status, body = out["ok"]
    reply = json.loads(body)
    assert status == 200 and reply["object"] == "chat.completion" and reply["model"] == "m1"
    assert reply["choices"][0] == {
        "index": 0,
        "message": {"role": "assistant", "content": "hi", "tool_calls": [CALL], "reasoning_content": "think"},
        "finish_reason": "tool_calls",
    }
    assert reply["usage"] == {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}
    assert out["other_token"][0] == out["no_token"][0] == 401  # a prompt's socket answers its own token only
    status, body = out["stream"]
    events = [line.removeprefix("data: ") for line in body.decode().split("\n\n") if line]
    assert status == 200 and events[-1] == "[DONE]"
    first, usage = json.loads(events[0]), json.loads(events[1])
    assert first["choices"][0]["delta"]["tool_calls"] == [{"index": 0, **CALL}]
    assert first["choices"][0]["delta"]["content"] == "hi" and usage["usage"]["total_tokens"] == 10
    assert out["refused"][0] == 400 and b"budget spent" in out["refused"][1]
    assert out["failed"][0] == 502 and b"HTTP 500: boom" in out["failed"][1]
    assert out["bad"][0] == 400 and b"messages" in out["bad"][1]
    assert len(seen) == 4 and not left  # 401s and the bad body never reach serve; the socket goes with the route
