"""Sessions on a Ray cluster: async actors each run up to `sessions_per_worker` sessions at once.

The driver keeps `num_workers` prompts in flight (the LocalExecutor loop), sends each to the
least-loaded live actor and reads its task's stream, so outcomes stream back as they finish and
the driver stays the only writer of the run directory. The stream tells the driver of each model
call as it starts (the actor waits for the driver's "go") and as it ends, then gives the Outcome:
the driver runs the run's call hooks for each (usage.jsonl, the budget), so the calls of a prompt
lost with its actor are counted too; each actor paces its share of the rate limit itself. An actor
that dies loses only its in-flight prompts: Ray restarts it (up to `max_restarts`), and each lost
prompt is sent again (up to `max_redispatch` times) or recorded as failed, to be retried on resume.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import math
import os
import signal
import threading
import time
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from contextvars import ContextVar
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
from hermes_runner.executors.processes import rebuild_end
from hermes_runner.executors.procworker import RelayHook
from hermes_runner.model.base import CallHook
from hermes_runner.model.ratelimit import EndpointLimiter

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

# The events of the prompt whose session runs in this task (set in each `SessionActor.run`).
EVENTS: ContextVar[asyncio.Queue | None] = ContextVar("hermes_ray_events", default=None)


class _StreamRelay(RelayHook):
    """An actor's call hook: each call goes to the driver through its prompt's stream (none: not relayed)."""

    async def before_call(self, estimate_tokens: float = 0.0) -> None:
        if EVENTS.get() is not None:
            await super().before_call(estimate_tokens)


def _to_driver(msg: tuple) -> None:
    if (events := EVENTS.get()) is not None:
        events.put_nowait(msg)


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
        self._waiting: dict[int, asyncio.Future] = {}  # call id -> the driver's "go"
        self._ids = itertools.count()

    async def _ensure(self) -> SessionRunner:
        async with self._lock:
            if self._runner is None:
                spec = self.spec
                limiter = EndpointLimiter(_share(spec.model.rate_limit, spec.rate_share), spec.pool_size)
                stack = AsyncExitStack()
                hooks = [limiter, _StreamRelay(_to_driver, "main", self._waiting, self._ids)]
                tool_hooks = [_StreamRelay(_to_driver, "tool", self._waiting, self._ids)]
                runner = session_runner(spec, hooks=hooks, tool_hooks=tool_hooks)
                self._runner = await stack.enter_async_context(runner)
                self._stack = stack
        return self._runner

    async def ready(self) -> dict:
        """Start the parts (once); tell the driver where this worker runs."""
        await self._ensure()
        return {"pid": os.getpid(), "node": ray.get_runtime_context().get_node_id()}

    async def run(self, prompt: Prompt) -> AsyncIterator[tuple]:
        """The prompt's call events as they happen (procworker's messages), then ("done", its Outcome)."""
        runner = await self._ensure()
        events: asyncio.Queue = asyncio.Queue()
        EVENTS.set(events)
        session = asyncio.ensure_future(runner(prompt))  # (in a copy of this context: its calls go to `events`)
        session.add_done_callback(lambda _: events.put_nowait(None))
        try:
            while (msg := await events.get()) is not None:
                yield msg
            yield ("done", session.result())
        finally:
            if not session.done():
                session.cancel()  # cancelled by the driver: the session closes its sandbox
                await asyncio.gather(session, return_exceptions=True)

    async def go(self, cid: int) -> None:
        """The driver recorded the start of call `cid`: it may be made."""
        fut = self._waiting.pop(cid, None)
        if fut is not None and not fut.done():
            fut.set_result(None)

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
        self, ecfg: ExecutorConfig, num_workers: int, spec: WorkerSpec, hooks: Sequence[CallHook] = (),
        tool_hooks: Sequence[CallHook] = (),
    ):  # fmt: skip
        super().__init__(num_workers)  # (config.check saw sessions_per_worker >= 1, max_redispatch >= 0)
        self.ecfg, self.max_redispatch = ecfg, ecfg.max_redispatch
        self.spec = spec
        # The run's hooks record and charge each call; the actors pace it (the driver's limiter is left out).
        self.hooks = {"main": [h for h in hooks if not isinstance(h, EndpointLimiter)], "tool": list(tool_hooks)}
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
            max_concurrency=2 * self.per_actor + 2,  # + a "go" per session, ready/close calls
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
        """Run `prompt` on the actor; its calls' events go through the run's hooks (in this, its session's, task)."""
        stream = slot.actor.run.options(num_returns="streaming").remote(prompt)
        which: dict[int, str] = {}  # call id -> its hooks ("main" or "tool")
        try:
            async for ref in stream:
                msg = await ref
                if msg[0] == "done":
                    return msg[1]
                await self._relayed(slot, msg, which)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                ray.cancel(stream)  # an async actor task: its session sees CancelledError and cleans up
            raise
        except self.lost_errors:
            raise
        except RayError as exc:
            return failure(prompt, type(exc).__name__, _cause(exc), started)
        return failure(prompt, "RayError", "the Ray worker's stream ended without an outcome", started)

    async def _relayed(self, slot: _Slot, msg: tuple, which: dict[int, str]) -> None:
        """One call event of an actor's session (procworker's messages) through the run's hooks."""
        kind = msg[0]
        if kind == "before":  # (rid, cid, hooks, estimate): record its start, then "go"
            _, _, cid, which[cid], estimate = msg
            for h in self.hooks[which[cid]]:
                await h.before_call(estimate)  # (the budget's: records, never waits)
            with contextlib.suppress(RayError):
                slot.actor.go.remote(cid)
        elif kind == "after":  # (cid, end)
            exc, completion = rebuild_end(msg[2])
            for h in self.hooks[which.pop(msg[1], "main")]:
                h.after_call(exc, completion)
        elif kind == "retry":  # (rid, hooks, end)
            exc, _ = rebuild_end(msg[3])
            for h in self.hooks[msg[2]]:
                h.on_retry(exc)


def _cause(exc: BaseException | None) -> str:
    """A Ray error's message without the remote traceback."""
    cause = getattr(exc, "cause", None) or exc
    text = str(cause).strip().splitlines()
    return text[-1] if text else type(cause).__name__


def ray_executor(
    ecfg: ExecutorConfig, num_workers: int, spec: WorkerSpec, hooks: Sequence[CallHook], tool_hooks: Sequence[CallHook],
    on_usage: object = None,
) -> AbstractAsyncContextManager[tuple[RayExecutor, Work]]:  # fmt: skip
    """Each actor paces its share of the rate limit itself; the driver's other hooks record and charge every call."""
    return RayExecutor(ecfg, num_workers, spec, hooks, tool_hooks).running()
