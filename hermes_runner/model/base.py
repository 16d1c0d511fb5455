"""What the rest of the house knows of a chat model: a completion and the `ChatModel` Protocol."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from hermes_runner.usage import Usage


@dataclass(slots=True)
class Completion:
    message: dict  # assistant message: content, tool_calls, reasoning, reasoning_details
    finish_reason: str | None
    usage: Usage
    retries: int = 0
    model: str = ""  # the model the reply says answered (a router may pick another than the one asked for)


class ChatModel(Protocol):
    async def complete(self, messages: list[dict], tools: list[dict]) -> Completion: ...

    async def aclose(self) -> None: ...
