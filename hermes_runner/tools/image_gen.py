"""The `image_gen` toolset: generate an image and save it in the task's sandbox."""

from __future__ import annotations

import base64
import binascii
import re
import secrets

from hermes_runner.errors import ToolError
from hermes_runner.tools.base import ToolContext, ToolResult, params, text_arg, tool
from hermes_runner.tools.image_io import EXTENSIONS, load_image, sniff

MAX_IMAGE_BYTES = 50_000_000


def _slug(prompt: str) -> str:
    words = re.findall(r"[a-z0-9]+", prompt.lower())[:6]
    return "-".join(words)[:48] or "image"


@tool(
    "image_gen",
    "image_generate",
    "Generate an image from a text prompt. The image is saved in the task's working directory; "
    "the result gives its path (usable with vision_analyze) and, when the endpoint provides "
    "one, its URL. Display it with markdown: ![description](path)",
    params(
        "prompt",
        prompt={
            "type": "string",
            "description": "The text prompt describing the desired image. Be detailed and descriptive.",
        },
        aspect_ratio={
            "type": "string",
            "enum": ["landscape", "square", "portrait"],
            "description": "Aspect ratio: 'landscape' is wide, 'portrait' is tall, 'square' is 1:1 "
            "(default landscape).",
        },
    ),
)
async def image_generate(ctx: ToolContext, args: dict) -> ToolResult:
    svc = ctx.service("image_gen")
    cfg = svc.cfg
    prompt = text_arg(args, "prompt")
    aspect = str(args.get("aspect_ratio") or "landscape").lower().strip()
    if aspect not in cfg.sizes:
        raise ToolError(f"'aspect_ratio' must be one of {', '.join(cfg.sizes)}, not {aspect!r}")
    images = await svc.endpoint.generate(
        prompt.strip(), size=cfg.sizes[aspect], response_format=cfg.response_format, quality=cfg.quality
    )
    if not images:
        raise ToolError("the image endpoint returned no image")
    first = images[0]
    url = first.get("url")
    if first.get("b64_json"):
        try:
            data = base64.b64decode(first["b64_json"])
        except (binascii.Error, ValueError):
            raise ToolError("the image endpoint returned invalid base64 data") from None
        mime = None
    elif url:
        data, mime = await load_image(ctx, url, svc.fetcher, MAX_IMAGE_BYTES)
    else:
        raise ToolError("the image endpoint returned neither b64_json nor url")
    mime = mime or sniff(data)
    if mime is None:
        raise ToolError("the image endpoint returned data that is not a PNG, JPEG, GIF or WebP image")
    path = f"{cfg.output_dir.rstrip('/')}/{_slug(prompt)}-{secrets.token_hex(3)}.{EXTENSIONS[mime]}"
    await ctx.sandbox.write_file(path, data)
    out = {"success": True, "image": path, "bytes": len(data), "mime_type": mime}
    if url:
        out["url"] = url
    if first.get("revised_prompt"):
        out["revised_prompt"] = first["revised_prompt"]
    return ToolResult.of(out)
