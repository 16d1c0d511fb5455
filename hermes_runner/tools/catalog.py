"""The tool catalog: the toolset modules, the single list of valid tool names and their toolsets."""

from __future__ import annotations

from collections.abc import Iterable

from hermes_runner.errors import ConfigError
from hermes_runner.tools.base import _TOOLS, _TOOLSETS, Tool


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
