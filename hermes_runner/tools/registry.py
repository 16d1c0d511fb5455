"""Tool registry: the single list of valid tool names and their toolsets."""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from hermes_runner.errors import ConfigError, ToolError
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


def _load_builtin() -> None:
    # Importing the modules registers their tools.
    from hermes_runner.tools import browser, code_execution, files, image_gen, moa, terminal, vision, web  # noqa: F401


def all_tools() -> dict[str, Tool]:
    _load_builtin()
    return _TOOLS


def toolset_names() -> list[str]:
    _load_builtin()
    return sorted(_TOOLSETS)


def tool_names() -> list[str]:
    """Every valid tool name, sorted (what the hallucinated-tool filter accepts)."""
    return sorted(all_tools())


# Our tools that hermes-agent 0.19.0's tool registry does not have (it moved Mixture-of-Agents into its agent
# loop). Its final merge drops every row whose tool_stats names a tool it does not know, so these stay out of
# the zero-fill: rows only name them when their toolset can be offered in the run (docs/hermes-interop.md).
NOT_IN_HERMES: frozenset[str] = frozenset({"mixture_of_agents"})


def stats_names(toolsets: Iterable[str]) -> list[str]:
    """The keys of every row's tool_stats in a run whose prompts may be offered `toolsets`: every tool
    hermes-agent 0.19.0 knows too, plus ours it does not know only if their toolset is among `toolsets`
    (the same keys on every row of the run either way)."""
    offered = set(toolsets)
    return sorted(n for n, t in all_tools().items() if n not in NOT_IN_HERMES or t.toolset in offered)


def tools_for(toolsets: Iterable[str]) -> list[Tool]:
    _load_builtin()
    out: list[Tool] = []
    for ts in toolsets:
        if ts not in _TOOLSETS:
            raise ConfigError(f"unknown toolset {ts!r}; known: {', '.join(sorted(_TOOLSETS))}")
        out.extend(_TOOLS[n] for n in _TOOLSETS[ts])
    return out
