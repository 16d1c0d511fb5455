"""Sessions on a Ray cluster: async actors each run up to `sessions_per_worker` sessions at once.

The driver keeps `num_workers` prompts in flight (the LocalExecutor loop), sends each to the
least-loaded live actor and awaits its ObjectRef, so outcomes stream back as they finish and
the driver stays the only writer of the run directory. An actor that dies loses only its
in-flight prompts: Ray restarts it (up to `max_restarts`), and each lost prompt is sent again
(up to `max_redispatch` times) or recorded as failed, to be retried on resume.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import hermes_runner
from hermes_runner.agent.session import Outcome, SessionRunner
from hermes_runner.agent.worker import WorkerSpec, session_runner
from hermes_runner.config import ExecutorConfig, RateLimitConfig
from hermes_runner.dataset import Prompt
from hermes_runner.errors import ConfigError
from hermes_runner.executors.base import Dispatcher, Slot, Work, failure
from hermes_runner.executors.local import LocalExecutor
from hermes_runner.model.ratelimit import EndpointLimiter
from hermes_runner.usage import Usage

try:
    import ray
    from ray.exceptions import RayActorError, RayError, WorkerCrashedError
except ImportError:  # pragma: no cover - exercised only without the extra
    ray = None
    RayActorError = WorkerCrashedError = RayError = ConnectionError  # (never raised: no actor runs)

log = logging.getLogger(__name__)

LOCAL_OBJECT_STORE_BYTES = 256 * 1024**2  # outcomes are small; a local cluster needs little shared memory
CLOSE_TIMEOUT_S = 30.0  # time actors get to close their sandboxes before they are killed
WAIT_LOG_EVERY_S = 30.0


class SessionActor:
    """One Ray worker process: builds its own model client and sandbox backend, runs sessions."""

    def __init__(self, spec: WorkerSpec):
        logging.basicConfig(
            level=logging.INFO if spec.settings.verbose else logging.WARNING,
            format="%(levelname)s %(name)s: %(message)s",
        )
        self.spec = spec
        self._stack: AsyncExitStack | None = None
        self._runner: SessionRunner | None = None
        self._lock = asyncio.Lock()

    async def _ensure(self) -> SessionRunner:
        async with self._lock:
            if self._runner is None:
                spec = self.spec
                limiter = EndpointLimiter(_share(spec.model.rate_limit, spec.rate_share), spec.pool_size)
                stack = AsyncExitStack()
                self._runner = await stack.enter_async_context(session_runner(spec, hooks=[limiter]))
                self._stack = stack
        return self._runner

    async def ready(self) -> dict:
        """Start the parts (once); tell the driver where this worker runs."""
        await self._ensure()
        return {"pid": os.getpid(), "node": ray.get_runtime_context().get_node_id()}

    async def run(self, prompt: Prompt) -> Outcome:
        runner = await self._ensure()
        return await runner(prompt)

    async def close(self) -> None:
        async with self._lock:
            stack, self._stack, self._runner = self._stack, None, None
        if stack:
            await stack.aclose()


def _share(limit: RateLimitConfig, share: float) -> RateLimitConfig:
    """One actor's part of the endpoint's rate limit."""
    scaled = {k: v * share for k in ("requests_per_minute", "tokens_per_minute") if (v := getattr(limit, k))}
    return replace(limit, **scaled)


@dataclass
class _Slot(Slot):
    """The driver's view of one actor (state: starting | ready | lost (probing a restart) | dead)."""

    actor: Any = None
    pid: int | None = None
    error: BaseException | None = None


def _init_ray(ecfg: ExecutorConfig) -> bool:
    """Connect to the configured cluster or start a local one; True if this call started Ray."""
    if ray is None:
        raise ConfigError("executor=ray needs Ray: pip install 'hermes-runner[ray]'")
    if ray.is_initialized():
        return False
    # Ship this package to the workers, so a cluster runs exactly the driver's code.
    runtime_env = {"py_modules": [str(Path(hermes_runner.__file__).parent)]}
    common = {"runtime_env": runtime_env, "log_to_driver": True, "configure_logging": False}
    with _keep_sigterm_handler():
        _connect(ecfg, common)
    return True


