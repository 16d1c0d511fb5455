"""A headless Chromium per run (Playwright), one isolated browser context per task.

The browser starts on the first browser tool call of the run. Each task gets its own
context (cookies, storage, cache, history), closed when the task ends. Unless private
addresses are allowed, all its traffic goes through `EgressProxy`.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from hermes_runner.config import BrowserConfig
from hermes_runner.errors import ToolError
from hermes_runner.tools.backends.egress import EgressProxy
from hermes_runner.util.text import first_line

if TYPE_CHECKING:
    from playwright.async_api import Browser, BrowserContext, Page, Playwright

log = logging.getLogger(__name__)

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
STATE_KEY = "browser"


def find_chromium(cfg: BrowserConfig) -> str | None:
    if cfg.executable:
        return shutil.which(cfg.executable)
    return next((path for name in CANDIDATES if (path := shutil.which(name))), None)


class BrowserSession:
    """One task's browser context and its current page."""

    def __init__(self, context: BrowserContext, page: Page):
        self.context = context
        self.page = page
        self.closed = False
        context.on("page", self._on_page)  # links opening a new tab: follow it

    def _on_page(self, page: Page) -> None:
        self.page = page

    async def close(self) -> None:
        if not self.closed:
            self.closed = True
            await self.context.close()


class BrowserService:
    def __init__(self, cfg: BrowserConfig, allow_private: bool):
        self.cfg = cfg
        self.allow_private = allow_private
        self.executable = find_chromium(cfg)
        self._pw: Playwright | None = None
        self._browser: Browser | None = None
        self._lock = asyncio.Lock()
        self.egress: EgressProxy | None = None
        self.contexts_opened = 0

    async def _get_browser(self) -> Browser:
        async with self._lock:
            if self._browser is not None and self._browser.is_connected():
                return self._browser
            if self.executable is None:
                raise ToolError("no Chromium executable found (install chromium or set tools.browser.executable)")
            from playwright.async_api import async_playwright

            if self._pw is None:
                self._pw = await async_playwright().start()
            proxy = None
            if not self.allow_private:  # every request, redirects included, goes through the guard
                self.egress = self.egress or EgressProxy()
                if not self.egress.url:
                    await self.egress.start()
                proxy = {"server": self.egress.url, "bypass": "<-loopback>"}
            try:
                self._browser = await self._pw.chromium.launch(
                    executable_path=self.executable,
                    headless=self.cfg.headless,
                    args=list(self.cfg.args),
                    proxy=proxy,
                    timeout=60_000,
                )
            except Exception as exc:  # noqa: BLE001 - any launch failure is reported to the model
                raise ToolError(f"the browser could not start: {first_line(exc, None)}") from None
            log.info("started Chromium %s (%s)", self._browser.version, self.executable)
            return self._browser

    def current(self, state: dict) -> BrowserSession | None:
        """The session kept in a task's tool `state`, if one is open."""
        s = state.get(STATE_KEY)
        return s if s is not None and not s.closed else None

    async def session(self, state: dict, on_close: Callable[[Callable[[], Awaitable[None]]], None]) -> BrowserSession:
        """The task's session, kept in its tool `state`: created (with a fresh context) on first use, and
        closed by the cleanup it hands to `on_close` when the task ends."""
        s = self.current(state)
        if s is not None:
            return s
        browser = await self._get_browser()
        context = await browser.new_context(
            viewport={"width": self.cfg.viewport_width, "height": self.cfg.viewport_height},
            accept_downloads=False,
            service_workers="block",
        )
        context.set_default_timeout(self.cfg.action_timeout_s * 1000)
        context.set_default_navigation_timeout(self.cfg.navigation_timeout_s * 1000)
        page = await context.new_page()
        s = BrowserSession(context, page)
        state[STATE_KEY] = s
        on_close(s.close)
        self.contexts_opened += 1
        return s

    def open_contexts(self) -> int:
        return len(self._browser.contexts) if self._browser is not None and self._browser.is_connected() else 0

    async def aclose(self) -> None:
        if self._browser is not None:
            try:
                await self._browser.close()
            except Exception:
                log.debug("closing the browser failed", exc_info=True)
        if self._pw is not None:
            await self._pw.stop()
        if self.egress is not None:
            await self.egress.aclose()
        self._browser = self._pw = self.egress = None
