"""What a tool is (`Tool`, `ToolContext`, `ToolResult`), the `@tool` decorator that registers one, argument helpers.

Toolset modules import this; `catalog` lists them."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hermes_runner.errors import ToolError
from hermes_runner.usage import Usage

if TYPE_CHECKING:
    from hermes_runner.sandbox.base import Sandbox

log = logging.getLogger(__name__)


@dataclass
class ToolContext:
    """What a tool may use while it runs for one prompt."""

    sandbox: Sandbox
    command_timeout_s: float = 180.0
    max_output_chars: int = 50_000
    services: dict[str, Any] = field(default_factory=dict)  # backends of optional toolsets, by toolset
    state: dict[str, Any] = field(default_factory=dict)  # per-task state of tools (e.g. the browser page)
    usage: Usage = field(default_factory=Usage)  # the prompt's spend: tools add their own model calls to it
    _cleanups: list[Callable[[], Awaitable[None]]] = field(default_factory=list)

    def service(self, toolset: str) -> Any:
        """The backend of `toolset`; a ToolError if this run has none."""
        svc = self.services.get(toolset)
        if svc is None:
            raise ToolError(f"the {toolset} toolset is not configured for this run")
        return svc

    def on_close(self, fn: Callable[[], Awaitable[None]]) -> None:
        """Run `fn` when the task ends (last registered runs first)."""
        self._cleanups.append(fn)

    async def aclose(self) -> None:
        """End the task's tool state; a failing cleanup is logged, the others still run."""
        while self._cleanups:
            fn = self._cleanups.pop()
            try:
                await fn()
            except Exception:  # cleanup must not hide the prompt's outcome
                log.warning("tool cleanup failed", exc_info=True)


@dataclass(slots=True)
class ToolResult:
    content: str  # text sent back to the model (JSON for our tools)
    ok: bool

    @classmethod
    def of(cls, payload: Any, ok: bool = True) -> ToolResult:
        text = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
        return cls(text, ok)

    @classmethod
    def error(cls, message: str) -> ToolResult:
        return cls(json.dumps({"error": message}, ensure_ascii=False), False)


ToolFn = Callable[[ToolContext, dict], Awaitable[ToolResult]]


@dataclass(frozen=True)
class Tool:
    name: str
    toolset: str
    description: str
    parameters: dict
    run: ToolFn

    def openai_schema(self) -> dict:
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": self.parameters},
        }


_TOOLS: dict[str, Tool] = {}
_TOOLSETS: dict[str, list[str]] = {}


def text_arg(args: dict, name: str) -> str:
    """The argument `name`, which must be a string with something besides whitespace."""
    value = args.get(name)
    if not isinstance(value, str) or not value.strip():
        raise ToolError(f"'{name}' must be a non-empty string")
    return value


def number_arg(name: str, value: object, kind: type[int | float] = float) -> int | float:
    """`value`, given for the argument `name`, as a `kind` (int or float); a ToolError when it is not a number."""
    try:
        return kind(value)
    except (TypeError, ValueError):
        raise ToolError(f"'{name}' must be {'an integer' if kind is int else 'a number'}, not {value!r}") from None


def params(*required: str, **properties: dict) -> dict:
    """The JSON Schema of a tool's arguments: `properties` by name, the `required` ones named first."""
    return {"type": "object", "properties": properties, "required": list(required)}


def register(tool: Tool) -> Tool:
    if tool.name in _TOOLS:
        raise ValueError(f"tool {tool.name!r} registered twice")
    _TOOLS[tool.name] = tool
    _TOOLSETS.setdefault(tool.toolset, []).append(tool.name)
    return tool


def tool(toolset: str, name: str, description: str, parameters: dict) -> Callable[[ToolFn], ToolFn]:
    """Decorator: register an async tool function."""

    def wrap(fn: ToolFn) -> ToolFn:
        register(Tool(name, toolset, description, parameters, fn))
        return fn

    return wrap
