"""The composition root: the one reader of the run's whole config that builds the parts (checks of the inputs,
the worker spec the sessions are built from, the meters, the executor); each part gets only its own sections."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path

from hermes_runner.agent import install as agent_install
from hermes_runner.agent.loop import AgentSettings
from hermes_runner.agent.session import SessionSpec
from hermes_runner.agent.worker import WorkerSpec
from hermes_runner.config import AgentKind, BreakerClass, DatasetFormat, start_problems
from hermes_runner.config.root import RunConfig
from hermes_runner.config.telemetry import TelemetryConfig
from hermes_runner.dataset import check_source, detect_format, load_prefill
from hermes_runner.errors import ConfigError
from hermes_runner.executors import Executor, Work, open_executor
from hermes_runner.model.base import CallHook
from hermes_runner.model.ratelimit import EndpointLimiter
from hermes_runner.model.serve import check_model
from hermes_runner.run.budget import RunBudget
from hermes_runner.run.progress import RunProgress
from hermes_runner.telemetry import check_telemetry
from hermes_runner.tools import backends as tool_services
from hermes_runner.tools import distributions
from hermes_runner.tools.catalog import toolset_names
from hermes_runner.usage import Usage


def check_inputs(cfg: RunConfig) -> tuple[list[dict], dict[str, str]]:
    """The input files first, then the parts' options (model, distribution, toolsets), before anything in the
    run directory changes: (the prefill messages, toolset -> missing backend of those dropped)."""
    prefill = load_prefill(cfg.prefill_messages_file)
    if detect_format(cfg.dataset_file, cfg.dataset) != DatasetFormat.hf:
        check_source(cfg.dataset_file)
    check_model(cfg.model)  # conflicting model options stop here; a served file names the model
    if found := start_problems(
        cfg.agent, cfg.sandbox, cfg.feed.kind.value
    ):  # an external program: its command, its sandbox
        raise ConfigError("; ".join(found))
    distributions.validate(cfg.distribution, toolset_names())
    check_telemetry(cfg.telemetry)
    return prefill, tool_services.check_toolsets(cfg.tools, cfg.model, cfg.distribution)


def session_spec(cfg: RunConfig) -> SessionSpec:
    return SessionSpec(
        cfg.sandbox, cfg.distribution, cfg.retry, cfg.output.layout, cfg.model.name, cfg.seed, cfg.limits.timeout_s
    )


def worker_spec(
    cfg: RunConfig, run_dir: Path, prefill: list[dict], base_url: str | None, images: dict, dropped: dict
) -> WorkerSpec:
    """What any process needs to build the run's sessions (a served model's `base_url`, the plan's `images`)."""
    settings = AgentSettings(
        cfg.max_turns, cfg.system_prompt, cfg.ephemeral_system_prompt, prefill, cfg.max_invalid_tool_turns,
        cfg.limits.prompt_max_tokens, cfg.limits.prompt_max_cost_usd, cfg.output.final_summary,
        cfg.limits.tell_agent, cfg.limits.keep_note, cfg.verbose, cfg.log_prefix_chars,
    )  # fmt: skip
    install = agent_install.resolve(cfg.agent.install, cfg.agent.package)
    session, share = session_spec(cfg), None
    if cfg.agent.kind == AgentKind.external:  # the program's dirs (read-only) and, in a container, the proxy's
        session.sandbox, share = agent_install.sandbox_with(session.sandbox, install)
    return WorkerSpec(
        session, settings, cfg.model, cfg.run_name, str(run_dir), cfg.provider, cfg.reasoning,
        cfg.tools, cfg.cache, cfg.scorers, cfg.max_tokens, max(4, cfg.num_workers), base_url, dict(images),
        cfg.num_workers, dict(dropped), telemetry=telemetry(cfg.telemetry), tokens=cfg.output.tokens,
        agent=cfg.agent, install=install, proxy_share=share,
        refused_pauses=cfg.breaker.enabled and BreakerClass.provider in cfg.breaker.on,
    )  # fmt: skip


def telemetry(section: TelemetryConfig) -> TelemetryConfig:
    """The section as the workers take it: the file's path absolute (a worker may start elsewhere)."""
    path = section.otlp_file and str(Path(section.otlp_file).expanduser().absolute())
    return dataclasses.replace(section, otlp_file=path or None)


def meters(
    cfg: RunConfig, spent: Usage, on_budget: Callable[[str], None], record: Callable[[dict], None], invocation: int
) -> tuple[EndpointLimiter, RunBudget]:
    """The run's call hooks: the endpoint's rate limiter and the run's budget (which records every call)."""
    limiter = EndpointLimiter(cfg.model.rate_limit, cfg.num_workers)
    return limiter, RunBudget(cfg.limits, spent, on_budget, record=record, invocation=invocation)


def executor(
    cfg: RunConfig, spec: WorkerSpec, limiter: EndpointLimiter, budget: RunBudget, watchers: Sequence[CallHook] = ()
) -> AbstractAsyncContextManager[tuple[Executor, Work]]:
    """The configured executor, its sessions metered by `limiter` and `budget`, their calls seen by `watchers`
    (the circuit breaker, the silent-session watch)."""
    hooks, tool_hooks = [limiter, budget, *watchers], [budget.tools]
    return open_executor(cfg.executor, cfg.num_workers, spec, hooks, tool_hooks, budget.charge)


def progress(
    cfg: RunConfig, to_run: int, limiter: EndpointLimiter, notes: Callable[[], str] | None = None
) -> RunProgress:
    """The live display and the plain progress line of the `to_run` prompts (`notes`: what the run says of itself)."""
    return RunProgress(
        cfg.run_name, to_run, enabled=cfg.progress, throttle=limiter.throttle, interval_s=cfg.progress_interval_s,
        every_percent=cfg.progress_every_percent, notes=notes,
    )  # fmt: skip
