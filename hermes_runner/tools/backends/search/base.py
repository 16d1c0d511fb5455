"""What a search backend is: the `SearchBackend` Protocol and the `SearchHit` it returns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(slots=True)
class SearchHit:
    title: str
    url: str
    description: str


class SearchBackend(Protocol):
    """Made as Class(cfg: WebConfig, client: httpx2.AsyncClient) once `Class.missing(cfg)` (a static method) is None."""

    name: str

    async def search(self, query: str, limit: int) -> list[SearchHit]: ...

    async def aclose(self) -> None: ...
