"""HTTP to an OpenAI-compatible chat endpoint: one shared aiohttp pool, errors as the openai SDK's types.

The runner makes thousands of small calls per minute, and the SDK's generic request
machinery (options models, header and URL objects per call) cost more CPU than the
call itself. This module sends the JSON body the model client built, over one
keep-alive pool, and raises exactly what the SDK would (``openai.RateLimitError``,
``openai.APITimeoutError``, ...), so retry policy and hooks see the same exceptions.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import aiohttp
import httpx2
import openai

from hermes_runner import __version__

CHAT_PATH = "/chat/completions"

_STATUS_ERRORS: dict[int, type[openai.APIStatusError]] = {
    400: openai.BadRequestError,
    401: openai.AuthenticationError,
    403: openai.PermissionDeniedError,
    404: openai.NotFoundError,
    409: openai.ConflictError,
    422: openai.UnprocessableEntityError,
    429: openai.RateLimitError,
}


def status_error(response: httpx2.Response) -> openai.APIStatusError:
    """The SDK's exception for an error response (same class, message and body as the SDK raises)."""
    text = response.text.strip()
    message = f"Error code: {response.status_code}"
    body: object = text
    try:
        body = json.loads(text)
    except ValueError:
        pass
    data = body.get("error", body) if isinstance(body, dict) else body
    detail = data.get("message") if isinstance(data, dict) else None
    if isinstance(detail, str) and detail:
        message += f" - {detail}"
    status = response.status_code
    cls = _STATUS_ERRORS.get(status) or (openai.InternalServerError if status >= 500 else openai.APIStatusError)
    return cls(message, response=response, body=data)


class ChatHttp:
    """POSTs chat-completions bodies; `post` returns the body, `events` yields server-sent event data."""

    def __init__(self, base_url: str, api_key: str, headers: dict[str, str] | None, timeout_s: float, pool_size: int):
        self.url = base_url.rstrip("/") + CHAT_PATH
        self._headers = {
            "Content-Type": "application/json",
            "Accept": "application/json",
            "User-Agent": f"hermes-runner/{__version__}",
            **(headers or {}),
            "Authorization": f"Bearer {api_key}",
        }
        self._timeout = aiohttp.ClientTimeout(total=None, sock_connect=timeout_s, sock_read=timeout_s)
        self._pool_size = pool_size
        self._session: aiohttp.ClientSession | None = None
        self._request = httpx2.Request("POST", self.url)  # what the SDK's exceptions carry

    def _open(self) -> aiohttp.ClientSession:
        if self._session is None:  # created in the running event loop
            connector = aiohttp.TCPConnector(limit=self._pool_size, keepalive_timeout=60)
            self._session = aiohttp.ClientSession(
                connector=connector, timeout=self._timeout, trust_env=True, auto_decompress=True
            )
        return self._session

    async def post(self, body: bytes) -> bytes:
        try:
            async with self._open().post(self.url, data=body, headers=self._headers) as resp:
                data = await resp.read()
                if resp.status >= 400:
                    raise self._status_error(resp, data)
                return data
        except aiohttp.ClientError as exc:
            raise self._connection_error(exc) from exc
        except TimeoutError as exc:
            raise openai.APITimeoutError(request=self._request) from exc

    async def events(self, body: bytes) -> AsyncIterator[str]:
        """The `data` of each server-sent event of a streamed reply, in order."""
        try:
            async with self._open().post(self.url, data=body, headers=self._headers) as resp:
                if resp.status >= 400:
                    raise self._status_error(resp, await resp.read())
                buf = b""
                data: list[bytes] = []
                async for chunk in resp.content.iter_any():
                    *lines, buf = (buf + chunk).split(b"\n")
                    for line in lines:
                        line = line.rstrip(b"\r")
                        if line:
                            if line.startswith(b"data:"):
                                data.append(line[6:] if line[5:6] == b" " else line[5:])
                            continue  # comments (": keep-alive"), event:, id:, retry: lines
                        if data:
                            yield b"\n".join(data).decode()
                            data = []
                if buf.startswith(b"data:"):
                    data.append(buf[6:] if buf[5:6] == b" " else buf[5:])
                if data:
                    yield b"\n".join(data).decode()
        except aiohttp.ClientError as exc:
            raise self._connection_error(exc) from exc
        except TimeoutError as exc:
            raise openai.APITimeoutError(request=self._request) from exc

    def _status_error(self, resp: aiohttp.ClientResponse, data: bytes) -> openai.APIStatusError:
        return status_error(
            httpx2.Response(resp.status, headers=list(resp.headers.items()), content=data, request=self._request)
        )

    def _connection_error(self, exc: aiohttp.ClientError) -> openai.APIConnectionError:
        if isinstance(exc, aiohttp.ServerTimeoutError):
            return openai.APITimeoutError(request=self._request)
        return openai.APIConnectionError(message=f"Connection error: {exc}", request=self._request)

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None
