"""`kill -USR1 <runner pid>`: where a run is waiting, printed to stderr while the run goes on.

Two parts, for two kinds of stuck. `faulthandler` prints every thread's stack from the signal handler
itself, so it answers even when the event loop's thread is blocked in a call. Then, from the loop, the
asyncio tasks grouped by the chain of awaits each is suspended in (a few lines for 256 sessions waiting on
the same model call). Workers of `executor.processes` are processes of their own: signal them by their pid.
"""

from __future__ import annotations

import asyncio
import faulthandler
import os
import signal
from collections import Counter
from collections.abc import Callable
from types import FrameType

SIGNAL = signal.SIGUSR1


def await_frames(coro: object) -> list[FrameType]:
    """The frame of each coroutine of the chain `coro` awaits, outermost first."""
    out = []
    while coro is not None:
        frame = getattr(coro, "cr_frame", None) or getattr(coro, "gi_frame", None)
        if frame is None:
            break
        out.append(frame)
        coro = getattr(coro, "cr_await", None) or getattr(coro, "gi_yieldfrom", None)
    return out


def await_chain(coro: object) -> list[str]:
    """`file:line in function` for each coroutine of the chain `coro` awaits, outermost first."""
    return [f"{f.f_code.co_filename}:{f.f_lineno} in {f.f_code.co_name}" for f in await_frames(coro)]


def task_report(loop: asyncio.AbstractEventLoop) -> str:
    """The loop's pending tasks, grouped by where they wait, the largest group first."""
    groups = Counter("\n".join("  " + line for line in await_chain(t.get_coro())) for t in asyncio.all_tasks(loop))
    parts = [f"asyncio tasks: {sum(groups.values())}"]
    for chain, n in groups.most_common():
        parts.append(f"{n} task(s) waiting at:\n{chain or '  (not started)'}")
    return "\n".join(parts) + "\n"


def install(loop_of: Callable[[], asyncio.AbstractEventLoop | None]) -> None:
    """On SIGNAL: every thread's stack at once, then the tasks of the loop `loop_of()` gives (if it runs)."""

    def on_signal(signum: int, frame: object) -> None:
        loop = loop_of()
        if loop is not None and loop.is_running():
            loop.call_soon_threadsafe(lambda: os.write(2, task_report(loop).encode()))  # fd 2: the process's stderr

    signal.signal(SIGNAL, on_signal)
    faulthandler.register(SIGNAL, file=2, all_threads=True, chain=True)  # chained: on_signal runs after


def uninstall() -> None:
    faulthandler.unregister(SIGNAL)
    signal.signal(SIGNAL, signal.SIG_DFL)
