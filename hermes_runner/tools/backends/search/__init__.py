"""Web search backends, one module each, behind `SearchBackend` (in `base`); the factory is here.

Part of the ground floor of `tools/`: it imports only the other backends and vocabulary."""

from __future__ import annotations

import httpx2

from hermes_runner.config import SearchKind, WebConfig
from hermes_runner.errors import ConfigError
from hermes_runner.tools.backends.search.base import SearchBackend, SearchHit
from hermes_runner.util.plugins import load

__all__ = ["BACKENDS", "SearchBackend", "SearchHit", "make_search", "missing"]

# tools.web.search_backend -> its class; a user's own by its import path
BACKENDS = {
    SearchKind.searxng: "hermes_runner.tools.backends.search.searxng:SearxngSearch",
    SearchKind.tavily: "hermes_runner.tools.backends.search.tavily:TavilySearch",
}


def missing(cfg: WebConfig) -> str | None:
    """Why web search cannot run with this config (None: it can)."""
    if not cfg.search_backend:
        return "no search backend (set tools.web.search_backend=searxng with tools.web.searxng.url, or =tavily)"
    try:
        return load(cfg.search_backend, BACKENDS, "tools.web.search_backend").missing(cfg)
    except ConfigError as exc:
        return str(exc)


def make_search(cfg: WebConfig, user_agent: str) -> SearchBackend:
    client = httpx2.AsyncClient(timeout=httpx2.Timeout(cfg.search_timeout_s), headers={"User-Agent": user_agent})
    return load(cfg.search_backend, BACKENDS, "tools.web.search_backend")(cfg, client)
