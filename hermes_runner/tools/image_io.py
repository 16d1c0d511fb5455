"""Image bytes shared by the vision and image_gen tools: type sniffing and loading."""

from __future__ import annotations

import base64
import binascii

from hermes_runner.errors import ToolError
from hermes_runner.tools.backends.fetch import Fetcher
from hermes_runner.tools.base import ToolContext

EXTENSIONS = {"image/png": "png", "image/jpeg": "jpg", "image/gif": "gif", "image/webp": "webp"}


def sniff(data: bytes) -> str | None:
    """The image's MIME type from its first bytes (PNG, JPEG, GIF, WebP), else None."""
    if data.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if data.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if data.startswith((b"GIF87a", b"GIF89a")):
        return "image/gif"
    if data[:4] == b"RIFF" and data[8:12] == b"WEBP":
        return "image/webp"
    return None


def data_url(data: bytes, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


async def load_image(ctx: ToolContext, source: str, fetcher: Fetcher | None, max_bytes: int) -> tuple[bytes, str]:
    """Image bytes and type from an http(s) URL, a data: URL or a file in the task's sandbox."""
    source = source.strip()
    if source.startswith("data:"):
        head, _, b64 = source.partition(",")
        if ";base64" not in head:
            raise ToolError("data: URLs must be base64-encoded")
        try:
            data = base64.b64decode(b64, validate=False)
        except (binascii.Error, ValueError):
            raise ToolError("the data: URL is not valid base64") from None
    elif source.startswith(("http://", "https://")):
        if fetcher is None:
            raise ToolError("image URLs cannot be fetched in this run")
        page = await fetcher.get(source, max_bytes=max_bytes + 1)
        if page.status >= 400:
            raise ToolError(f"fetching the image failed: HTTP {page.status}")
        data = page.body
    elif "://" in source:
        raise ToolError(f"unsupported image source {source!r}: use an http(s) URL or a file path")
    else:
        data = await ctx.sandbox.read_file(source)
    if len(data) > max_bytes:
        raise ToolError(f"the image is larger than {max_bytes} bytes")
    mime = sniff(data)
    if mime is None:
        raise ToolError(f"{source[:200]} is not a PNG, JPEG, GIF or WebP image")
    return data, mime
