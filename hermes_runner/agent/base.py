"""What drives one prompt's conversation: the `AgentBackend` Protocol (the built-in loop, agent/loop.py, and an
external program behind the model proxy, agent/external.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from hermes_runner.agent.loop import SessionResult
    from hermes_runner.tools.base import ToolContext


class AgentBackend(Protocol):
    label: str  # what metadata.agent says drove the conversation ("hermes-runner 0.1.0", "mini-swe-agent 2.4.6")
    own_tools: bool  # offers the run's tools (the built-in loop); False: the program brings its own

    async def run(self, res: SessionResult, ctx: ToolContext) -> SessionResult:
        """Drive one conversation in `ctx`'s sandbox, filling `res` as it goes (so a failure keeps what was spent)."""
        ...
