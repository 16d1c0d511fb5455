"""A headless Chromium per run (Playwright), one isolated browser context per task.

The browser starts on the first browser tool call of the run. Each task gets its own
context (cookies, storage, cache, history), closed when the task ends.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
from typing import TYPE_CHECKING, Any

from hermes_runner.config import BrowserConfig
from hermes_runner.errors import ToolError
from hermes_runner.services.netguard import BlockedURL, check_url

if TYPE_CHECKING:
    from playwright.async_api import Browser, BrowserContext, Page, Playwright, Route

    from hermes_runner.tools.registry import ToolContext

log = logging.getLogger(__name__)

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
STATE_KEY = "browser"
PASS_SCHEMES = ("data", "blob", "about")


def find_chromium(cfg: BrowserConfig) -> str | None:
    if cfg.executable:
        return shutil.which(cfg.executable)
    for name in CANDIDATES:
        if path := shutil.which(name):
            return path
    return None


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
        self._host_ok: dict[str, bool] = {}
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
            try:
                self._browser = await self._pw.chromium.launch(
                    executable_path=self.executable,
                    headless=self.cfg.headless,
                    args=list(self.cfg.args),
                    timeout=60_000,
                )
            except Exception as exc:  # noqa: BLE001 - any launch failure is reported to the model
                raise ToolError(f"the browser could not start: {str(exc).splitlines()[0]}") from None
            log.info("started Chromium %s (%s)", self._browser.version, self.executable)
            return self._browser

    def current(self, ctx: ToolContext) -> BrowserSession | None:
        s = ctx.state.get(STATE_KEY)
        return s if s is not None and not s.closed else None

    async def session(self, ctx: ToolContext) -> BrowserSession:
        """The task's session, created (with a fresh context) on first use."""
        s = self.current(ctx)
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
        if not self.allow_private:
            await context.route("**/*", self._guard)
        page = await context.new_page()
        s = BrowserSession(context, page)
        ctx.state[STATE_KEY] = s
        ctx.on_close(s.close)
        self.contexts_opened += 1
        return s

    async def _guard(self, route: Route) -> None:
        """Let a request through only if it goes to a public address."""
        url = route.request.url
        scheme = url.split(":", 1)[0].lower()
        if scheme in PASS_SCHEMES:
            await route.continue_()
            return
        host = url.split("//", 1)[-1].split("/", 1)[0]
        ok = self._host_ok.get(f"{scheme}://{host}")
        if ok is None:
            try:
                await check_url(url, False)
                ok = True
            except BlockedURL:
                ok = False
            self._host_ok[f"{scheme}://{host}"] = ok
        await (route.continue_() if ok else route.abort("blockedbyclient"))

    def open_contexts(self) -> int:
        return len(self._browser.contexts) if self._browser is not None and self._browser.is_connected() else 0

    async def aclose(self) -> None:
        if self._browser is not None:
            try:
                await self._browser.close()
            except Exception:  # noqa: BLE001
                log.debug("closing the browser failed", exc_info=True)
        if self._pw is not None:
            await self._pw.stop()
        self._browser = self._pw = None


