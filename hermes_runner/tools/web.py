"""The `web` toolset: search the web and extract pages (HTML as markdown, PDF as text)."""

from __future__ import annotations

import asyncio

from hermes_runner.errors import ToolError
from hermes_runner.tools.backends.extract import TEXT_TYPES, allocate, html_to_markdown, pdf_to_text
from hermes_runner.tools.base import ToolContext, ToolResult, number_arg, params, text_arg, tool
from hermes_runner.util.text import clip

MAX_SEARCH_RESULTS = 100
OMITTED = "\n\n[... {n} characters omitted; ask for a larger char_limit or a narrower URL ...]\n\n"


@tool(
    "web",
    "web_search",
    "Search the web for information. Returns up to 5 results by default with titles, URLs and "
    "descriptions. The query goes to the configured search backend, so operators such as "
    'site:domain or "exact phrase" work when the backend supports them.',
    params(
        "query",
        query={"type": "string", "description": "The search query."},
        limit={
            "type": "integer",
            "minimum": 1,
            "maximum": MAX_SEARCH_RESULTS,
            "description": "Maximum number of results (default 5).",
        },
    ),
)
async def web_search(ctx: ToolContext, args: dict) -> ToolResult:
    svc = ctx.service("web")
    query = text_arg(args, "query")
    limit = number_arg("limit", args.get("limit", 5), int)
    limit = max(1, min(limit, MAX_SEARCH_RESULTS))
    hits = await svc.search.search(query.strip(), limit)
    web = [{"title": h.title, "url": h.url, "description": h.description, "position": i} for i, h in enumerate(hits, 1)]
    return ToolResult.of({"success": True, "data": {"web": web}})


async def _extract_one(svc, url: str) -> dict:
    """Fetch one URL and turn it into text: {url, title, content} or {url, error}."""
    try:
        page = await svc.fetcher.get(url)
    except ToolError as exc:
        return {"url": url, "error": str(exc)}
    if page.status >= 400:
        return {"url": page.url, "error": f"HTTP {page.status}"}
    kind = page.media_type
    try:
        if kind == "application/pdf" or page.body[:5] == b"%PDF-":
            if page.truncated:
                return {"url": page.url, "error": f"PDF larger than {svc.fetcher.cfg.max_bytes} bytes"}
            title, text = await asyncio.to_thread(pdf_to_text, page.body)
        elif kind in ("text/html", "application/xhtml+xml") or (not kind and b"<html" in page.body[:2048].lower()):
            title, text = await asyncio.to_thread(html_to_markdown, page.text(), page.url)
        elif kind.startswith("text/") or kind in TEXT_TYPES:
            title, text = "", page.text()
        else:
            return {"url": page.url, "error": f"unsupported content type {kind or 'unknown'!r}"}
    except ToolError as exc:
        return {"url": page.url, "error": str(exc)}
    out = {"url": page.url, "title": title, "content": text}
    if page.truncated:
        out["note"] = f"the page was cut at {svc.fetcher.cfg.max_bytes} bytes"
    return out


@tool(
    "web",
    "web_extract",
    "Extract the content of up to 5 web pages or PDF URLs as clean markdown/text (no summarisation). "
    "Pages longer than char_limit come back as a head and tail view; all pages of one call share a "
    "character budget. Use a more specific URL or the browser when more context is needed.",
    params(
        "urls",
        urls={
            "type": "array",
            "items": {"type": "string"},
            "maxItems": 5,
            "description": "URLs to extract (max 5 per call).",
        },
        char_limit={
            "type": "integer",
            "minimum": 100,
            "description": "Maximum characters per page (default 15000).",
        },
    ),
)
async def web_extract(ctx: ToolContext, args: dict) -> ToolResult:
    svc = ctx.service("web")
    cfg = svc.cfg
    urls = args.get("urls")
    if isinstance(urls, str):
        urls = [urls]
    if not isinstance(urls, list) or not urls or not all(isinstance(u, str) and u.strip() for u in urls):
        raise ToolError("'urls' must be a non-empty list of URL strings")
    if len(urls) > cfg.max_urls:
        raise ToolError(f"at most {cfg.max_urls} URLs per call, got {len(urls)}")
    wanted = number_arg("char_limit", args.get("char_limit") or cfg.char_limit, int)
    wanted = max(100, min(wanted, cfg.max_char_limit))
    results = await asyncio.gather(*(_extract_one(svc, u.strip()) for u in urls))
    sizes = [len(r.get("content", "")) for r in results]
    for r, size, keep in zip(results, sizes, allocate(sizes, wanted, cfg.call_char_budget), strict=True):
        if "content" in r:
            r["content"] = clip(r["content"], keep, OMITTED, head=0.6)  # a page's start matters most
            r["content_chars"] = size
            r["truncated"] = size > keep
    return ToolResult.of({"results": list(results)}, ok=any("content" in r for r in results))
