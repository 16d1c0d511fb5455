"""Refuse URLs that would let a model reach this host or its private network (SSRF guard)."""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from urllib.parse import urlsplit

from hermes_runner.errors import BlockedURL

WEB_SCHEMES = ("http", "https")


def is_public(addr: str) -> bool:
    ip = ipaddress.ip_address(addr.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


async def check_url(url: str, allow_private: bool, schemes: tuple[str, ...] = WEB_SCHEMES) -> None:
    """Raise BlockedURL unless `url` uses an allowed scheme and (unless allowed) resolves to public addresses only."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise BlockedURL(f"invalid URL {url!r}: {exc}") from None
    if parts.scheme.lower() not in schemes:
        raise BlockedURL(f"only {', '.join(schemes)} URLs are allowed, not {url!r}")
    host = parts.hostname
    if not host:
        raise BlockedURL(f"URL has no host: {url!r}")
    if allow_private:
        return
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port or 443, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise BlockedURL(f"cannot resolve host {host!r}: {exc.strerror}") from None
    private = sorted({info[4][0] for info in infos if not is_public(info[4][0])})
    if private:
        raise BlockedURL(
            f"{host} resolves to a private or local address ({', '.join(private)}); "
            "such URLs are blocked (tools.allow_private_urls=true allows them)"
        )
