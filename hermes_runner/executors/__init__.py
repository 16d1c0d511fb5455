"""Executors keep `num_workers` sessions in flight and stream outcomes back as they finish.

`base` holds the Protocol, this module the factory, and there is one module per backend (`local`, `processes`
with its `procworker`, `ray`).
They may import agent/ and everything below it, never run/: the run's meters come in as hooks and `on_usage`."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from hermes_runner.config import ExecutorConfig, ExecutorKind
from hermes_runner.errors import ConfigError
from hermes_runner.executors.base import Executor, Work
from hermes_runner.executors.local import LocalExecutor

if TYPE_CHECKING:
    from hermes_runner.agent.worker import WorkerSpec
    from hermes_runner.model.base import CallHook
    from hermes_runner.usage import Usage

__all__ = ["Executor", "LocalExecutor", "Work", "open_executor", "worker_processes"]


def worker_processes(ecfg: ExecutorConfig, num_workers: int) -> int:
    """How many worker processes the local executor uses (1: none, the sessions run in the runner's process)."""
    n = ecfg.processes or os.cpu_count() or 1
    return max(1, min(n, num_workers))


@asynccontextmanager
async def open_executor(
    ecfg: ExecutorConfig,
    num_workers: int,
    spec: WorkerSpec,
    hooks: Sequence[CallHook],
    tool_hooks: Sequence[CallHook],
    on_usage: Callable[[Usage], None],
) -> AsyncIterator[tuple[Executor, Work]]:
    """The configured executor and the `work` to map with it (one prompt -> one Outcome).

    In-process and in worker processes (`executor.processes`), `hooks` meter every call of the run's model (rate limit, budget), and `tool_hooks` those of
    tools' models (vision, MoA). On Ray, each actor paces its share of the rate limit itself, and `on_usage`
    is told each prompt's usage as it comes back.
    """
    backend = ecfg.backend
    if backend == ExecutorKind.local and (n := worker_processes(ecfg, num_workers)) > 1:
        from hermes_runner.executors.processes import process_executor

        async with process_executor(ecfg, num_workers, spec, hooks, tool_hooks, n) as (executor, work):
            yield executor, work
    elif backend == ExecutorKind.local:
        from hermes_runner.agent.worker import session_runner

        async with session_runner(spec, hooks=hooks, tool_hooks=tool_hooks) as runner:
            yield LocalExecutor(num_workers), runner
    elif backend == ExecutorKind.ray:
        from hermes_runner.executors.ray import ray_executor

        async with ray_executor(ecfg, num_workers, spec, on_usage) as (executor, work):
            yield executor, work
    else:
        raise ConfigError(f"unknown executor.backend {backend!r} ({', '.join(ExecutorKind)})")
