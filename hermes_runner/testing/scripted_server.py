"""A real OpenAI-compatible HTTP server whose replies follow a script (tests, benchmarks, demos).

The reply to each chat-completions request depends on the conversation so far:

* A line ``#script <json list>`` in the first user message scripts the assistant turn by
  turn (turn = number of assistant messages already in the request). A step may hold
  ``content``, ``tool_calls`` (``[{"name", "arguments" (object or raw string)}]``),
  ``reasoning`` with ``reasoning_field`` (reasoning | reasoning_content | reasoning_details
  | think | scratchpad), ``finish_reason``, ``sleep`` (seconds), ``usage``, ``cost``, ``model`` (the
  model the reply says answered, as a router like OpenRouter's ``openrouter/auto`` reports it), and
  ``fail``: a list of error replies (``{"status", "retry_after", "message"}``) returned
  for the first attempts of that step; with ``"midstream": true`` (streaming requests) the
  reply starts as 200 and breaks off after a few chunks, with an error event or, with
  ``"cut": true``, by closing the connection.
* A request without ``tools`` never gets tool calls: a step that would make some answers with its
  ``content`` (or a fixed line) instead, as a real model offered no tools does.
* A first user message with a line ``#judging`` is a scorer's judge asking (the test's rubric holds that
  line): it gets the step of the ``#judge <json step>`` line found in the same message (the judged prompt's,
  quoted by the rubric), else ``{"content": "{\"score\": 1, \"explanation\": \"fine\"}"}``; ``#script``
  lines quoted in it are ignored.
* Without a script: call ``terminal`` once (when offered) with ``echo``, then answer. A last
  user message with images (``image_url`` data URLs) is answered with what they are: type,
  size in pixels, bytes and sha256 prefix, so vision tools can be checked end to end.

``POST /v1/images/generations`` returns a solid-colour PNG of the requested size (colour
from the prompt's hash), as ``b64_json`` or as a ``url`` served by this server.

A request with ``"stream": true`` gets the same reply as server-sent events in the OpenAI
chunk format: text fields split into ``chunk_chars`` pieces, tool calls as indexed deltas
(id and name first, then argument pieces), a finish chunk, a usage chunk when
``stream_options.include_usage`` is set, then ``data: [DONE]``.

``GET /_stats`` tells how many calls were served and when the first came and the last was
answered (``time.monotonic()``; ``?reset=1`` starts over), for benchmarks.

Run standalone: ``python -m hermes_runner.scripted_server --port 8765 --latency 0.2``
(``--port 0`` picks a free port; the first line printed holds the URL).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import hashlib
import itertools
import json
import struct
import threading
import time
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from aiohttp import web

from hermes_runner.testing.loopback import LoopbackApp

Handler = Callable[[dict, "ScriptedServer"], dict | web.Response | None]


@dataclass
class Seen:
    """One request as the server received it."""

    body: dict
    headers: dict
    prompt: str
    turn: int
    at: float = field(default_factory=time.monotonic)


def first_user(body: dict) -> str:
    for m in body.get("messages", []):
        if m.get("role") == "user":
            c = m.get("content")
            return c if isinstance(c, str) else json.dumps(c)
    return ""


def turn_of(body: dict) -> int:
    return sum(1 for m in body.get("messages", []) if m.get("role") == "assistant")


def png_bytes(width: int, height: int, rgb: tuple[int, int, int]) -> bytes:
    """A solid-colour RGB PNG."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    raw = (b"\x00" + bytes(rgb) * width) * height
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def describe_image(data: bytes) -> str:
    """What the server 'sees' in an image: type, pixel size (PNG), bytes and sha256 prefix."""
    digest = hashlib.sha256(data).hexdigest()[:12]
    if data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) >= 24:
        w, h = struct.unpack(">II", data[16:24])
        return f"image/png {w}x{h} ({len(data)} bytes, sha256 {digest})"
    return f"image ({len(data)} bytes, sha256 {digest})"


def images_in_last_user(body: dict) -> list[bytes]:
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    content = users[-1].get("content") if users else None
    out = []
    for part in content if isinstance(content, list) else []:
        url = (part.get("image_url") or {}).get("url", "") if part.get("type") == "image_url" else ""
        if url.startswith("data:") and "," in url:
            out.append(base64.b64decode(url.split(",", 1)[1]))
    return out


def parse_script(prompt: str) -> list[dict] | None:
    lines = prompt.splitlines()
    if "#judging" in lines:
        return [parse_judge(lines)]
    for line in lines:
        if line.startswith("#script "):
            return json.loads(line[len("#script ") :])
    return None


JUDGE_DEFAULT = {"content": json.dumps({"score": 1, "explanation": "fine"})}


def parse_judge(lines: list[str]) -> dict:
    """The scripted step of a judge's request (see the module docstring)."""
    for line in lines:
        if line.startswith("#judge "):
            return json.loads(line[len("#judge ") :])
    return dict(JUDGE_DEFAULT)


