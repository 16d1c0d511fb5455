"""The budget note (limits.tell_agent): a system message after the conversation telling the model what is left
of its prompt's limits, and the form the response cache keys it by (docs/evaluation.md#telling-the-agent-its-budget).

The seconds left differ from run to run (they depend on how fast the calls before were answered), so the cache
key leaves them out: a replay of the same conversation under the same limits finds its replies. Turns, tokens
and cost left are functions of the conversation so far, so they stay in the key.
"""

from __future__ import annotations

import re

TAG = "[budget]"  # how a note's text starts
_SECONDS = re.compile(r"\d+ seconds")


def note(turns: int, seconds: float | None, tokens: int | None, cost_usd: float | None) -> dict:
    """The note for a call with `turns` model calls left (this one included) and what is left of the limits that
    are set (None: no such limit)."""
    left = [f"{turns} model call{'s' if turns != 1 else ''} (this one included)"]
    if seconds is not None:
        left.append(f"{max(0, int(seconds))} seconds")
    if tokens is not None:
        left.append(f"{max(0, tokens):,} tokens")
    if cost_usd is not None:
        left.append(f"${max(0.0, cost_usd):.4f}")
    text = f"{TAG} Left for this task: {', '.join(left)}. Give your final answer before any of these runs out."
    return {"role": "system", "content": text}


def is_note(message: dict) -> bool:
    content = message.get("content")
    return message.get("role") == "system" and isinstance(content, str) and content.startswith(TAG)


def keyed(messages: list[dict]) -> list[dict]:
    """The messages as the cache key sees them: the seconds left of every note left out."""
    if not any(is_note(m) for m in messages):
        return messages
    return [{**m, "content": _SECONDS.sub("- seconds", m["content"])} if is_note(m) else m for m in messages]