@contextlib.contextmanager
def _keep_sigterm_handler() -> Iterator[None]:
    """ray.init replaces SIGTERM's handler (with sys.exit); the runner's graceful one must stay."""
    main = threading.current_thread() is threading.main_thread()
    previous = signal.getsignal(signal.SIGTERM) if main else None
    try:
        yield
    finally:
        if main and previous is not None:
            signal.signal(signal.SIGTERM, previous)


def _connect(ecfg: ExecutorConfig, common: dict) -> None:
    if ecfg.address:
        log.info("connecting to the Ray cluster at %s", ecfg.address)
        try:
            ray.init(address=ecfg.address, **common)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ConfigError(f"cannot connect to the Ray cluster at {ecfg.address!r}: {exc}") from None
    else:
        log.info("starting a local Ray cluster (num_cpus=%s)", ecfg.num_cpus or "all")
        ray.init(
            address="local",
            num_cpus=ecfg.num_cpus,
            object_store_memory=LOCAL_OBJECT_STORE_BYTES,
            include_dashboard=False,
            **common,
        )


class RayExecutor(Dispatcher, LocalExecutor):
    """The LocalExecutor loop over `work` that runs each prompt on a Ray actor."""

    noun, lost_errors = "Ray worker", (RayActorError, WorkerCrashedError)

    def __init__(
        self, ecfg: ExecutorConfig, num_workers: int, spec: WorkerSpec, on_usage: Callable[[Usage], None] | None = None
    ):
        super().__init__(num_workers)  # (config.check saw sessions_per_worker >= 1, max_redispatch >= 0)
        self.ecfg, self.max_redispatch = ecfg, ecfg.max_redispatch
        self.spec = spec
        self.on_usage = on_usage  # told each prompt's usage as it comes back (the run's budget)
        self.per_actor = min(ecfg.sessions_per_worker, num_workers)
        self.slots: list[_Slot] = []
        self._changed = asyncio.Condition()
        self._probes: set[asyncio.Task] = set()
        self._owns_ray = False

    # -- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        self._owns_ray = _init_ray(self.ecfg)  # blocks the loop a few seconds; nothing else runs yet
        cpus = ray.cluster_resources().get("CPU", 0)
        if self.ecfg.cpus_per_worker > cpus:
            raise ConfigError(
                f"executor.cpus_per_worker={self.ecfg.cpus_per_worker:g} but the Ray cluster has {cpus:g} CPUs"
            )
        n = self._actors()
        self.spec.pool_size, self.spec.rate_share = self.per_actor, 1.0 / n
        base = self.spec.base_url or self.spec.model.base_url
        if self.ecfg.address and any(h in base for h in ("://127.", "://localhost", "://[::1]")):
            log.warning("model URL %s is loopback: workers on other nodes cannot reach it", base)
        actor_cls = ray.remote(SessionActor).options(
            num_cpus=self.ecfg.cpus_per_worker,
            max_concurrency=self.per_actor + 2,  # + ready/close calls
            max_restarts=self.ecfg.max_restarts,
            max_task_retries=0,  # the driver re-dispatches lost prompts itself, to any live actor
            scheduling_strategy="SPREAD",
        )
        log.info("starting %d Ray actors x %d sessions", n, self.per_actor)
        for number in range(n):
            slot = _Slot(number, actor=actor_cls.remote(self.spec))
            self.slots.append(slot)
            self._probe(slot)
        await self._await_first_ready(n)

    def _actors(self) -> int:
        """ceil(num_workers / sessions_per_worker) actors, and at least one per node that can hold one (Ray
        SPREADs them): 16 in flight at 32 per actor on two nodes are two actors of 8, one on each node."""
        nodes = sum(
            1
            for node in ray.nodes()
            if node.get("Alive") and node.get("Resources", {}).get("CPU", 0) >= self.ecfg.cpus_per_worker
        )
        n = max(math.ceil(self.num_workers / self.per_actor), min(nodes, self.num_workers))
        self.per_actor = math.ceil(self.num_workers / n)
        return n

    async def _await_first_ready(self, n: int) -> None:
        started = time.monotonic()
        async with self._changed:
            while not any(s.state == "ready" for s in self.slots):
                config_errors = [s.error for s in self.slots if isinstance(s.error, ConfigError)]
                if config_errors:
                    raise ConfigError(f"a Ray worker could not start: {_cause(config_errors[0])}")
                if all(s.state == "dead" for s in self.slots):
                    raise ConfigError(f"no Ray worker could start: {_cause(self.slots[0].error)}")
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._changed.wait(), WAIT_LOG_EVERY_S)
                if not any(s.state == "ready" for s in self.slots):
                    log.warning("waiting for Ray workers: 0/%d ready after %.0fs", n, time.monotonic() - started)

    async def close(self) -> None:
        for t in list(self._probes):
            t.cancel()
        live = [s for s in self.slots if s.state != "dead"]
        refs = []
        for s in live:
            with contextlib.suppress(RayError):
                refs.append(s.actor.close.remote())
        if refs:
            with contextlib.suppress(RayError):
                await asyncio.to_thread(ray.wait, refs, num_returns=len(refs), timeout=CLOSE_TIMEOUT_S)
        for s in self.slots:
            with contextlib.suppress(RayError, ValueError):
                ray.kill(s.actor, no_restart=True)
        if self._owns_ray:
            await asyncio.to_thread(ray.shutdown)

    # -- actor bookkeeping -------------------------------------------------------------

    def _probe(self, slot: _Slot) -> None:
        """Wait for an actor to be (again) ready; mark it dead if Ray cannot bring it back."""

        async def probe() -> None:
            try:
                info = await slot.actor.ready.remote()
                slot.state, slot.pid, slot.error = "ready", info["pid"], None
                log.info("Ray worker %d ready (pid %d, node %s)", slot.number, info["pid"], info["node"][:12])
            except RayError as exc:
                slot.state, slot.error = "dead", exc
                log.error("Ray worker %d is gone: %s", slot.number, _cause(exc))
            async with self._changed:
                self._changed.notify_all()

        task = asyncio.ensure_future(probe())
        self._probes.add(task)
        task.add_done_callback(self._probes.discard)

    def _gone(self, slot: _Slot, exc: BaseException) -> str:
        if slot.state == "ready":
            log.warning("Ray worker %d (pid %s) lost: %s", slot.number, slot.pid, _cause(exc))
            slot.state = "lost"
            self._probe(slot)  # Ray restarts it (max_restarts); the probe returns when it is back
        return _cause(exc)

    def _cap(self) -> int:
        return self.per_actor

    # -- the work ------------------------------------------------------------------------

    async def _send(self, slot: _Slot, prompt: Prompt, started: float) -> Outcome:
        ref = slot.actor.run.remote(prompt)
        try:
            outcome = await ref
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                ray.cancel(ref)  # an async actor task: its session sees CancelledError and cleans up
            raise
        except self.lost_errors:
            raise
        except RayError as exc:
            return failure(prompt, type(exc).__name__, _cause(exc), started)
        if self.on_usage:
            self.on_usage(outcome.usage)
        return outcome


def _cause(exc: BaseException | None) -> str:
    """A Ray error's message without the remote traceback."""
    cause = getattr(exc, "cause", None) or exc
    text = str(cause).strip().splitlines()
    return text[-1] if text else type(cause).__name__


def ray_executor(
    ecfg: ExecutorConfig, num_workers: int, spec: WorkerSpec, hooks: object, tool_hooks: object,
    on_usage: Callable[[Usage], None] | None = None,
) -> AbstractAsyncContextManager[tuple[RayExecutor, Work]]:  # fmt: skip
    """Each actor paces its share of the rate limit itself: `hooks` and `tool_hooks` stay in the driver unused."""
    return RayExecutor(ecfg, num_workers, spec, on_usage).running()
