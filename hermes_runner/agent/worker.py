"""The parts one process needs to run sessions, built from plain (picklable) values.

The driver builds them in-process for the local executor; a Ray actor builds its own from
the same `WorkerSpec`, because clients and sandbox backends cannot cross a process boundary.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field

from hermes_runner.agent.loop import AgentSettings
from hermes_runner.agent.session import SessionRunner
from hermes_runner.config.root import RunConfig
from hermes_runner.model.base import CallHook
from hermes_runner.model.cache import CachedModel, endpoint_identity, open_cache
from hermes_runner.model.client import OpenAIChatModel
from hermes_runner.sandbox import make_backend
from hermes_runner.scorers import open_scorers
from hermes_runner.tools import backends as tool_services

log = logging.getLogger(__name__)


@dataclass
class WorkerSpec:
    """Everything needed to build a SessionRunner anywhere: config and plain values only."""

    cfg: RunConfig
    run_dir: str
    settings: AgentSettings
    base_url: str | None = None  # a served model's URL (None: cfg.model.base_url)
    images: dict[str, int] = field(default_factory=dict)  # image -> prompts that need it
    pool_size: int = 4  # HTTP connections of this process's model client
    toolsets_dropped: dict[str, str] = field(default_factory=dict)  # toolset -> missing backend: never offered
    rate_share: float = 1.0  # this process's share of model.rate_limit (1/actors on Ray)


@asynccontextmanager
async def session_runner(
    spec: WorkerSpec, hooks: Sequence[CallHook] = (), tool_hooks: Sequence[CallHook] = ()
) -> AsyncIterator[SessionRunner]:
    """Start the sandbox backend, the model client and the tool services; close all on exit.

    `hooks` meter the run's model calls (rate limit, budget); `tool_hooks` those of tools' models (budget).
    """
    cfg = spec.cfg
    async with AsyncExitStack() as stack:
        backend = make_backend(cfg.sandbox, cfg.run_name, spec.run_dir)
        unavailable = await backend.start(set(spec.images))
        stack.push_async_callback(backend.shutdown)
        for image, reason in unavailable.items():
            log.error("image %s unavailable (%d prompts will fail): %s", image, spec.images.get(image, 0), reason)
        model = OpenAIChatModel(
            cfg.model,
            cfg.provider,
            cfg.reasoning,
            cfg.max_tokens,
            pool_size=spec.pool_size,
            base_url=spec.base_url,
            hooks=hooks,
        )
        stack.push_async_callback(model.aclose)
        if (cache := open_cache(cfg.cache)) is not None:  # in front of the meters: a hit is no call
            stack.callback(cache.close)
            model = CachedModel(model, cache, endpoint_identity(cfg.model), cfg.seed)
        dropped = spec.toolsets_dropped
        services = tool_services.ToolServices(
            cfg, set(tool_services.drawable(cfg)) - set(dropped), spec.base_url, hooks=tool_hooks
        )
        stack.push_async_callback(services.aclose)
        scorers = open_scorers(cfg, main_url=spec.base_url, hooks=tool_hooks)  # a judge is metered like a tool's model
        stack.push_async_callback(scorers.aclose)
        yield SessionRunner(cfg, model, backend, spec.settings, unavailable, services.by_toolset, dropped, scorers)
