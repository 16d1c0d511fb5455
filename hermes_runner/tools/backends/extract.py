"""Turn fetched documents into clean text: HTML -> markdown (trafilatura), PDF -> text (pypdf)."""

from __future__ import annotations

import io

from hermes_runner.errors import ToolError

TEXT_TYPES = ("text/plain", "text/markdown", "text/csv", "application/json", "application/xml", "text/xml")


def html_to_markdown(html: str, url: str) -> tuple[str, str]:
    """(title, markdown of the main content); boilerplate such as menus and footers is dropped."""
    import trafilatura

    text = trafilatura.extract(
        html,
        url=url,
        output_format="markdown",
        include_links=True,
        include_tables=True,
        include_formatting=True,
        favor_recall=True,
    )
    meta = trafilatura.extract_metadata(html)
    title = (meta.title if meta and meta.title else "") or ""
    return title, text or ""


def pdf_to_text(data: bytes) -> tuple[str, str]:
    """(title, text of every page, pages separated by blank lines)."""
    from pypdf import PdfReader
    from pypdf.errors import PdfReadError

    try:
        reader = PdfReader(io.BytesIO(data))
        pages = [(page.extract_text() or "").strip() for page in reader.pages]
        title = str((reader.metadata or {}).get("/Title") or "")
    except (PdfReadError, ValueError, KeyError) as exc:
        raise ToolError(f"unreadable PDF: {exc}") from None
    return title, "\n\n".join(p for p in pages if p)


def allocate(sizes: list[int], wanted: int, budget: int) -> list[int]:
    """Characters each page may keep: at most `wanted` each, `budget` in all, shared fairly (water-filling)."""
    caps = [min(s, wanted) for s in sizes]
    if sum(caps) <= budget:
        return caps
    out = [0] * len(caps)
    left = budget
    order = sorted(range(len(caps)), key=lambda i: caps[i])
    for n, i in enumerate(order):
        share = left // (len(order) - n)
        out[i] = min(caps[i], share)
        left -= out[i]
    return out
