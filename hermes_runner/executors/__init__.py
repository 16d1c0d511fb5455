"""Executors keep `num_workers` sessions in flight and stream outcomes back as they finish.

`base` holds the Protocol, this module the factory, and there is one module per backend (`local`, `ray`).
They may import agent/ and everything below it, never run/ (today: budget.py, through TYPE_CHECKING)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from hermes_runner.errors import ConfigError
from hermes_runner.executors.base import Executor, Work
from hermes_runner.executors.local import LocalExecutor

if TYPE_CHECKING:
    from hermes_runner.budget import RunBudget
    from hermes_runner.config import RunConfig
    from hermes_runner.model.ratelimit import EndpointLimiter
    from hermes_runner.worker import WorkerSpec

__all__ = ["Executor", "LocalExecutor", "Work", "open_executor"]


@asynccontextmanager
async def open_executor(
    cfg: RunConfig, spec: WorkerSpec, limiter: EndpointLimiter, budget: RunBudget
) -> AsyncIterator[tuple[Executor, Work]]:
    """The configured executor and the `work` to map with it (one prompt -> one Outcome).

    In-process, `limiter` meters every call of the run's model, and `budget` those of tools' models
    (vision, MoA) too. On Ray, each actor paces its share of the rate limit itself, and the budget is
    charged with each prompt's usage as it comes back.
    """
    backend = cfg.executor.backend
    if backend == "local":
        from hermes_runner.worker import session_runner

        async with session_runner(spec, hooks=[limiter, budget], tool_hooks=[budget.tools]) as runner:
            yield LocalExecutor(cfg.num_workers), runner
    elif backend == "ray":
        from hermes_runner.executors.ray import ray_executor

        async with ray_executor(cfg, spec, budget) as (executor, work):
            yield executor, work
    else:
        raise ConfigError(f"unknown executor.backend {backend!r} (local, ray)")
