"""Sessions spread over worker processes on this machine (`executor.processes=N`), each with its own event loop.

The runner keeps `num_workers` prompts in flight (the LocalExecutor loop) and sends each to the least-loaded
live worker over a socket pair; the worker (`procworker`) runs it with its own model client and sandbox
backend and sends the Outcome back, so the runner stays the only writer of the run directory. The run's
call hooks stay in the runner: a worker asks it before each model call (the rate limiter paces it there,
the budget records it in usage.jsonl) and tells it how the call ended, so rate limits, budgets and the
record of every call are those of one process. A worker that dies loses only its in-flight prompts: each
is sent again (up to `executor.max_redispatch` times) or recorded as failed, and the worker is replaced
(up to `executor.max_restarts` times).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import logging
import math
import os
import pickle
import socket
import sys
import threading
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path

import hermes_runner
from hermes_runner.agent.session import Outcome
from hermes_runner.agent.worker import WorkerSpec
from hermes_runner.config import ExecutorConfig
from hermes_runner.errors import ConfigError, RemoteCallError, WorkerLost
from hermes_runner.executors.base import WORKER_LOST, Dispatcher, Slot, Work
from hermes_runner.executors.local import LocalExecutor
from hermes_runner.model.base import CallHook, Completion

log = logging.getLogger(__name__)

CLOSE_TIMEOUT_S = 30.0  # time workers get to close their sandboxes before they are killed
START_TIMEOUT_S = 120.0  # time a worker gets to import and start its sandbox backend
_HEADER = 4


class Link:
    """Length-prefixed pickles over a stream. Writes never block: the messages of one turn of the event
    loop go out in one write, and a message sent from another thread (a log record) is handed to the loop."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader, self.writer = reader, writer
        self.loop = asyncio.get_running_loop()
        self._thread = threading.get_ident()
        self._out: list[bytes] = []

    @classmethod
    async def open(cls, sock: socket.socket) -> Link:
        return cls(*await asyncio.open_connection(sock=sock))

    def send(self, msg: tuple) -> None:
        if threading.get_ident() != self._thread:
            self.loop.call_soon_threadsafe(self.send, msg)
            return
        if self.writer.is_closing():
            return
        data = pickle.dumps(msg, pickle.HIGHEST_PROTOCOL)
        if not self._out:
            self.loop.call_soon(self.flush)
        self._out += (len(data).to_bytes(_HEADER, "big"), data)

    def flush(self) -> None:
        """Write what was sent since the last flush."""
        if self._out and not self.writer.is_closing():
            self.writer.write(b"".join(self._out))
        self._out.clear()

    async def drain(self) -> None:
        self.flush()
        with contextlib.suppress(ConnectionError):
            await self.writer.drain()

    async def recv(self) -> tuple:
        """The next message; IncompleteReadError at end of stream."""
        n = int.from_bytes(await self.reader.readexactly(_HEADER), "big")
        return pickle.loads(await self.reader.readexactly(n))

    def close(self) -> None:
        self.flush()
        self.writer.close()


def call_end(exc: BaseException | None, completion: Completion | None) -> tuple:
    """How a model call ended, as plain values (the worker's side of `rebuild_end`)."""
    if completion is not None:
        return ("ok", completion.usage, completion.model)
    if isinstance(exc, asyncio.CancelledError):
        return ("cancelled",)
    status = getattr(exc, "status_code", None)
    retry_after = None
    if status == 429:
        from hermes_runner.model.retry import retry_after_seconds

        retry_after = retry_after_seconds(exc)
    return ("error", type(exc).__name__ if exc is not None else "Error", status, retry_after)


def rebuild_end(end: tuple) -> tuple[BaseException | None, Completion | None]:
    """(exc, completion) for the runner's call hooks from `call_end`'s values."""
    if end[0] == "ok":
        return None, Completion({}, None, end[1], model=end[2])
    if end[0] == "cancelled":
        return asyncio.CancelledError(), None
    return RemoteCallError(end[1], end[2], end[3]), None


@dataclass
class _Worker(Slot):
    """The runner's view of one worker process (state: starting | ready | dead)."""

    proc: asyncio.subprocess.Process | None = None
    link: Link | None = None
    restarts: int = 0
    error: str | None = None
    runs: dict[int, asyncio.Future] = field(default_factory=dict)  # request id -> its Outcome
    ends: dict[int, asyncio.Future] = field(default_factory=dict)  # call id -> how the call ended
    reader: asyncio.Task | None = None

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None


