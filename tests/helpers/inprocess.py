"""In-process parts for unit tests: a real local sandbox (bubblewrap), the agent and a session on ScriptedModel.

No HTTP, no Hydra: a conversation runs in milliseconds plus what its tools take in the sandbox.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from pathlib import Path

from hermes_runner.agent.loop import Agent, AgentSettings, SessionResult
from hermes_runner.agent.session import Failure, Outcome, SessionRunner
from hermes_runner.config import (
    DistributionConfig,
    LocalIsolation,
    LocalSandboxOptions,
    ModelConfig,
    SandboxConfig,
)
from hermes_runner.config.root import RunConfig
from hermes_runner.dataset import Prompt
from hermes_runner.run import wiring
from hermes_runner.sandbox.local.backend import LocalBackend
from hermes_runner.testing.model import ScriptedModel
from hermes_runner.tools.base import ToolContext
from hermes_runner.tools.catalog import tools_for

from tests.helpers.machine import require


def prompt(text: str = "task", index: int = 0, **kw) -> Prompt:
    """A dataset row as the dataset loader makes it (key: content hash + occurrence)."""
    return Prompt(index, hashlib.sha256(text.encode()).hexdigest()[:16] + "-0", text, **kw)


def sandbox_cfg(root: Path) -> SandboxConfig:
    """The local backend confined by bubblewrap, its task dirs under `root`."""
    return SandboxConfig(backend="local", local=LocalSandboxOptions(isolation=LocalIsolation.bwrap, root=str(root)))


def run_cfg(root: Path, toolsets: Iterable[str] = ("terminal", "file"), **values) -> RunConfig:
    """A RunConfig built directly (no Hydra): the scripted model, one distribution of `toolsets` at 100%."""
    dist = DistributionConfig(name="unit", toolsets={t: 100.0 for t in toolsets})
    model = ModelConfig(name="scripted", base_url="http://127.0.0.1:9/v1")
    return RunConfig(
        model=model, distribution=dist, sandbox=sandbox_cfg(root), dataset_file="-", run_name="unit", **values
    )


@asynccontextmanager
async def local_backend(root: Path) -> AsyncIterator[LocalBackend]:
    """A started LocalBackend (bubblewrap), shut down on exit."""
    require("bwrap")
    backend = LocalBackend(sandbox_cfg(root), "unit")
    await backend.start(set())
    try:
        yield backend
    finally:
        await backend.shutdown()


def result(text: str = "task", toolsets: Iterable[str] = ("terminal", "file")) -> SessionResult:
    """An empty result for `text`, offered the tools of `toolsets`, as the session makes it."""
    toolsets = list(toolsets)
    return SessionResult(prompt(text), tools_for(toolsets), toolsets)


async def converse(
    model: ScriptedModel,
    root: Path,
    text: str = "task",
    toolsets: Iterable[str] = ("terminal", "file"),
    settings: AgentSettings | None = None,
    res: SessionResult | None = None,
) -> SessionResult:
    """One conversation of the agent loop (filling `res`, else a new result), its tools in a fresh local sandbox."""
    res = res or result(text, toolsets)
    async with local_backend(root) as backend:
        box = await backend.create(res.prompt)
        ctx = ToolContext(box, command_timeout_s=30, usage=res.usage)
        try:
            return await Agent(model, settings or AgentSettings()).run(res, ctx)
        finally:
            await ctx.aclose()
            await box.close()


def talk(steps: list[dict] | None, root: Path, **kw) -> tuple[SessionResult, ScriptedModel]:
    """`converse` with a fresh ScriptedModel of `steps`, from synchronous tests."""
    model = ScriptedModel(steps)
    return asyncio.run(converse(model, root, **kw)), model


async def session(
    model: ScriptedModel,
    cfg: RunConfig,
    prompts: list[Prompt],
    settings: AgentSettings | None = None,
    **runner_kw,
) -> list[Outcome]:
    """The outcomes of `prompts` run one by one by a SessionRunner on `model` and a real local backend."""
    async with local_backend(Path(cfg.sandbox.local.root)) as backend:
        settings = settings or AgentSettings(max_turns=cfg.max_turns)
        runner = SessionRunner(model, backend, settings, wiring.session_spec(cfg), **runner_kw)
        return [await runner(p) for p in prompts]


__all__ = ["Failure", "Outcome", "SessionRunner", "Agent", "AgentSettings", "SessionResult"]
