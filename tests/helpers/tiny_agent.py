"""tiny-agent (tests/e2e/agent_programs): an OpenAI-speaking CLI of the stdlib only, run as agent=external."""

from __future__ import annotations

from pathlib import Path

PROGRAMS = Path(__file__).parents[1] / "e2e" / "agent_programs"
TINY = ["agent=external", "agent.name=tiny-agent", f"agent.install={PROGRAMS}", "agent.tool_names=[bash]",
        "filters.require_reasoning=false", "agent.command='tiny-agent {{ prompt | quote }}'"]  # fmt: skip
