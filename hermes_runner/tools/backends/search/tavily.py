"""Tavily (hosted search API): POST /search with a bearer key."""

from __future__ import annotations

import os

import httpx2

from hermes_runner.config import WebConfig
from hermes_runner.errors import ToolError
from hermes_runner.tools.backends.search.base import SearchHit

MAX_RESULTS = 20  # the API's own cap


class TavilySearch:
    name = "tavily"

    def __init__(self, web: WebConfig, client: httpx2.AsyncClient):
        self.cfg = web.tavily
        self._client = client
        self._url = self.cfg.base_url.rstrip("/") + "/search"
        self._headers = {"Authorization": f"Bearer {os.environ[self.cfg.api_key_env]}"}

    @staticmethod
    def missing(web: WebConfig) -> str | None:
        key = web.tavily.api_key_env
        return None if os.environ.get(key) else f"the environment variable {key} (Tavily API key) is not set"

    async def search(self, query: str, limit: int) -> list[SearchHit]:
        body = {"query": query, "max_results": min(limit, MAX_RESULTS), "search_depth": self.cfg.search_depth}
        try:
            resp = await self._client.post(self._url, json=body, headers=self._headers)
        except httpx2.HTTPError as exc:
            raise ToolError(f"Tavily request failed: {type(exc).__name__}: {exc}") from None
        if resp.status_code in (401, 403):
            raise ToolError(f"Tavily refused the API key (HTTP {resp.status_code})")
        if resp.status_code != 200:
            raise ToolError(f"Tavily answered HTTP {resp.status_code}: {resp.text[:200]}")
        try:
            results = resp.json().get("results") or []
        except ValueError:
            raise ToolError("Tavily did not answer with JSON") from None
        return [
            SearchHit(str(r.get("title") or ""), str(r.get("url") or ""), str(r.get("content") or ""))
            for r in results[:limit]
            if r.get("url")
        ]

    async def aclose(self) -> None:
        await self._client.aclose()
