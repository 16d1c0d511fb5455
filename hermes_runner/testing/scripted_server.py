"""A real OpenAI-compatible HTTP server whose replies follow a script (tests, benchmarks, demos).

The reply to each chat-completions request follows the ``#script`` grammar of `hermes_runner.testing.script`
(as the in-process `ScriptedModel` does). On the wire, a ``"midstream"`` failure of a streaming request starts
as 200 and breaks off after a few chunks (an error event, or with ``"cut"`` a closed connection); a bad
``#script`` line gets a 400.

``POST /v1/images/generations`` returns a solid-colour PNG of the requested size (colour
from the prompt's hash), as ``b64_json`` or as a ``url`` served by this server.

A request with ``"stream": true`` gets the same reply as server-sent events in the OpenAI
chunk format: text fields split into ``chunk_chars`` pieces, tool calls as indexed deltas
(id and name first, then argument pieces), a finish chunk, a usage chunk when
``stream_options.include_usage`` is set, then ``data: [DONE]``.

A test holds replies with `ScriptedServer.hold` (let n more chat requests through, then keep each later one
waiting, counted in ``held``) and `release` (answer them all, stop holding): it knows the client is waiting on a
reply it cannot get, whatever the machine's speed (the kill -9 tests kill the runner then).

The OpenAI Batch API (files, batches) is served beside it, each batch line answered as this route would answer
it: `hermes_runner.testing.batch_api` (``server.batch_api``).
An outage (`outage(status)`, or ``POST /_outage?status=503``) answers every chat request with that status, its
scripts untouched, until `recover()` (``POST /_recover``); `outage_answered` counts the requests it refused.

``GET /_stats`` tells how many calls were served and when the first came and the last was
answered (``time.monotonic()``; ``?reset=1`` starts over), for benchmarks.

Run standalone: ``python -m hermes_runner.testing.scripted_server --port 8765 --latency 0.2``
(``--port 0`` picks a free port; the first line printed holds the URL).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import itertools
import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import web

from hermes_runner.errors import ScriptSyntaxError
from hermes_runner.testing import script
from hermes_runner.testing.batch_api import BatchApi
from hermes_runner.testing.loopback import LoopbackApp
from hermes_runner.testing.script import describe_image, png_bytes  # noqa: F401  (re-exported)

Handler = Callable[[dict, "ScriptedServer"], dict | web.Response | None]


@dataclass
class Seen:
    """One request as the server received it."""

    body: dict
    headers: dict
    prompt: str
    turn: int
    at: float = field(default_factory=time.monotonic)


def turn_of(body: dict) -> int:
    return script.turn_of(body.get("messages", []))


class HoldGate:
    """Chat requests held for a test: `hold` keeps them waiting, `release` lets them go (`_lock` guards all state)."""

    def __init__(self) -> None:
        self.held = 0  # chat requests waiting at the hold (see `hold`)
        self._holding = False
        self._let_through = 0
        self._only: str | None = None
        self._waiters: list[tuple[asyncio.AbstractEventLoop, asyncio.Future]] = []
        self._lock = threading.Lock()

    def hold(self, after: int = 0, only: str | None = None) -> None:
        """Let `after` more chat requests through, then keep each later one waiting (counted in `held`) until
        `release()`; a held request is recorded in `requests` and counted in `in_flight` as it arrives. With
        `only`, just the requests whose first user message contains it are held (and counted in `after`)."""
        with self._lock:
            self._holding, self._let_through, self._only = True, after, only

    def release(self) -> None:
        """Stop holding: every held request goes on to its reply (callable from any thread)."""
        with self._lock:
            self._holding, waiters, self._waiters = False, self._waiters, []
        for loop, fut in waiters:
            loop.call_soon_threadsafe(lambda f=fut: f.done() or f.set_result(None))

    async def _pass_hold(self, prompt: str) -> None:
        """Return at once, or once released when the hold keeps this request (of first user message `prompt`)."""
        with self._lock:
            if not self._holding or (self._only is not None and self._only not in prompt):
                return
            if self._let_through > 0:
                self._let_through -= 1
                return
            fut = asyncio.get_running_loop().create_future()
            self._waiters.append((asyncio.get_running_loop(), fut))
            self.held += 1
        try:
            await fut
        finally:
            with self._lock:
                self.held -= 1


class ScriptedServer(HoldGate, LoopbackApp):
    """The server: routes, records, scripted replies and failures (the wire format is `chunks` and `sse`)."""

    def __init__(
        self, latency: float = 0.0, host: str = "127.0.0.1", port: int = 0, record: bool = True, chunk_chars: int = 4
    ):
        super().__init__()
        self.latency = latency
        self.chunk_chars = chunk_chars  # characters per streamed text delta
        self.host = host
        self.port = port
        self.record = record
        self.handler: Handler | None = None  # a test may take over replies entirely
        self.models = ["scripted"]  # ids listed by GET /v1/models
        self.requests: list[Seen] = []
        self.attempts: Counter = Counter()
        self.in_flight = 0
        self.served = 0
        self.window = [0.0, 0.0]  # time.monotonic() of the first request and of the last reply
        self.max_in_flight = 0
        self._ids = itertools.count()
        self.files: dict[str, bytes] = {}  # generated images served as URLs
        self.batch_api = BatchApi(self)  # the scripted Batch API (files, batches) on the same app
        self.outage_status: int | None = None  # every chat request answers this while set (`outage`)
        self.outage_answered = 0  # chat requests answered by an outage

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    # -- lifecycle ------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024**2)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/_stats", self._stats)
        app.router.add_post("/_outage", self._outage_route)
        app.router.add_post("/_recover", self._outage_route)
        app.router.add_post("/v1/images/generations", self._images)
        app.router.add_get("/v1/files/{name}", self._file)
        self.batch_api.mount(app)
        return app

    def reset(self) -> None:
        self.release()
        self.batch_api.reset()
        with self._lock:
            self.requests.clear()
            self.attempts.clear()
            self.handler = None
            self.max_in_flight = 0
            self.models = ["scripted"]
            self.outage_status, self.outage_answered = None, 0

    def outage(self, status: int = 503) -> None:
        """From now on every chat request is answered with `status` (scripts untouched) until `recover()`."""
        self.outage_status = status

    def recover(self) -> None:
        self.outage_status = None

    async def _outage_route(self, request: web.Request) -> web.Response:
        if request.path == "/_outage":
            self.outage(int(request.query.get("status", "503")))
        else:
            self.recover()
        return web.json_response({"outage_status": self.outage_status, "outage_answered": self.outage_answered})

    def note(self, body: dict, headers: dict, prompt: str, turn: int) -> None:
        """Record a chat request (the chat route's, a batch line's) in `requests`, unless `record` is off."""
        if self.record:
            with self._lock:
                self.requests.append(Seen(body, headers, prompt, turn))

    def next_attempt(self, prompt: str, turn: int) -> int:
        """How many times this step of this prompt was asked before (its `fail` list is read by attempt)."""
        key = script.attempt_key(prompt, turn)
        with self._lock:
            attempt = self.attempts[key]
            self.attempts[key] += 1
        return attempt

    def calls_for(self, text: str) -> list[Seen]:
        """Requests whose first user message contains `text`."""
        return [r for r in self.requests if text in r.prompt]

    # -- HTTP -----------------------------------------------------------------------

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": m, "object": "model"} for m in self.models]})

    async def _images(self, request: web.Request) -> web.Response:
        body = await request.json()
        prompt = str(body.get("prompt") or "")
        if self.record:
            with self._lock:
                self.requests.append(Seen(body, dict(request.headers), prompt, 0))
        try:
            w, h = (int(x) for x in str(body.get("size") or "64x64").split("x"))
        except ValueError:
            return web.json_response({"error": {"message": f"bad size {body.get('size')!r}"}}, status=400)
        rgb = tuple(hashlib.sha256(prompt.encode()).digest()[:3])
        data = png_bytes(w, h, rgb)
        if body.get("response_format") == "url":
            name = f"img-{next(self._ids)}.png"
            self.files[name] = data
            item = {"url": f"http://{self.host}:{self.port}/v1/files/{name}"}
        else:
            item = {"b64_json": base64.b64encode(data).decode()}
        item["revised_prompt"] = prompt
        return web.json_response({"created": int(time.time()), "data": [item]})

    async def _file(self, request: web.Request) -> web.Response:
        data = self.files.get(request.match_info["name"])
        if data is None:
            return web.json_response({"error": {"message": "no such file"}}, status=404)
        return web.Response(body=data, content_type="image/png")

    async def _chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        prompt, turn = script.first_user(body.get("messages", [])), turn_of(body)
        self.note(body, dict(request.headers), prompt, turn)
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        self.window[0] = self.window[0] or time.monotonic()
        try:
            await self._pass_hold(prompt)
            if (status := self.outage_status) is not None:
                self.outage_answered += 1
                message = {"error": {"message": f"scripted outage: {status}", "code": status}}
                return web.json_response(message, status=status)
            if self.latency:
                await asyncio.sleep(self.latency)
            if self.handler is not None:
                out = self.handler(body, self)
                if isinstance(out, web.Response):
                    return out
                if out is not None:
                    return await self._reply(request, body, out)
            return await self._scripted(request, body, prompt, turn)
        finally:
            self.in_flight -= 1
            self.window[1] = time.monotonic()
            self.served += 1

    async def _stats(self, request: web.Request) -> web.Response:
        """Calls served and the (monotonic) times of the first request and last reply; `?reset=1` restarts."""
        out = {"served": self.served, "first_request": self.window[0], "last_reply": self.window[1]}
        if request.query.get("reset"):
            self.served, self.window = 0, [0.0, 0.0]
        return web.json_response(out)

    async def _reply(self, request: web.Request, body: dict, completion: dict) -> web.StreamResponse:
        if not body.get("stream"):
            return web.json_response(completion)
        include_usage = bool((body.get("stream_options") or {}).get("include_usage"))
        return await sse(request, chunks(completion, include_usage, self.chunk_chars))

    async def _scripted(self, request: web.Request, body: dict, prompt: str, turn: int) -> web.StreamResponse:
        messages, tools = body.get("messages", []), body.get("tools") or []
        try:
            step = script.step_for(messages, tools)
        except ScriptSyntaxError as exc:
            return web.json_response({"error": {"message": str(exc)}}, status=400)
        f = script.failure(step, self.next_attempt(prompt, turn))
        if f is not None:
            headers = {}
            if f.get("retry_after") is not None:
                headers["retry-after"] = str(f["retry_after"])
            if f.get("hang"):
                await linger(request, f["hang"])
            if f.get("midstream") and body.get("stream"):
                return await self._broken_stream(request, body, step, f)
            return web.json_response(
                {"error": {"message": f.get("message", f"scripted error {f['status']}"), "code": f["status"]}},
                status=f["status"],
                headers=headers,
            )
        if step.get("sleep"):
            await linger(request, step["sleep"])
        return await self._reply(request, body, self.completion(body, script.offered(step, tools)))

    async def _broken_stream(self, request: web.Request, body: dict, step: dict, fail: dict) -> web.StreamResponse:
        """A 200 stream that stops after a few chunks: an error event, or a dropped connection."""
        first = chunks(self.completion(body, step), False, self.chunk_chars)[:3]
        if fail.get("cut"):
            return await sse(request, first, cut=True)
        message = fail.get("message", f"scripted stream error {fail['status']}")
        error = {"error": {"message": message, "code": fail["status"]}}
        return await sse(request, [*first, error], tail=b"")

    def completion(self, body: dict, step: dict) -> dict:
        """The chat.completion body answering `body` with `step` (handlers may call it)."""
        n = next(self._ids)
        msg = script.wire_message(step, n)
        choice = {"index": 0, "message": msg, "finish_reason": script.finish_reason(step)}
        out = {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": step.get("model") or body.get("model", "scripted"),
            "choices": [choice],
            "usage": script.usage(step, body.get("messages", []), msg),
        }
        if body.get("return_token_ids"):  # vLLM's fields (script.token_fields)
            messages, tools = body.get("messages", []), body.get("tools") or []
            out["prompt_token_ids"], fields = script.token_fields(messages, tools, msg, choice["finish_reason"])
            choice.update(fields)
        return out


def chunks(completion: dict, include_usage: bool, n: int) -> list[dict]:
    """A chat completion as the OpenAI streaming chunks that add up to it (`n` characters per text delta)."""
    choice = completion["choices"][0]
    msg = choice["message"]
    head = {k: completion[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}

    def chunk(delta: dict, finish: str | None = None) -> dict:
        return {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    def pieces(text: str) -> list[str]:
        return [text[i : i + n] for i in range(0, len(text), n)] or [""]

    out = [chunk({"role": "assistant", "content": ""})]
    for name in ("reasoning", "reasoning_content"):
        if msg.get(name):
            out += [chunk({name: p}) for p in pieces(msg[name])]
    for block in msg.get("reasoning_details") or []:
        rest = {k: v for k, v in block.items() if k != "text"}
        out += [chunk({"reasoning_details": [{**rest, "text": p}]}) for p in pieces(block.get("text") or "")]
    if msg.get("content"):
        out += [chunk({"content": p}) for p in pieces(msg["content"])]
    for i, call in enumerate(msg.get("tool_calls") or []):
        fn = call["function"]
        head_delta = {"index": i, "id": call["id"], "type": "function"}
        out.append(chunk({"tool_calls": [{**head_delta, "function": {"name": fn["name"], "arguments": ""}}]}))
        for p in pieces(fn["arguments"]):
            out.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": p}}]}))
    out.append(chunk({}, choice["finish_reason"]))
    if include_usage:
        out.append({**head, "choices": [], "usage": completion["usage"]})
    return out


async def sse(
    request: web.Request, chunks: list[dict], tail: bytes = b"data: [DONE]\n\n", cut: bool = False
) -> web.StreamResponse:
    """`chunks` as server-sent events, then `tail`; `cut`: no end at all, the connection closes (a torn body)."""
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
    await resp.prepare(request)
    for chunk in chunks:
        await resp.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
    if cut:
        request.transport.close()  # no terminating chunk: the client sees a torn body
        return resp
    if tail:
        await resp.write(tail)
    await resp.write_eof()
    return resp


async def linger(request: web.Request, seconds: float) -> None:
    """Sleep `seconds`, or less if the client goes away: a hung reply nobody waits for no longer counts in
    `in_flight` (a later test reads it)."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0 and request.transport is not None and not request.transport.is_closing():
        await asyncio.sleep(min(left, 0.05))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument("--latency", type=float, default=0.0, help="seconds added to every reply")
    ap.add_argument("--chunk-chars", type=int, default=4, help="characters per streamed text delta")
    args = ap.parse_args()
    server = ScriptedServer(
        latency=args.latency, host=args.host, port=args.port, record=False, chunk_chars=max(1, args.chunk_chars)
    )

    async def serve() -> None:
        await server.start_async()
        print(f"scripted OpenAI-compatible server on {server.url}", flush=True)
        await asyncio.Event().wait()

    asyncio.run(serve())


if __name__ == "__main__":
    main()
