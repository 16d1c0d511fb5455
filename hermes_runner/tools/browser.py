"""The `browser` toolset: drive a real headless Chromium through its accessibility tree.

`browser_snapshot` lists the page as accessibility text where elements carry refs
(`[ref=e5]`); click and type take those refs. Each task has its own browser context.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import wraps

from hermes_runner.errors import ToolError
from hermes_runner.tools.backends.browser import BrowserService, BrowserSession
from hermes_runner.tools.backends.netguard import check_url
from hermes_runner.tools.base import ToolContext, ToolFn, ToolResult, params, text_arg, tool
from hermes_runner.util.text import clip, first_line

NO_ARGS = params()
REF = re.compile(r"^\[?(?:@|ref=)?([a-z]*\d*e\d+)\]?$")
UNNAMED_GENERIC = re.compile(r"^\s*- generic(?: \[[^\]]*\])*:?$")
MAX_IMAGES = 50
SNAPSHOT_CUT = "\n[... snapshot truncated: {n} more characters; scroll or use full=true ...]"


def _browser_tool(name: str, description: str, parameters: dict) -> Callable[[ToolFn], ToolFn]:
    """A tool of the `browser` toolset: browser failures (timeouts, detached elements, crashed pages) go back to
    the model as tool errors."""

    def wrap(fn: ToolFn) -> ToolFn:
        @wraps(fn)
        async def run(ctx: ToolContext, args: dict) -> ToolResult:
            from playwright.async_api import Error as PlaywrightError

            try:
                return await fn(ctx, args)
            except PlaywrightError as exc:
                raise ToolError(first_line(exc, None).removeprefix("Error: ")[:500]) from None

        return tool("browser", name, description, parameters)(run)

    return wrap


def _open(ctx: ToolContext) -> BrowserSession:
    s = ctx.service("browser").current(ctx.state)
    if s is None:
        raise ToolError("no page is open: call browser_navigate first")
    return s


def _ref(args: dict) -> str:
    raw = args.get("ref")
    m = REF.match(raw.strip()) if isinstance(raw, str) else None
    if not m:
        raise ToolError(f"'ref' must be an element ref from browser_snapshot such as @e5, not {raw!r}")
    return m.group(1)


async def _on_ref(ctx: ToolContext, s: BrowserSession, ref: str, action: str, *args: str) -> None:
    """Run a locator action on the element `ref`; a missing or hidden element is explained, not just timed out."""
    from playwright.async_api import TimeoutError as PlaywrightTimeout

    try:
        await getattr(s.page.get_by_ref(ref), action)(*args)
    except PlaywrightTimeout:
        timeout = ctx.service("browser").cfg.action_timeout_s
        raise ToolError(
            f"element {ref} was not found or could not be used within {timeout:g}s; "
            "refs change with every snapshot: take a new browser_snapshot"
        ) from None


async def _snapshot(svc: BrowserService, s: BrowserSession, full: bool) -> tuple[str, bool]:
    text = await s.page.aria_snapshot(mode="ai", timeout=svc.cfg.action_timeout_s * 1000)
    if not full:
        text = "\n".join(line for line in text.splitlines() if not UNNAMED_GENERIC.match(line))
    limit = svc.cfg.full_snapshot_max_chars if full else svc.cfg.snapshot_max_chars
    return clip(text, limit, SNAPSHOT_CUT, head=1, lines=True), len(text) > limit


async def _where(s: BrowserSession) -> dict:
    return {"url": s.page.url, "title": await s.page.title()}


@_browser_tool(
    "browser_navigate",
    "Open a URL in the browser (a fresh session per task) and return the page's title and a compact "
    "accessibility snapshot. For plain reading prefer web_search/web_extract; use the browser to "
    "interact with pages (click, fill forms, dynamic content).",
    params("url", url={"type": "string", "description": "The URL to open (http or https)."}),
)
async def browser_navigate(ctx: ToolContext, args: dict) -> ToolResult:
    svc = ctx.service("browser")
    url = text_arg(args, "url")
    url = url.strip()
    if "://" not in url:
        url = "https://" + url
    await check_url(url, svc.allow_private)
    s = await svc.session(ctx.state, ctx.on_close)
    resp = await s.page.goto(url, wait_until="domcontentloaded")
    snapshot, truncated = await _snapshot(svc, s, full=False)
    out = {"success": True, **await _where(s), "status": resp.status if resp else None, "snapshot": snapshot}
    if truncated:
        out["snapshot_truncated"] = True
    return ToolResult.of(out, ok=resp is None or resp.status < 400)


@_browser_tool(
    "browser_snapshot",
    "Get a text snapshot of the current page's accessibility tree. Elements carry refs like "
    "[ref=e5] for browser_click and browser_type. full=false (default): compact view; "
    "full=true: the complete tree. Refs change with every snapshot.",
    params(full={"type": "boolean", "description": "Return the complete tree (default false)."}),
)
async def browser_snapshot(ctx: ToolContext, args: dict) -> ToolResult:
    s = _open(ctx)
    snapshot, truncated = await _snapshot(ctx.service("browser"), s, full=bool(args.get("full")))
    return ToolResult.of({"success": True, **await _where(s), "snapshot": snapshot, "truncated": truncated})


@_browser_tool(
    "browser_click",
    "Click the element with the given ref from the latest snapshot (e.g. @e5).",
    params("ref", ref={"type": "string", "description": "Element ref from the snapshot, e.g. @e5."}),
)
async def browser_click(ctx: ToolContext, args: dict) -> ToolResult:
    s = _open(ctx)
    ref = _ref(args)
    await _on_ref(ctx, s, ref, "click")
    return ToolResult.of({"success": True, "clicked": ref, **await _where(s)})


@_browser_tool(
    "browser_type",
    "Type text into the input field with the given ref (the field is cleared first).",
    params(
        "ref",
        "text",
        ref={"type": "string", "description": "Element ref from the snapshot, e.g. @e3."},
        text={"type": "string", "description": "The text to type."},
    ),
)
async def browser_type(ctx: ToolContext, args: dict) -> ToolResult:
    s = _open(ctx)
    ref = _ref(args)
    text = args.get("text")
    if not isinstance(text, str):
        raise ToolError("'text' must be a string")
    await _on_ref(ctx, s, ref, "fill", text)
    return ToolResult.of({"success": True, "typed": text, "ref": ref})


@_browser_tool(
    "browser_scroll",
    "Scroll the page up or down by most of a screen to reveal more content.",
    params("direction", direction={"type": "string", "enum": ["up", "down"], "description": "Direction to scroll."}),
)
async def browser_scroll(ctx: ToolContext, args: dict) -> ToolResult:
    s = _open(ctx)
    direction = args.get("direction")
    if direction not in ("up", "down"):
        raise ToolError("'direction' must be 'up' or 'down'")
    pos = await s.page.evaluate(
        "(dy) => { window.scrollBy(0, dy * window.innerHeight * 0.8); "
        "return [Math.round(window.scrollY), Math.max(0, document.documentElement.scrollHeight - window.innerHeight)]; }",
        1 if direction == "down" else -1,
    )
    return ToolResult.of({"success": True, "scroll_y": pos[0], "max_scroll_y": pos[1]})


@_browser_tool("browser_back", "Go back to the previous page in the browser history.", NO_ARGS)
async def browser_back(ctx: ToolContext, args: dict) -> ToolResult:
    s = _open(ctx)
    resp = await s.page.go_back(wait_until="domcontentloaded")
    if resp is None and s.page.url in ("about:blank", ""):
        raise ToolError("there is no previous page")
    return ToolResult.of({"success": True, **await _where(s)})


@_browser_tool(
    "browser_press",
    "Press a keyboard key in the page, e.g. Enter to submit a form, Tab, Escape, ArrowDown.",
    params("key", key={"type": "string", "description": "Key to press (e.g. 'Enter', 'Tab', 'Escape')."}),
)
async def browser_press(ctx: ToolContext, args: dict) -> ToolResult:
    s = _open(ctx)
    key = text_arg(args, "key")
    await s.page.keyboard.press(key.strip())
    await s.page.wait_for_load_state("domcontentloaded")
    return ToolResult.of({"success": True, "pressed": key.strip(), **await _where(s)})


@_browser_tool("browser_get_images", "List the images on the current page with their URLs and alt text.", NO_ARGS)
async def browser_get_images(ctx: ToolContext, args: dict) -> ToolResult:
    s = _open(ctx)
    images = await s.page.evaluate(
        "(n) => Array.from(document.images).slice(0, n).map(i => ({url: i.currentSrc || i.src, alt: i.alt || '',"
        " width: i.naturalWidth, height: i.naturalHeight}))",
        MAX_IMAGES,
    )
    return ToolResult.of({"success": True, "images": images, "count": len(images)})
