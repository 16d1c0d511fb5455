"""A streamed chat completion added up, chunk by chunk, into the body a non-streamed call returns."""

from __future__ import annotations

import json


class StreamAccumulator:
    """Adds up the server-sent chunks of a streamed chat completion into one non-streamed body."""

    def __init__(self) -> None:
        self.text: dict[str, list[str]] = {"content": [], "reasoning": [], "reasoning_content": []}
        self.details: dict[int, dict] = {}  # reasoning_details blocks by index
        self.calls: dict[int, dict] = {}  # tool calls by index
        self.finish_reason: str | None = None
        self.usage: dict | None = None
        self.choices = 0  # chunks that carried a choice
        self.model: str | None = None  # the model that answered, as the chunks say

    def add(self, chunk: dict) -> None:
        """Take one chunk (the SDK's stream has already raised for a chunk that carries an `error`)."""
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        if isinstance(chunk.get("model"), str) and chunk["model"]:
            self.model = chunk["model"]
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            self.choices += 1
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
            delta = choice.get("delta") or {}
            for name, parts in self.text.items():
                piece = delta.get(name)
                if isinstance(piece, str) and piece:
                    parts.append(piece)
            for i, block in enumerate(delta.get("reasoning_details") or []):
                if isinstance(block, dict):
                    _merge(self.details.setdefault(block.get("index", i), {}), block, ("text", "summary", "data"))
            for i, call in enumerate(delta.get("tool_calls") or []):
                acc = self.calls.setdefault(call.get("index", i), {"function": {}})
                for key in ("id", "type"):
                    if call.get(key) and not acc.get(key):
                        acc[key] = call[key]
                fn = call.get("function") or {}
                name = fn.get("name")
                if name and name != acc["function"].get("name"):  # some servers repeat the whole name
                    acc["function"]["name"] = acc["function"].get("name", "") + name
                args = fn.get("arguments")
                if args:
                    acc["function"]["arguments"] = acc["function"].get("arguments", "") + (
                        args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
                    )

    def body(self) -> dict:
        """The equivalent non-streamed response body (for parse_completion)."""
        if not self.choices:
            return {"choices": [], "usage": self.usage}
        msg: dict = {"role": "assistant", "content": "".join(self.text["content"]) or None}
        for name in ("reasoning", "reasoning_content"):
            if self.text[name]:
                msg[name] = "".join(self.text[name])
        if self.details:
            msg["reasoning_details"] = [self.details[i] for i in sorted(self.details)]
        if self.calls:
            msg["tool_calls"] = [self.calls[i] for i in sorted(self.calls)]
        choice = {"message": msg, "finish_reason": self.finish_reason}
        return {"choices": [choice], "usage": self.usage, **({"model": self.model} if self.model else {})}


def _merge(acc: dict, delta: dict, concat: tuple[str, ...]) -> None:
    """Merge one delta into a block: the `concat` fields grow, the others take the latest value."""
    for key, value in delta.items():
        if key in concat and isinstance(value, str):
            acc[key] = acc.get(key, "") + value
        elif value is not None:
            acc[key] = value
