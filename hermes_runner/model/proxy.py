"""The recording model proxy: an OpenAI-compatible chat-completions endpoint served by the runner on one unix
socket per prompt, for an agent program in that prompt's sandbox (agent/external.py).

Each prompt's socket answers only its own bearer token (the real API key never leaves the runner); every call is
handed to that prompt's `Serve` callback, which goes through the run's own model path (cache, meters, retries)
and records it. A `stream: true` request gets the whole reply as one SSE chunk, then a usage chunk and [DONE].
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import os
import secrets
import socket
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from hermes_runner.errors import ModelCallError, Refused
from hermes_runner.model.base import Completion

log = logging.getLogger(__name__)

# One call of the agent program: its request body (the JSON object it sent) -> the reply.
Serve = Callable[[dict], Awaitable[Completion]]
SOCKET = ".hermes-model.sock"  # the socket's name in a prompt's shared dir
MAX_BODY = 64 << 20  # a request body larger than this is refused (413)


@dataclass
class Route:
    """One prompt's endpoint: its socket, its token, where its calls go."""

    path: Path
    token: str
    serve: Serve
    model: str  # the name the replies carry
    fd: int  # the socket's directory, opened (O_PATH) for as long as the route is
    name: str = SOCKET  # the socket's file name in that directory
    site: web.SockSite | None = None

    @property
    def address(self) -> str:
        return f"/proc/self/fd/{self.fd}/{self.name}"


def reply_body(completion: Completion, model: str) -> dict:
    """The chat.completion object of a completion (`reasoning` as the `reasoning_content` field)."""
    msg = {"role": "assistant", "content": completion.message.get("content") or ""}
    if completion.message.get("tool_calls"):
        msg["tool_calls"] = completion.message["tool_calls"]
    if completion.message.get("reasoning"):
        msg["reasoning_content"] = completion.message["reasoning"]
    u = completion.usage
    return {
        "id": f"chatcmpl-{secrets.token_hex(8)}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": completion.model or model,
        "choices": [{"index": 0, "message": msg, "finish_reason": completion.finish_reason or "stop"}],
        "usage": {
            "prompt_tokens": u.prompt_tokens,
            "completion_tokens": u.completion_tokens,
            "total_tokens": u.prompt_tokens + u.completion_tokens,
        },
    }


def stream_events(body: dict) -> bytes:
    """The SSE form of a reply: one chunk with the whole message, a usage chunk, [DONE]."""
    msg, choice = body["choices"][0]["message"], body["choices"][0]
    delta = dict(msg)
    if "tool_calls" in delta:
        delta["tool_calls"] = [{"index": i, **c} for i, c in enumerate(delta["tool_calls"])]
    head = {k: body[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    chunks = [
        head | {"choices": [{"index": 0, "delta": delta, "finish_reason": choice["finish_reason"]}]},
        head | {"choices": [], "usage": body["usage"]},
    ]
    return b"".join(f"data: {json.dumps(c, ensure_ascii=False)}\n\n".encode() for c in chunks) + b"data: [DONE]\n\n"


def _error(status: int, message: str, kind: str) -> web.Response:
    return web.json_response({"error": {"message": message, "type": kind, "code": status}}, status=status)


class ModelProxy:
    """One aiohttp server; a unix socket per open route (prompt)."""

    def __init__(self) -> None:
        self._runner: web.AppRunner | None = None
        self._routes: dict[str, Route] = {}  # socket path -> route

    async def start(self) -> None:
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/chat/completions", self._chat)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/models", self._models)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()

    async def open(self, directory: Path, serve: Serve, model: str, name: str = SOCKET) -> Route:
        """Listen on a socket `name` in `directory` (any uid may connect: the sandbox's) for one prompt's calls.

        The socket is bound through /proc/self/fd/N/: a prompt's dir may be longer than a socket path may be."""
        if self._runner is None:
            await self.start()
        fd = os.open(directory, os.O_PATH | os.O_DIRECTORY)
        route = Route(directory / name, secrets.token_urlsafe(32), serve, model, fd, name)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(route.address)
            os.chmod(name, 0o666, dir_fd=fd)
        except OSError:
            sock.close()
            os.close(fd)
            raise
        route.site = web.SockSite(self._runner, sock)
        await route.site.start()
        self._routes[route.address] = route
        return route

    async def close(self, route: Route) -> None:
        if self._routes.pop(route.address, None) is None:
            return
        if route.site is not None:
            await route.site.stop()
        with contextlib.suppress(OSError):
            os.unlink(route.name, dir_fd=route.fd)
        os.close(route.fd)

    async def aclose(self) -> None:
        for route in list(self._routes.values()):
            await self.close(route)
        if self._runner is not None:
            await self._runner.cleanup()

    def _route(self, request: web.Request) -> Route | None:
        """The route of the socket the request came in on, when its bearer token is that route's."""
        sock = request.transport.get_extra_info("sockname") if request.transport else None
        route = self._routes.get(str(sock))
        given = request.headers.get("Authorization", "").removeprefix("Bearer ").strip()
        if route is None or not hmac.compare_digest(given.encode(), route.token.encode()):
            return None
        return route

    async def _models(self, request: web.Request) -> web.Response:
        route = self._route(request)
        if route is None:
            return _error(401, "unknown or missing token", "authentication_error")
        return web.json_response({"object": "list", "data": [{"id": route.model, "object": "model"}]})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        route = self._route(request)
        if route is None:
            return _error(401, "unknown or missing token", "authentication_error")
        try:
            body = await request.json()
        except ValueError as exc:
            return _error(400, f"the request body is not JSON: {exc}", "invalid_request_error")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _error(400, "the request needs a `messages` list", "invalid_request_error")
        try:
            completion = await route.serve(body)
        except Refused as exc:
            return _error(exc.status, str(exc), "invalid_request_error")
        except ModelCallError as exc:
            return _error(502, f"the model call failed: {exc}", "api_error")
        out = reply_body(completion, route.model)
        if not body.get("stream"):
            return web.json_response(out)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        await resp.write(stream_events(out))
        await resp.write_eof()
        return resp
