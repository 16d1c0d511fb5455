"""The agent section: which program drives each prompt (the built-in loop, or an external agent program run in
the prompt's sandbox behind the recording model proxy; docs/agents.md)."""

from dataclasses import dataclass, field
from enum import StrEnum


class AgentKind(StrEnum):
    """Who drives a prompt's conversation (agent/: one module per kind)."""

    hermes = "hermes"  # the built-in loop (agent/loop.py): the run's tools, its system prompt
    external = "external"  # a program of yours in the prompt's sandbox, reaching the model through the proxy


@dataclass
class AgentConfig:
    kind: AgentKind = AgentKind.hermes
    name: str = "hermes-runner"  # the program, as metadata.agent names it (with the version of `package`)
    # external: the command run in the prompt's sandbox, a Jinja2 template over the row: `prompt` (its text),
    # `row` (its fields), `model` (model.name), e.g. "mini -t {{ prompt | quote }} --yolo"; run in the work dir
    command: str | None = None
    # external: how the program gets into the sandbox: a directory on this host (a virtualenv, or any dir with
    # bin/), bound read-only at the same path with its bin/ first on PATH (a venv's base Python is bound too);
    # or "pip:<spec>" (e.g. "pip:mini-swe-agent==2.4.6"): installed once into a venv under the cache dir
    install: str | None = None
    package: str | None = None  # the distribution whose version metadata.agent gives (e.g. mini-swe-agent)
    env: dict[str, str] = field(default_factory=dict)  # more variables for the program (OPENAI_* are the proxy's)
    timeout_s: float = 1800.0  # the program's wall-clock limit per prompt (over it: the prompt fails, timeout)
    # the tool names counted in tool_stats (every entry of a run has the same keys); calls to others are kept
    # in the conversation but not counted
    tool_names: list[str] = field(default_factory=list)
    RULES = {"kind": AgentKind, "timeout_s": "> 0"}

    def problems(self, where: str) -> list[str]:
        """An external agent needs a command (a valid template)."""
        from hermes_runner.config.templating import problems as template_problems

        if self.kind != AgentKind.external:
            return []
        if not (self.command or "").strip():
            return [f"{where}.command is required with {where}.kind=external (the program to run, e.g. mini -t ...)"]
        return template_problems(self.command, f"{where}.command")
