"""HTTP downloads for tools: size and time limits, redirects checked hop by hop."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from urllib.parse import urljoin

import httpx2

from hermes_runner.config import FetchConfig
from hermes_runner.errors import ToolError
from hermes_runner.services.netguard import check_url

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
        self._client = httpx2.AsyncClient(
            follow_redirects=False,
            timeout=httpx2.Timeout(cfg.timeout_s),
            headers={"User-Agent": cfg.user_agent},
        )

    async def get(self, url: str, max_bytes: int | None = None) -> Fetched:
        """GET `url`; a ToolError says why it could not be had."""
        limit = max_bytes or self.cfg.max_bytes
        try:
            async with asyncio.timeout(self.cfg.timeout_s):
                return await self._get(url, limit)
        except TimeoutError:
            raise ToolError(f"timed out after {self.cfg.timeout_s:g}s fetching {url}") from None
        except httpx2.HTTPError as exc:
            raise ToolError(f"fetching {url} failed: {type(exc).__name__}: {exc}") from None

    async def _get(self, url: str, limit: int) -> Fetched:
        for _ in range(self.cfg.max_redirects + 1):
            await check_url(url, self.allow_private)
            async with self._client.stream("GET", url) as resp:
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
        await self._client.aclose()
