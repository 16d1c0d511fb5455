"""An aiohttp app served on loopback, from the caller's event loop or from a thread with its own."""

from __future__ import annotations

import asyncio
import threading
from typing import Self

from aiohttp import web


class LoopbackApp:
    """Subclasses build `app()`; `start()`/`stop()` serve it from a daemon thread (tests, benchmarks)."""

    host = "127.0.0.1"
    port = 0  # 0: a free port, known after start

    _runner: web.AppRunner | None = None
    _thread: threading.Thread | None = None
    _loop: asyncio.AbstractEventLoop | None = None

    def app(self) -> web.Application:
        raise NotImplementedError

    async def start_async(self) -> None:
        self._runner = web.AppRunner(self.app(), access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, backlog=1024)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]

    async def stop_async(self) -> None:
        if self._runner:
            await self._runner.cleanup()

    def start(self) -> Self:
        """Serve from a background thread with its own event loop; returns once listening."""
        ready = threading.Event()

        def main() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(self.start_async())
            ready.set()
            self._loop.run_forever()
            self._loop.run_until_complete(self.stop_async())
            self._loop.close()

        self._thread = threading.Thread(target=main, name=type(self).__name__, daemon=True)
        self._thread.start()
        ready.wait(10)
        return self

    def stop(self) -> None:
        if self._loop and self._thread:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
