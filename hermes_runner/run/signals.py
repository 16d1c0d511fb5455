"""The signals of an invocation: Ctrl-C / SIGTERM stop it gracefully (a second exits at once); SIGUSR1 tells
where it waits."""

from __future__ import annotations

import asyncio
import os
import signal
from typing import Protocol

from hermes_runner.executors import Executor
from hermes_runner.util import stacks


class Interruptible(Protocol):
    """What the handlers see of an invocation (`invocation.Run`)."""

    interrupted: bool
    loop: asyncio.AbstractEventLoop | None
    main: asyncio.Task | None  # the invocation's main task
    executor: Executor | None


def install(run: Interruptible) -> None:
    """The first Ctrl-C / SIGTERM cancels the in-flight prompts of `run` (or its start), a second exits at once."""

    def on_signal(signum: int, frame: object) -> None:
        if run.interrupted:
            os.write(2, b"second interrupt: exiting now (a rerun resumes; leftovers are cleaned at its start)\n")
            os._exit(130)
        run.interrupted = True
        os.write(2, b"interrupted: cancelling in-flight prompts and saving progress (again to exit now)\n")
        if run.loop is not None and run.executor is not None:
            run.loop.call_soon_threadsafe(run.executor.cancel)
        elif run.loop is not None and run.main is not None:
            run.loop.call_soon_threadsafe(run.main.cancel)  # still starting (model server, images, ...)

    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, on_signal)
    stacks.install(lambda: run.loop)  # kill -USR1: where the run waits (util/stacks.py)


def restore() -> None:
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL)
    stacks.uninstall()
