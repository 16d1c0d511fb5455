"""Executors keep `num_workers` sessions in flight and stream outcomes back as they finish.

`base` holds the Protocol, this module the factory, and there is one module per backend (`local`, `processes`
with its `procworker`, `ray`).
They may import agent/ and everything below it, never run/: the run's meters come in as hooks and `on_usage`."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import TYPE_CHECKING

from hermes_runner.config import ExecutorConfig, ExecutorKind
from hermes_runner.executors.base import Executor, Work
from hermes_runner.executors.local import LocalExecutor
from hermes_runner.util.plugins import load

if TYPE_CHECKING:
    from hermes_runner.agent.worker import WorkerSpec
    from hermes_runner.model.base import CallHook
    from hermes_runner.usage import Usage

__all__ = ["EXECUTORS", "Executor", "LocalExecutor", "Work", "open_executor", "worker_processes"]


def worker_processes(ecfg: ExecutorConfig, num_workers: int) -> int:
    """How many worker processes the local executor uses (1: none, the sessions run in the runner's process)."""
    n = ecfg.processes or os.cpu_count() or 1
    return max(1, min(n, num_workers))


Hooks = Sequence["CallHook"]
OnUsage = Callable[["Usage"], None]
Opened = AbstractAsyncContextManager[tuple[Executor, Work]]

# executor.backend -> "module:function", called as f(ecfg, num_workers, spec, hooks, tool_hooks, on_usage) for an
# async context manager of (Executor, work); `processes` is `local` with executor.processes > 1. A user's own: by
# its import path.
EXECUTORS = {
    ExecutorKind.local: f"{__name__}:in_process",
    "processes": "hermes_runner.executors.processes:process_executor",
    ExecutorKind.ray: "hermes_runner.executors.ray:ray_executor",
}


def open_executor(
    ecfg: ExecutorConfig, num_workers: int, spec: WorkerSpec, hooks: Hooks, tool_hooks: Hooks, on_usage: OnUsage
) -> Opened:
    """The configured executor and the `work` to map with it (one prompt -> one Outcome).

    `hooks` meter every call of the run's model (rate limit, budget, usage.jsonl), as it happens, and `tool_hooks`
    those of tools' models (vision, MoA): in-process, for the calls of worker processes (`executor.processes`) and of
    Ray actors, which pace their share of the rate limit themselves (the driver's limiter is left out). `on_usage`
    (the budget's `charge`) is for an executor of one's own that learns a prompt's usage only when it comes back.
    """
    name = ecfg.backend
    if name == ExecutorKind.local and worker_processes(ecfg, num_workers) > 1:
        name = "processes"
    return load(name, EXECUTORS, "executor.backend")(ecfg, num_workers, spec, hooks, tool_hooks, on_usage)


@asynccontextmanager
async def in_process(
    ecfg: ExecutorConfig, num_workers: int, spec: WorkerSpec, hooks: Hooks, tool_hooks: Hooks, on_usage: OnUsage
) -> AsyncIterator[tuple[Executor, Work]]:
    from hermes_runner.agent.worker import session_runner

    async with session_runner(spec, hooks=hooks, tool_hooks=tool_hooks) as runner:
        yield LocalExecutor(num_workers), runner
