"""The parts one process needs to run sessions, built from plain (picklable) values.

The driver builds them in-process for the local executor; a Ray actor builds its own from
the same `WorkerSpec`, because clients and sandbox backends cannot cross a process boundary.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

from hermes_runner.agent.external import ExternalAgent
from hermes_runner.agent.install import Install
from hermes_runner.agent.loop import AgentSettings
from hermes_runner.agent.session import SessionRunner, SessionSpec
from hermes_runner.config import (
    AgentConfig,
    AgentKind,
    CacheConfig,
    ModelConfig,
    ProviderConfig,
    ReasoningConfig,
    ScorerConfig,
    TelemetryConfig,
    ToolsConfig,
    as_container,
)
from hermes_runner.model.base import CallHook
from hermes_runner.model.batch import BatchModel
from hermes_runner.model.batch_journal import BatchJournal
from hermes_runner.model.cache import CachedModel, endpoint_identity, open_cache
from hermes_runner.model.client import OpenAIChatModel
from hermes_runner.model.proxy import ModelProxy
from hermes_runner.rundir.layout import BATCH_JOURNAL
from hermes_runner.sandbox import make_backend
from hermes_runner.scorers import open_scorers
from hermes_runner.telemetry import genai, open_trace
from hermes_runner.tools.backends import ToolServices, drawable
from hermes_runner.util.redact import Redactor

log = logging.getLogger(__name__)


@dataclass
class WorkerSpec:
    """Everything needed to build a SessionRunner anywhere: config sections and plain values only."""

    session: SessionSpec
    settings: AgentSettings
    model: ModelConfig
    run_name: str
    run_dir: str
    provider: ProviderConfig = field(default_factory=ProviderConfig)
    reasoning: ReasoningConfig = field(default_factory=ReasoningConfig)
    tools: ToolsConfig = field(default_factory=ToolsConfig)
    cache: CacheConfig = field(default_factory=CacheConfig)
    scorers: dict[str, ScorerConfig] = field(default_factory=dict)
    max_tokens: int | None = None  # the run's max_tokens
    tool_pool: int = 4  # HTTP connections of each tool's model client
    base_url: str | None = None  # a served model's URL (None: model.base_url)
    images: dict[str, int] = field(default_factory=dict)  # image -> prompts that need it
    pool_size: int = 4  # HTTP connections of this process's model client
    toolsets_dropped: dict[str, str] = field(default_factory=dict)  # toolset -> missing backend: never offered
    rate_share: float = 1.0  # this process's share of model.rate_limit (1/actors on Ray)
    telemetry: TelemetryConfig = field(default_factory=TelemetryConfig)  # otlp_file: an absolute path
    tokens: bool = False  # output.tokens: ask the endpoint for token ids and logprobs
    agent: AgentConfig = field(default_factory=AgentConfig)  # who drives each prompt
    install: Install = field(default_factory=Install)  # where an external program is (agent.install, resolved)
    proxy_share: tuple[str, str] | None = None  # containers: the run's proxy dir (host path, container path)
    refused_pauses: bool = False  # the breaker counts provider errors: a refusal mid-run is one, not "down"


@asynccontextmanager
async def session_runner(
    spec: WorkerSpec, hooks: Sequence[CallHook] = (), tool_hooks: Sequence[CallHook] = ()
) -> AsyncIterator[SessionRunner]:
    """Start the sandbox backend, the model client and the tool services; close all on exit.

    `hooks` meter the run's model calls (rate limit, budget); `tool_hooks` those of tools' models (budget).
    """
    async with AsyncExitStack() as stack:
        backend = make_backend(spec.session.sandbox, spec.run_name, spec.run_dir)
        unavailable = await backend.start(set(spec.images))
        stack.push_async_callback(backend.shutdown)
        for image, reason in unavailable.items():
            log.error("image %s unavailable (%d prompts will fail): %s", image, spec.images.get(image, 0), reason)
        model = OpenAIChatModel(
            spec.model, spec.provider, spec.reasoning, spec.max_tokens, spec.pool_size, spec.base_url, hooks,
            tokens=spec.tokens, refused_pauses=spec.refused_pauses,
        )  # fmt: skip
        stack.push_async_callback(model.aclose)
        batch = None
        if spec.model.batch.enabled:  # every session's next call joins the provider's current batch
            journal = BatchJournal.open(Path(spec.run_dir) / BATCH_JOURNAL)
            model = batch = BatchModel(
                model, spec.model.batch, journal, endpoint_identity(spec.model), spec.session.seed
            )
            stack.push_async_callback(batch.aclose)
        if (cache := open_cache(spec.cache)) is not None:  # in front of the meters: a hit is no call
            stack.callback(cache.close)
            model = CachedModel(model, cache, endpoint_identity(spec.model), spec.session.seed)
        redact = Redactor.from_sources(as_container(spec)).text  # (its sections name the api_key_env)
        trace = open_trace(spec.telemetry, {"hermes.run_name": spec.run_name}, redact)
        stack.callback(trace.shutdown)  # (last in, first out: after the sessions' parts are closed)
        url = spec.base_url or spec.model.base_url
        model = trace.model(model, genai.chat_request(spec.model.name, url, spec.model.temperature, spec.max_tokens))
        dropped = spec.toolsets_dropped
        toolsets = set(drawable(spec.session.distribution)) - set(dropped)
        services = ToolServices(spec.tools, spec.model, toolsets, spec.base_url, tool_hooks, spec.tool_pool)
        stack.push_async_callback(services.aclose)
        scorers = open_scorers(
            spec.scorers, spec.model, spec.base_url, tool_hooks, trace
        )  # a judge: metered like a tool
        stack.push_async_callback(scorers.aclose)
        agent = None
        if spec.agent.kind == AgentKind.external:  # its calls come through the proxy, into the same model path
            proxy = ModelProxy()
            if spec.proxy_share:  # the run's proxy dir (containers): gone with the last worker, once empty
                stack.callback(_remove_empty, spec.proxy_share[0])
            stack.push_async_callback(proxy.aclose)
            parts = spec.agent, spec.install, spec.settings, spec.model.name, spec.proxy_share
            agent = ExternalAgent(model, proxy, *parts)
        parts = unavailable, services.by_toolset, dropped, scorers, trace, agent, spec.agent.tool_names
        runner = SessionRunner(model, backend, spec.settings, spec.session, *parts)
        if batch is not None:
            runner.around = batch.session
        yield runner


def _remove_empty(path: str) -> None:
    with contextlib.suppress(OSError):  # another worker's prompt still has its socket there
        os.rmdir(path)
