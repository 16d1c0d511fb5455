"""A loopback HTTP(S) forward proxy that connects only to public addresses.

Chromium sends every request through it (redirect hops, iframes, workers included), and
it connects to the very address it checked, so neither a redirect nor DNS rebinding lets
a page reach this host or its private network.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
from collections.abc import Callable
from urllib.parse import urlsplit

from hermes_runner.errors import Refused
from hermes_runner.tools.backends.netguard import is_public

log = logging.getLogger(__name__)

HOP_HEADERS = (b"connection", b"proxy-connection", b"keep-alive", b"proxy-authorization")
MAX_HEAD = 65536
REFUSED_HEADER = "X-Hermes-Egress-Refused"  # on the proxy's own error replies (never on a server's)


class EgressProxy:
    def __init__(self, is_allowed: Callable[[str], bool] = is_public) -> None:
        self.is_allowed = is_allowed  # address -> may we connect to it
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task] = set()
        self.url = ""
        self.refused: list[str] = []  # host:port of refused connections (most recent last)

    async def start(self) -> str:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, limit=MAX_HEAD)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}"
        return self.url

    async def aclose(self) -> None:
        if self._server is not None:
            self._server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.ensure_future(self._handle(reader, writer))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _open(self, host: str, port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        try:
            infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise Refused(f"cannot resolve {host}: {exc.strerror}", 502) from None
        addrs = [info[4][0] for info in infos]
        if not addrs or not all(self.is_allowed(a) for a in addrs):
            self.refused.append(f"{host}:{port}")
            raise Refused(f"{host} resolves to a private or local address; blocked (tools.allow_private_urls)")
        try:
            return await asyncio.open_connection(addrs[0], port)
        except OSError as exc:
            raise Refused(f"cannot connect to {host}:{port}: {exc.strerror or exc}", 502) from None

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        upstream: asyncio.StreamWriter | None = None
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            line, *headers = head[:-4].split(b"\r\n")
            method, target, version = line.decode("latin-1").split(" ", 2)
            if method == "CONNECT":
                host, _, port = target.rpartition(":")
                up_reader, upstream = await self._open(host.strip("[]"), int(port or 443))
                writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            else:
                url = urlsplit(target)
                if url.scheme != "http" or not url.hostname:
                    raise Refused(f"unsupported proxy request {target!r}")
                up_reader, upstream = await self._open(url.hostname, url.port or 80)
                path = (url.path or "/") + (f"?{url.query}" if url.query else "")
                kept = [h for h in headers if h.split(b":", 1)[0].strip().lower() not in HOP_HEADERS]
                upstream.write(
                    f"{method} {path} {version}\r\n".encode("latin-1")
                    + b"".join(h + b"\r\n" for h in kept)
                    + b"Connection: close\r\n\r\n"
                )
            sending = asyncio.ensure_future(_pipe(reader, upstream))
            try:
                await _pipe(up_reader, writer)  # the connection ends with the server's side
            finally:
                sending.cancel()
        except Refused as exc:
            body = f"{'blocked' if exc.status == 403 else 'failed'} by hermes-runner: {exc}".encode()
            reason = "Forbidden" if exc.status == 403 else "Bad Gateway"
            writer.write(
                f"HTTP/1.1 {exc.status} {reason}\r\nContent-Type: text/plain\r\nConnection: close\r\n".encode()
                + f"{REFUSED_HEADER}: {exc.status}\r\n".encode()
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
        except (OSError, ValueError, asyncio.IncompleteReadError, asyncio.LimitOverrunError) as exc:
            log.debug("egress proxy connection failed: %s", exc)
        finally:
            for w in (writer, upstream):
                if w is not None:
                    with contextlib.suppress(Exception):
                        w.close()


async def _pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
    try:
        while data := await src.read(65536):
            dst.write(data)
            await dst.drain()
    except OSError:
        pass
    finally:
        with contextlib.suppress(Exception):
            dst.write_eof()
