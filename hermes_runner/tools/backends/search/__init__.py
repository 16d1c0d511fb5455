"""Web search backends, one module each, behind `SearchBackend` (in `base`); the factory is here.

Part of the ground floor of `tools/`: it imports only the other backends and vocabulary."""

from __future__ import annotations

import os

import httpx2

from hermes_runner.config import SearchKind, WebConfig
from hermes_runner.tools.backends.search.base import SearchBackend, SearchHit

__all__ = ["BACKENDS", "SearchBackend", "SearchHit", "make_search", "missing"]

BACKENDS = tuple(SearchKind)


def missing(cfg: WebConfig) -> str | None:
    """Why web search cannot run with this config (None: it can)."""
    backend = cfg.search_backend
    if not backend:
        return "no search backend (set tools.web.search_backend=searxng with tools.web.searxng.url, or =tavily)"
    if backend not in BACKENDS:
        return f"unknown tools.web.search_backend {backend!r} (known: {', '.join(BACKENDS)})"
    if backend == SearchKind.searxng and not cfg.searxng.url:
        return "tools.web.searxng.url is not set"
    if backend == SearchKind.tavily and not os.environ.get(cfg.tavily.api_key_env):
        return f"the environment variable {cfg.tavily.api_key_env} (Tavily API key) is not set"
    return None


def make_search(cfg: WebConfig, user_agent: str) -> SearchBackend:
    client = httpx2.AsyncClient(timeout=httpx2.Timeout(cfg.search_timeout_s), headers={"User-Agent": user_agent})
    if cfg.search_backend == SearchKind.searxng:
        from hermes_runner.tools.backends.search.searxng import SearxngSearch

        return SearxngSearch(cfg.searxng, client)
    from hermes_runner.tools.backends.search.tavily import TavilySearch

    return TavilySearch(cfg.tavily, client, os.environ[cfg.tavily.api_key_env])
