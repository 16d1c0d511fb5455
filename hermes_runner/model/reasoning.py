"""Reasoning capture from every place providers put it."""

from __future__ import annotations

import re

_INLINE = re.compile(r"<(think|thinking|REASONING_SCRATCHPAD)>(.*?)(?:</\1>|\Z)", re.DOTALL | re.IGNORECASE)


def _details_text(details: object) -> str | None:
    if not isinstance(details, list):
        return None
    parts = []
    for block in details:
        if not isinstance(block, dict):
            continue
        text = block.get("text") or block.get("summary")
        if isinstance(text, str) and text.strip():
            parts.append(text.strip())
    return "\n".join(parts) or None


def split_reasoning(message: dict) -> tuple[str | None, str]:
    """Return (reasoning text or None, content without inline reasoning blocks).

    Looks at `reasoning` (OpenRouter, vLLM), `reasoning_content` (DeepSeek, llama.cpp),
    `reasoning_details` (OpenRouter typed blocks), and inline `<think>` /
    `<REASONING_SCRATCHPAD>` blocks in the content (closed or left open by truncation).
    """
    parts: list[str] = []
    for name in ("reasoning", "reasoning_content"):
        value = message.get(name)
        if isinstance(value, str) and value.strip():
            parts.append(value.strip())
            break
    if not parts:
        text = _details_text(message.get("reasoning_details"))
        if text:
            parts.append(text)
    content = message.get("content")
    if not isinstance(content, str):
        content = ""
    if "<" in content:
        found = [m.group(2).strip() for m in _INLINE.finditer(content)]
        if found:
            parts.extend(f for f in found if f)
            content = _INLINE.sub("", content).strip()
    return ("\n\n".join(parts) or None), content
