"""The agent: the loop (model call, tools, repeat), one prompt's session around it, and what a worker process
needs to run sessions. It may import tools/, model/, sandbox/ and the vocabulary, never executors/ or run/."""

from hermes_runner.agent.loop import Agent, AgentSettings, SessionResult, StopReason
from hermes_runner.agent.session import Failure, Outcome, SessionRunner, SessionSpec
from hermes_runner.agent.worker import WorkerSpec, session_runner

__all__ = [
    "Agent",
    "AgentSettings",
    "Failure",
    "Outcome",
    "SessionResult",
    "SessionRunner",
    "SessionSpec",
    "StopReason",
    "WorkerSpec",
    "session_runner",
]
