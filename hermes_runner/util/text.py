"""Text helpers every room shares: one head/tail clipper, and the first line of an exception."""

from __future__ import annotations

TRUNCATED = "\n\n... [{n} characters truncated] ...\n\n"


def clip(text: str, limit: int, notice: str = TRUNCATED, head: float = 0.4, lines: bool = False) -> str:
    """`text` within `limit` characters (the notice counts): the `head` share of what is kept from its start, the rest
    from its end (0.4: an output's end holds its result or error; 1: the start only), `notice` between ({n}: how many
    characters went). `lines`: the start ends at a line end when one is in its second half."""
    if len(text) <= limit:
        return text
    room = max(0, limit - len(notice.format(n=len(text))))
    first = int(room * head)
    last = room - first
    if lines and (cut := text.rfind("\n", 0, first)) > first // 2:
        first = cut
    return text[:first] + notice.format(n=len(text) - first - last) + (text[-last:] if last else "")


def first_line(exc: BaseException, limit: int | None = 300) -> str:
    """The first non-blank line of `str(exc)` (with the next when it ends in ':'), cut to `limit`; else its type."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    if not lines:
        return type(exc).__name__
    return (" ".join(lines[:2]) if lines[0].endswith(":") else lines[0])[:limit]
