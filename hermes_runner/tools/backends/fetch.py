"""HTTP downloads for tools: size and time limits, redirects checked hop by hop.

Unless private addresses are allowed, every connection goes through the egress proxy, which
connects only to the public address it resolved itself: a host that answers DNS with a public
address for the check and a private one for the connection (DNS rebinding) is refused too.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from urllib.parse import urljoin

import httpx2

from hermes_runner.config import FetchConfig
from hermes_runner.errors import BlockedURL, ToolError
from hermes_runner.tools.backends.egress import REFUSED_HEADER, EgressProxy
from hermes_runner.tools.backends.netguard import check_url

REDIRECTS = (301, 302, 303, 307, 308)


@dataclass(slots=True)
class Fetched:
    url: str  # final URL, after redirects
    status: int
    media_type: str  # e.g. text/html (lower case, no parameters)
    charset: str | None
    body: bytes
    truncated: bool  # the body was cut at max_bytes

    def text(self) -> str:
        return self.body.decode(self.charset or "utf-8", errors="replace")


class Fetcher:
    """One connection pool per run, shared by every task's tools."""

    def __init__(self, cfg: FetchConfig, allow_private: bool):
        self.cfg = cfg
        self.allow_private = allow_private
        self._client: httpx2.AsyncClient | None = None
        self._egress: EgressProxy | None = None
        self._starting = asyncio.Lock()

    async def _http(self) -> httpx2.AsyncClient:
        """The client, made on first use (with the egress proxy started, unless private addresses are allowed)."""
        async with self._starting:
            if self._client is None:
                proxy = None
                if not self.allow_private:
                    self._egress = EgressProxy()
                    proxy = await self._egress.start()
                self._client = httpx2.AsyncClient(
                    follow_redirects=False,
                    timeout=httpx2.Timeout(self.cfg.timeout_s),
                    headers={"User-Agent": self.cfg.user_agent},
                    proxy=proxy,
                    trust_env=proxy is None,
                )
        return self._client

    async def get(self, url: str, max_bytes: int | None = None) -> Fetched:
        """GET `url`; a ToolError says why it could not be had."""
        limit = max_bytes or self.cfg.max_bytes
        try:
            async with asyncio.timeout(self.cfg.timeout_s):
                return await self._get(url, limit)
        except TimeoutError:
            raise ToolError(f"timed out after {self.cfg.timeout_s:g}s fetching {url}") from None
        except httpx2.ProxyError as exc:  # the egress proxy refused the CONNECT of an https URL
            raise BlockedURL(
                f"fetching {url} was blocked: {exc} (a private or local address, or unreachable)"
            ) from None
        except httpx2.HTTPError as exc:
            raise ToolError(f"fetching {url} failed: {type(exc).__name__}: {exc}") from None

    async def _get(self, url: str, limit: int) -> Fetched:
        client = await self._http()
        for _ in range(self.cfg.max_redirects + 1):
            await check_url(url, self.allow_private)
            async with client.stream("GET", url) as resp:
                if REFUSED_HEADER in resp.headers:
                    reason = (await resp.aread()).decode(errors="replace")
                    raise BlockedURL(f"fetching {url} was blocked: {reason}")
                location = resp.headers.get("location")
                if resp.status_code in REDIRECTS and location:
                    url = urljoin(url, location)
                    continue
                body = bytearray()
                truncated = False
                async for chunk in resp.aiter_bytes():
                    body += chunk
                    if len(body) > limit:
                        del body[limit:]
                        truncated = True
                        break
                media, _, params = resp.headers.get("content-type", "").partition(";")
                charset = None
                for param in params.split(";"):
                    key, _, value = param.strip().partition("=")
                    if key.lower() == "charset" and value:
                        charset = value.strip("\"' ")
                return Fetched(str(resp.url), resp.status_code, media.strip().lower(), charset, bytes(body), truncated)
        raise ToolError(f"too many redirects (more than {self.cfg.max_redirects}) from {url}")

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()
        if self._egress is not None:
            await self._egress.aclose()
