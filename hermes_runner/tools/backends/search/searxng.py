"""SearXNG (self-hosted metasearch) through its JSON API: GET /search?q=...&format=json."""

from __future__ import annotations

import httpx2

from hermes_runner.config import WebConfig
from hermes_runner.errors import ToolError
from hermes_runner.tools.backends.search.base import SearchHit


class SearxngSearch:
    name = "searxng"

    def __init__(self, web: WebConfig, client: httpx2.AsyncClient):
        self.cfg = web.searxng
        self._client = client
        self._url = self.cfg.url.rstrip("/") + "/search"

    @staticmethod
    def missing(web: WebConfig) -> str | None:
        return None if web.searxng.url else "tools.web.searxng.url is not set"

    async def search(self, query: str, limit: int) -> list[SearchHit]:
        params: dict[str, str | int] = {"q": query, "format": "json"}
        for key in ("categories", "language", "safesearch"):
            value = getattr(self.cfg, key)
            if value is not None:
                params[key] = value
        hits: list[SearchHit] = []
        seen: set[str] = set()
        for page in range(1, 4):  # an instance returns ~10-20 results a page
            params["pageno"] = page
            results = await self._page(params)
            if not results:
                break
            for r in results:
                url = r.get("url") or ""
                if url and url not in seen:
                    seen.add(url)
                    hits.append(SearchHit(str(r.get("title") or ""), url, str(r.get("content") or "")))
            if len(hits) >= limit:
                break
        return hits[:limit]

    async def _page(self, params: dict) -> list[dict]:
        try:
            resp = await self._client.get(self._url, params=params)
        except httpx2.HTTPError as exc:
            raise ToolError(f"SearXNG request failed: {type(exc).__name__}: {exc}") from None
        if resp.status_code == 403:
            raise ToolError("SearXNG refused the JSON format (add `json` to search.formats in its settings.yml)")
        if resp.status_code != 200:
            raise ToolError(f"SearXNG answered HTTP {resp.status_code}")
        try:
            return list(resp.json().get("results") or [])
        except ValueError:
            raise ToolError("SearXNG did not answer with JSON") from None

    async def aclose(self) -> None:
        await self._client.aclose()