class ScriptedServer(LoopbackApp):
    def __init__(
        self, latency: float = 0.0, host: str = "127.0.0.1", port: int = 0, record: bool = True, chunk_chars: int = 4
    ):
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
        self._lock = threading.Lock()
        self.files: dict[str, bytes] = {}  # generated images served as URLs

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}/v1"

    # -- lifecycle ------------------------------------------------------------------

    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024**2)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/_stats", self._stats)
        app.router.add_post("/v1/images/generations", self._images)
        app.router.add_get("/v1/files/{name}", self._file)
        return app

    def reset(self) -> None:
        with self._lock:
            self.requests.clear()
            self.attempts.clear()
            self.handler = None
            self.max_in_flight = 0
            self.models = ["scripted"]

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
        prompt, turn = first_user(body), turn_of(body)
        if self.record:
            with self._lock:
                self.requests.append(Seen(body, dict(request.headers), prompt, turn))
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        self.window[0] = self.window[0] or time.monotonic()
        try:
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
        return await self._stream(request, self.chunks(completion, include_usage))

    @staticmethod
    async def _stream(
        request: web.Request, chunks: list[dict], tail: bytes = b"data: [DONE]\n\n"
    ) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        for chunk in chunks:
            await resp.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
        if tail:
            await resp.write(tail)
        await resp.write_eof()
        return resp

    async def _scripted(self, request: web.Request, body: dict, prompt: str, turn: int) -> web.StreamResponse:
        try:
            script = parse_script(prompt)
        except json.JSONDecodeError as exc:
            return web.json_response({"error": {"message": f"bad #script: {exc}"}}, status=400)
        if script is None:
            step = self._default_step(body, turn)
        else:
            step = script[turn] if turn < len(script) else {"content": "Done.", "reasoning": "Nothing left to do."}
        key = hashlib.blake2b(f"{prompt}\0{turn}".encode(), digest_size=8).hexdigest()
        with self._lock:
            attempt = self.attempts[key]
            self.attempts[key] += 1
        fails = step.get("fail") or []
        if attempt < len(fails):
            f = fails[attempt]
            headers = {}
            if f.get("retry_after") is not None:
                headers["retry-after"] = str(f["retry_after"])
            if f.get("hang"):
                await asyncio.sleep(f["hang"])
            if f.get("midstream") and body.get("stream"):
                return await self._broken_stream(request, body, step, f)
            return web.json_response(
                {"error": {"message": f.get("message", f"scripted error {f['status']}"), "code": f["status"]}},
                status=f["status"],
                headers=headers,
            )
        if step.get("sleep"):
            await asyncio.sleep(step["sleep"])
        if step.get("tool_calls") and not body.get("tools"):  # like a real model: no tools offered, no calls
            step = {k: v for k, v in step.items() if k not in ("tool_calls", "finish_reason")}
            step["content"] = step.get("content") or "Out of turns: here is what I found so far."
        return await self._reply(request, body, self.completion(body, step))

    async def _broken_stream(self, request: web.Request, body: dict, step: dict, fail: dict) -> web.StreamResponse:
        """A 200 stream that stops after a few chunks: an error event, or a dropped connection."""
        chunks = self.chunks(self.completion(body, step), include_usage=False)[:3]
        if fail.get("cut"):
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            for chunk in chunks:
                await resp.write(b"data: " + json.dumps(chunk).encode() + b"\n\n")
            request.transport.close()  # no terminating chunk: the client sees a torn body
            return resp
        message = fail.get("message", f"scripted stream error {fail['status']}")
        error = {"error": {"message": message, "code": fail["status"]}}
        return await self._stream(request, [*chunks, error], tail=b"")

    @staticmethod
    def _default_step(body: dict, turn: int) -> dict:
        images = images_in_last_user(body)
        if images:
            seen = "; ".join(describe_image(d) for d in images)
            return {"reasoning": "I looked at the image.", "content": f"I see {len(images)} image(s): {seen}"}
        offered = {t.get("function", {}).get("name") for t in body.get("tools") or []}
        if turn == 0 and "terminal" in offered:
            return {
                "reasoning": "I should run a command to check.",
                "tool_calls": [{"name": "terminal", "arguments": {"command": "echo hello"}}],
            }
        return {"reasoning": "The command worked; I can answer.", "content": "The answer is hello."}

    def completion(self, body: dict, step: dict) -> dict:
        n = next(self._ids)
        msg: dict = {"role": "assistant", "content": step.get("content")}
        reasoning, where = step.get("reasoning"), step.get("reasoning_field", "reasoning")
        if reasoning:
            if where == "reasoning":
                msg["reasoning"] = reasoning
            elif where == "reasoning_content":
                msg["reasoning_content"] = reasoning
            elif where == "reasoning_details":
                msg["reasoning_details"] = [
                    {"type": "reasoning.text", "text": reasoning, "format": "unknown", "index": 0}
                ]
            elif where == "think":
                msg["content"] = f"<think>{reasoning}</think>\n{msg['content'] or ''}"
            elif where == "scratchpad":
                msg["content"] = f"<REASONING_SCRATCHPAD>{reasoning}</REASONING_SCRATCHPAD>\n{msg['content'] or ''}"
        calls = []
        for i, c in enumerate(step.get("tool_calls") or []):
            args = c.get("arguments", {})
            calls.append(
                {
                    "id": c.get("id", f"call_{n}_{i}"),
                    "type": "function",
                    "function": {"name": c["name"], "arguments": args if isinstance(args, str) else json.dumps(args)},
                }
            )
        if calls:
            msg["tool_calls"] = calls
        prompt_tokens = sum(len(str(m.get("content") or "")) for m in body.get("messages", [])) // 4 + 1
        completion_tokens = len(json.dumps(msg)) // 4 + 1
        usage = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            **(step.get("usage") or {}),
        }
        if step.get("cost") is not None:
            usage["cost"] = step["cost"]
        return {
            "id": f"chatcmpl-{n}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": step.get("model") or body.get("model", "scripted"),
            "choices": [
                {
                    "index": 0,
                    "message": msg,
                    "finish_reason": step.get("finish_reason") or ("tool_calls" if calls else "stop"),
                }
            ],
            "usage": usage,
        }

    def chunks(self, completion: dict, include_usage: bool) -> list[dict]:
        """A chat completion as the OpenAI streaming chunks that add up to it."""
        n = self.chunk_chars
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
