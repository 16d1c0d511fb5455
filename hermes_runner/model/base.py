"""What the rest of the house knows of a chat model: a completion, the `ChatModel` Protocol and the `CallHook`
that meters its calls."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from hermes_runner.usage import Usage


@dataclass(slots=True)
class TurnTokens:
    """The exact tokens of one call, as the engine reports them (vLLM's `return_token_ids`, logprobs)."""

    prompt_ids: list[int]  # the prompt as the engine tokenized it (chat template applied)
    completion_ids: list[int]  # the sampled tokens, the stop token included when the engine returns it
    logprobs: list[float] | None = None  # per completion token (None: the endpoint gave none)

    def as_dict(self) -> dict:
        return {"prompt_ids": self.prompt_ids, "completion_ids": self.completion_ids, "logprobs": self.logprobs}


@dataclass(slots=True)
class Completion:
    message: dict  # assistant message: content, tool_calls, reasoning, reasoning_details
    finish_reason: str | None
    usage: Usage
    retries: int = 0
    model: str = ""  # the model the reply says answered (a router may pick another than the one asked for)
    cached: bool = False  # replayed from the response cache (model/cache.py): no call was made, nothing spent
    tokens: TurnTokens | None = None  # with output.tokens, from an endpoint that returns them


class ChatModel(Protocol):
    async def complete(self, messages: list[dict], tools: list[dict]) -> Completion: ...

    async def aclose(self) -> None: ...


class CallHook:
    """Meters a model's calls (a rate limiter, the run's budget): told before each call and after it ends.

    The defaults do nothing, so a hook overrides only what it meters."""

    async def before_call(self, estimate_tokens: float = 0.0) -> None:
        """Before a call (and before each retry); may wait (pacing). `estimate_tokens`: the request's size."""

    def after_call(self, exc: BaseException | None, completion: Completion | None) -> None:
        """After a call: its completion, or the exception it ended with."""

    def on_retry(self, exc: BaseException | None) -> None:
        """The call failed with `exc` and will be made again, after its back-off."""