class ProcessExecutor(Dispatcher, LocalExecutor):
    """The LocalExecutor loop over `work` that runs each prompt in one of N worker processes."""

    noun, lost_errors = "worker process", (WorkerLost,)

    def __init__(
        self, ecfg: ExecutorConfig, num_workers: int, spec: WorkerSpec, hooks: Sequence[CallHook],
        tool_hooks: Sequence[CallHook], n: int,
    ):  # fmt: skip
        super().__init__(num_workers)
        self.ecfg, self.max_redispatch = ecfg, ecfg.max_redispatch
        self.spec = spec
        self.hooks = {"main": list(hooks), "tool": list(tool_hooks)}
        self.n = n
        self.workers: list[_Worker] = []
        self._changed = asyncio.Condition()
        self._ids = itertools.count()
        self._contexts: dict[int, contextvars.Context] = {}  # request id -> its session's context (the prompt key)
        self._calls: set[asyncio.Task] = set()
        self._closing = False

    # -- lifecycle -------------------------------------------------------------------

    async def start(self) -> None:
        self.spec.pool_size = math.ceil(self.num_workers / self.n)
        log.info("starting %d worker processes x %d sessions", self.n, self.spec.pool_size)
        self.workers = self.slots = [_Worker(i) for i in range(self.n)]
        await asyncio.gather(*(self._spawn(w) for w in self.workers))
        try:
            async with self._changed:
                await asyncio.wait_for(
                    self._changed.wait_for(lambda: all(w.state != "starting" for w in self.workers)), START_TIMEOUT_S
                )
        except TimeoutError:
            if not any(w.state == "ready" for w in self.workers):
                raise ConfigError(f"no worker process started in {START_TIMEOUT_S:g}s") from None
        ready = [w for w in self.workers if w.state == "ready"]
        if not ready:
            raise ConfigError(f"no worker process could start: {self.workers[0].error}")
        if len(ready) < self.n:
            log.warning("%d of %d worker processes started", len(ready), self.n)

    async def _spawn(self, w: _Worker) -> None:
        ours, theirs = socket.socketpair()
        package_root = str(Path(hermes_runner.__file__).resolve().parent.parent)
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [package_root, os.environ.get("PYTHONPATH")]))}
        try:
            w.proc = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "hermes_runner.executors.procworker", str(theirs.fileno()),
                pass_fds=(theirs.fileno(),), stdin=asyncio.subprocess.DEVNULL, env=env,
                start_new_session=True,  # Ctrl-C reaches the runner alone, which stops the workers
            )  # fmt: skip
        finally:
            theirs.close()
        w.state, w.error, w.load = "starting", None, 0
        w.link = await Link.open(ours)
        w.link.send(("spec", self.spec))
        w.reader = asyncio.ensure_future(self._read(w))

    async def close(self) -> None:
        self._closing = True
        for w in self.workers:
            if w.link and w.state != "dead":
                w.link.send(("close",))
        procs = [w.proc for w in self.workers if w.proc]
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.gather(*(p.wait() for p in procs)), CLOSE_TIMEOUT_S)
        for p in procs:
            if p.returncode is None:
                log.warning("worker process %d did not stop in %gs: killed", p.pid, CLOSE_TIMEOUT_S)
                with contextlib.suppress(ProcessLookupError):
                    p.kill()
                await p.wait()
        for w in self.workers:
            if w.reader:
                w.reader.cancel()
            if w.link:
                w.link.close()
        for t in list(self._calls):
            t.cancel()
        await asyncio.gather(*(w.reader for w in self.workers if w.reader), *self._calls, return_exceptions=True)

    # -- messages from a worker ----------------------------------------------------------

    async def _read(self, w: _Worker) -> None:
        link = w.link
        try:
            while True:
                msg = await link.recv()
                kind = msg[0]
                if kind == "before":  # (rid, cid, hooks, estimate): the runner's hooks, then "go"
                    self._before(w, *msg[1:])
                elif kind in ("after", "done"):  # (cid, end) of a call, (rid, outcome) of a prompt
                    fut = (w.ends if kind == "after" else w.runs).pop(msg[1], None)
                    if fut is not None and not fut.done():
                        fut.set_result(msg[2])
                elif kind == "retry":  # (rid, hooks, end)
                    self._retry(*msg[1:])
                elif kind == "log":  # (level, logger, message): through the runner's handlers (run.log, redaction)
                    logging.getLogger(msg[2]).log(msg[1], "[worker %d] %s", w.number, msg[3])
                elif kind == "ready":
                    log.info("worker process %d ready (pid %d)", w.number, w.pid)
                    await self._set_state(w, "ready")
                elif kind == "failed":  # it could not start: a config error, not a crash
                    w.error = msg[1]
                    log.error("worker process %d could not start: %s", w.number, msg[1])
                    await self._set_state(w, "dead")
                    return
        except (asyncio.IncompleteReadError, ConnectionError, EOFError, pickle.UnpicklingError):
            pass
        if w.link is link:
            await self._lost(w)

    def _before(self, w: _Worker, rid: int, cid: int, hooks: str, estimate: float) -> None:
        end = w.ends[cid] = asyncio.get_running_loop().create_future()
        context = self._contexts.get(rid) or contextvars.copy_context()
        task = asyncio.get_running_loop().create_task(
            self._call(w, cid, self.hooks[hooks], estimate, end), context=context
        )
        self._calls.add(task)
        task.add_done_callback(self._calls.discard)

    async def _call(self, w: _Worker, cid: int, hooks: list[CallHook], estimate: float, end: asyncio.Future) -> None:
        """One model call of a worker, metered here: before_call (may wait), "go", then after_call."""
        for h in hooks:
            await h.before_call(estimate)
        if w.link is not None:
            w.link.send(("go", cid))
        exc, completion = rebuild_end(await end)
        for h in hooks:
            h.after_call(exc, completion)

    def _retry(self, rid: int, hooks: str, end: tuple) -> None:
        exc, _ = rebuild_end(end)
        context = self._contexts.get(rid) or contextvars.copy_context()
        for h in self.hooks[hooks]:
            context.run(h.on_retry, exc)

    async def _set_state(self, w: _Worker, state: str) -> None:
        w.state = state
        async with self._changed:
            self._changed.notify_all()

    async def _lost(self, w: _Worker) -> None:
        """The worker's process ended: fail its in-flight prompts and calls, replace it if allowed."""
        was, w.state, w.link = w.state, "starting", None  # no prompt is sent to it any more
        code = await w.proc.wait() if w.proc else None
        for fut in w.runs.values():
            if not fut.done():
                fut.set_exception(WorkerLost(f"worker process {w.pid} ended (exit {code})"))
        w.runs.clear()
        for fut in w.ends.values():
            if not fut.done():
                fut.set_result(("error", WORKER_LOST, None, None))
        w.ends.clear()
        if self._closing:
            await self._set_state(w, "dead")
            return
        log.warning("worker process %d (pid %s) ended (exit %s) %s", w.number, w.pid, code, was)
        w.error = w.error or f"worker process ended (exit {code}) while {was}"
        limit = self.ecfg.max_restarts
        if limit >= 0 and w.restarts >= limit:
            log.error("worker process %d is not replaced (executor.max_restarts=%d)", w.number, limit)
            await self._set_state(w, "dead")
            return
        w.restarts += 1
        await self._spawn(w)
        await self._set_state(w, w.state)

    # -- the work ------------------------------------------------------------------------

    def _cap(self) -> int:
        """Sessions one worker may hold: the run's in-flight limit spread over the workers still alive."""
        return math.ceil(self.num_workers / max(1, sum(w.state != "dead" for w in self.workers)))

    async def _send(self, w: _Worker, prompt, started: float) -> Outcome:
        rid = next(self._ids)
        fut = w.runs[rid] = asyncio.get_running_loop().create_future()
        self._contexts[rid] = contextvars.copy_context()
        link = w.link
        try:
            if link is None:
                raise WorkerLost(f"worker process {w.pid} ended")
            link.send(("run", rid, prompt))
            return await fut
        except asyncio.CancelledError:
            if w.link is link:
                link.send(("cancel", rid))  # its session sees CancelledError and closes its sandbox
            raise
        finally:
            w.runs.pop(rid, None)
            self._contexts.pop(rid, None)


def process_executor(
    ecfg: ExecutorConfig, num_workers: int, spec: WorkerSpec, hooks: Sequence[CallHook],
    tool_hooks: Sequence[CallHook], on_usage: object = None,
) -> AbstractAsyncContextManager[tuple[ProcessExecutor, Work]]:  # fmt: skip
    from hermes_runner.executors import worker_processes

    n = worker_processes(ecfg, num_workers)
    return ProcessExecutor(ecfg, num_workers, spec, hooks, tool_hooks, n).running()
