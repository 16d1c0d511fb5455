"""The agent section: which program drives each prompt (the built-in loop, or an external agent program run in
the prompt's sandbox behind the recording model proxy; docs/agents.md)."""

import re
from dataclasses import dataclass, field
from enum import StrEnum

from hermes_runner.config.sandbox import SandboxConfig

ENV = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


class AgentKind(StrEnum):
    """Who drives a prompt's conversation (agent/: one module per kind)."""

    hermes = "hermes"  # the built-in loop (agent/loop.py): the run's tools, its system prompt
    external = "external"  # a program of yours in the prompt's sandbox, reaching the model through the proxy


@dataclass
class AgentConfig:
    kind: AgentKind = AgentKind.hermes
    # external: the program, as metadata.agent names it (with the version of `package`); the built-in loop's
    # entries say "hermes-runner <version>"
    name: str = "hermes-runner"
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
    RULES = {"timeout_s": "> 0"}

    def problems(self, where: str) -> list[str]:
        """A command that is not a valid template (a missing one is found when the run starts: `start_problems`), a
        variable name the shell cannot take."""
        from hermes_runner.config.templating import problems as template_problems

        bad = [
            f"{where}.env: {k!r} is not a variable name ([A-Za-z_][A-Za-z0-9_]*)" for k in self.env if not ENV.match(k)
        ]
        return bad + template_problems(self.command, f"{where}.command")


def start_problems(agent: AgentConfig, sandbox: SandboxConfig, feed: str = "none") -> list[str]:
    """What keeps an external agent from starting: no command, a sandbox it cannot run in or that has a network
    (the model proxy must be its only route out), a trainer feed (`feed`: its kind) that needs token ids."""
    if agent.kind != AgentKind.external:
        return []
    found = []
    if feed != "none":
        found.append(
            f"feed={feed} needs the built-in agent (agent=hermes): an external program's calls carry no token ids"
        )
    if not (agent.command or "").strip():
        found.append("agent.command is required with agent.kind=external (the program to run, e.g. mini -t ...)")
    if sandbox.backend not in ("local", "docker", "podman"):
        found.append(f"agent.kind=external runs in the local, docker or podman sandbox, not {sandbox.backend}")
    elif sandbox.backend == "local" and sandbox.local.network:
        found.append("agent.kind=external needs sandbox.local.network=false: the model proxy is its only route out")
    elif sandbox.backend != "local" and sandbox.docker.network_mode != "none":
        found.append(
            "agent.kind=external needs sandbox.docker.network_mode=none: the model proxy is its only route out"
        )
    return found
