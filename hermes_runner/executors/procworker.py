"""A worker process of `executor.processes=N`: runs the prompts its runner sends, many at once, on one event loop.

    python -m hermes_runner.executors.procworker FD      # started by executors/processes.py, never by hand

FD is its end of a socket pair with the runner; the first message is the WorkerSpec. The worker builds its
own model client, sandbox backend and tool services from it; its call hooks relay each model call to the
runner (which paces and records it) and wait for its "go". At end of stream (the runner closed it, or died)
it cancels what is in flight, closes its sandboxes and exits.
"""

from __future__ import annotations

import asyncio
import contextvars
import itertools
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable

from hermes_runner.executors.processes import Link, call_end
from hermes_runner.model.base import CallHook, Completion
from hermes_runner.util import gctune, stacks

log = logging.getLogger(__name__)

REQUEST: contextvars.ContextVar[int] = contextvars.ContextVar("hermes_worker_request", default=-1)


class RelayHook(CallHook):
    """This worker's call hook: the runner's hooks (`which`: the run's model or the tools') meter each call.

    `send` carries its messages to the runner (a Ray actor's: the prompt's stream of events); the runner
    answers a "before" with "go", which sets `waiting[cid]`."""

    def __init__(
        self, send: Callable[[tuple], None], which: str, waiting: dict[int, asyncio.Future], ids: itertools.count
    ):
        self.send, self.which, self.waiting, self.ids = send, which, waiting, ids
        self._open: dict[int, int] = {}  # task -> call id of its call in progress

    async def before_call(self, estimate_tokens: float = 0.0) -> None:
        cid = next(self.ids)
        go = self.waiting[cid] = asyncio.get_running_loop().create_future()
        self.send(("before", REQUEST.get(), cid, self.which, estimate_tokens))
        try:
            await go
        except BaseException:
            self.waiting.pop(cid, None)
            self.send(("after", cid, ("cancelled",)))
            raise
        self._open[id(asyncio.current_task())] = cid

    def after_call(self, exc: BaseException | None, completion: Completion | None) -> None:
        cid = self._open.pop(id(asyncio.current_task()), None)
        if cid is not None:
            self.send(("after", cid, call_end(exc, completion)))

    def on_retry(self, exc: BaseException | None) -> None:
        self.send(("retry", REQUEST.get(), self.which, call_end(exc, None)))


class LinkHandler(logging.Handler):
    """Sends this worker's log records to the runner, which logs them as its own."""

    def __init__(self, link: Link):
        super().__init__()
        self.link = link

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
            if record.exc_info:
                text += "\n" + logging.Formatter().formatException(record.exc_info)
            self.link.send(("log", record.levelno, record.name, text))
        except Exception:  # noqa: BLE001 - a log record never breaks a session
            self.handleError(record)


async def serve(fd: int) -> None:
    from hermes_runner.agent.worker import session_runner
    from hermes_runner.config import as_container
    from hermes_runner.util.redact import Redactor, redacting_logs

    loop = asyncio.get_running_loop()
    stacks.install(lambda: loop)  # kill -USR1 <this worker's pid>: where it waits
    link = await Link.open(socket.socket(fileno=fd))
    _, spec = await link.recv()
    root = logging.getLogger()
    root.handlers[:] = [LinkHandler(link)]  # the runner writes them (its console, run.log), redacted there too
    root.setLevel(logging.INFO if spec.settings.verbose else logging.WARNING)
    waiting: dict[int, asyncio.Future] = {}
    ids = itertools.count()
    hooks = [RelayHook(link.send, "main", waiting, ids)]
    tool_hooks = [RelayHook(link.send, "tool", waiting, ids)]
    sessions: dict[int, asyncio.Task] = {}
    with redacting_logs(Redactor.from_sources(as_container(spec))):  # (its sections name the api_key_env)
        try:
            runner_cm = session_runner(spec, hooks=hooks, tool_hooks=tool_hooks)
            runner = await runner_cm.__aenter__()
        except Exception as exc:  # noqa: BLE001 - told to the runner, which stops with it
            link.send(("failed", f"{type(exc).__name__}: {exc}"))
            await link.drain()
            return
        try:
            gctune.started()
            link.send(("ready", os.getpid()))
            await _loop(link, runner, sessions, waiting)
        finally:
            for t in sessions.values():
                t.cancel()
            await asyncio.gather(*sessions.values(), return_exceptions=True)
            await runner_cm.__aexit__(None, None, None)
            await link.drain()
            link.close()


async def _loop(link: Link, runner, sessions: dict[int, asyncio.Task], waiting: dict[int, asyncio.Future]) -> None:
    async def run(rid: int, prompt) -> None:
        REQUEST.set(rid)
        try:
            outcome = await runner(prompt)
        finally:
            sessions.pop(rid, None)
        link.send(("done", rid, outcome))

    while True:
        try:
            msg = await link.recv()
        except (asyncio.IncompleteReadError, ConnectionError):
            return  # the runner is gone
        kind = msg[0]
        if kind == "go":
            fut = waiting.pop(msg[1], None)
            if fut is not None and not fut.done():
                fut.set_result(None)
        elif kind == "run":
            sessions[msg[1]] = asyncio.ensure_future(run(msg[1], msg[2]))
        elif kind == "cancel":
            task = sessions.get(msg[1])
            if task is not None:
                task.cancel()
        elif kind == "close":
            return


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the runner handles Ctrl-C and stops its workers
    gctune.starting()  # (until its session runner is ready)
    asyncio.run(serve(int(sys.argv[1])))


if __name__ == "__main__":
    main()
