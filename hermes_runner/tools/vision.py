"""The `vision` toolset: ask a vision model about an image (URL or file in the sandbox)."""

from __future__ import annotations

from hermes_runner.errors import ModelCallError, ToolError
from hermes_runner.tools.base import ToolContext, ToolResult, params, text_arg, tool
from hermes_runner.tools.image_io import data_url, load_image

PROMPT = "Fully describe and explain everything about this image, then answer the following question:\n\n{question}"


@tool(
    "vision",
    "vision_analyze",
    "Analyze an image with a vision model: it describes the image completely and answers your "
    "question about it. The image may be an http(s) URL or a file path in the task's environment.",
    params(
        "image_url",
        "question",
        image_url={"type": "string", "description": "Image URL (http/https) or file path to analyze."},
        question={"type": "string", "description": "Your specific question or request about the image."},
    ),
)
async def vision_analyze(ctx: ToolContext, args: dict) -> ToolResult:
    svc = ctx.service("vision")
    source, question = text_arg(args, "image_url"), text_arg(args, "question")
    data, mime = await load_image(ctx, source, svc.fetcher, svc.cfg.max_image_bytes)
    content = [
        {"type": "text", "text": PROMPT.format(question=question.strip())},
        {"type": "image_url", "image_url": {"url": data_url(data, mime)}},
    ]
    try:
        reply = await svc.model.complete([{"role": "user", "content": content}], [])
    except ModelCallError as exc:
        raise ToolError(f"the vision model failed: {exc}") from None
    ctx.usage.add(reply.usage)
    analysis = (reply.message.get("content") or "").strip()
    if not analysis:
        raise ToolError("the vision model returned no answer")
    return ToolResult.of({"success": True, "analysis": analysis})
