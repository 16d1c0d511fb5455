"""Sandbox commands as child processes, without stalling the event loop.

Python 3.11's asyncio subprocesses fork in the event-loop thread, wait there until the
child has exec'd, and start a new thread per child to wait for its exit: under load
every one of those steps holds up all the other sessions. Here the fork runs in a
worker thread, and the loop watches the exit through a pidfd and the output through
the pipe, so nothing blocks it. Without pidfd support (Linux before 5.3) asyncio's
own subprocesses are used.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import signal
import subprocess
from collections.abc import Callable
from concurrent.futures import Executor

from hermes_runner.sandbox.base import OutputCap

READ_CHUNK = 65536
DRAIN_S = 5.0  # how long to keep reading once the command is gone (its output pipe may lag)


def _pidfd_works() -> bool:
    try:
        os.close(os.pidfd_open(os.getpid()))
    except (AttributeError, OSError):
        return False
    return True


PIDFD = _pidfd_works()


async def run_command(
    argv: list[str],
    *,
    env: dict[str, str],
    cwd: str | None,
    timeout: float,
    limit: int,
    executor: Executor,
    check: Callable[[], None] | None = None,
) -> tuple[int, str, bool]:
    """Run argv in a new session with stdout+stderr captured (capped at `limit`); kill its group at the end.

    Returns (exit code, output, timed out); `check` runs first in the worker thread (and may raise).
    """
    if not PIDFD:
        return await _run_asyncio(argv, env=env, cwd=cwd, timeout=timeout, limit=limit, check=check)
    loop = asyncio.get_running_loop()
    start = functools.partial(_start, argv, env, cwd, check)
    proc, pidfd = await loop.run_in_executor(executor, start)
    out = proc.stdout.fileno()
    cap = OutputCap(limit)
    exited, eof = loop.create_future(), loop.create_future()

    def on_output() -> None:
        try:
            while chunk := os.read(out, READ_CHUNK):
                cap.feed(chunk)
        except BlockingIOError:
            return
        except OSError:
            pass
        loop.remove_reader(out)
        if not eof.done():
            eof.set_result(None)

    loop.add_reader(out, on_output)
    loop.add_reader(pidfd, lambda: exited.done() or exited.set_result(None))
    timed_out = False
    try:
        try:
            await asyncio.wait_for(asyncio.shield(exited), timeout)
        except TimeoutError:
            timed_out = True
        _kill_group(proc.pid)  # timed-out commands and stray background jobs
        await asyncio.shield(exited)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(eof), DRAIN_S)
    finally:
        _kill_group(proc.pid)
        loop.remove_reader(pidfd)
        loop.remove_reader(out)
        if exited.done():
            proc.wait()  # reaps at once: the pidfd said it exited
        else:  # cancelled before the exit was seen: reap off the loop
            loop.run_in_executor(executor, proc.wait)
        os.close(pidfd)
        proc.stdout.close()
    return (124 if timed_out else proc.returncode or 0), cap.text(), timed_out


def _start(
    argv: list[str], env: dict, cwd: str | None, check: Callable[[], None] | None
) -> tuple[subprocess.Popen, int]:
    if check is not None:
        check()
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        cwd=cwd,
        env=env,
        start_new_session=True,
    )
    os.set_blocking(proc.stdout.fileno(), False)
    return proc, os.pidfd_open(proc.pid)


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def _run_asyncio(
    argv: list[str], *, env: dict, cwd: str | None, timeout: float, limit: int, check: Callable[[], None] | None
) -> tuple[int, str, bool]:
    if check is not None:
        check()
    proc = await asyncio.create_subprocess_exec(
        *argv,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        cwd=cwd,
        env=env,
        start_new_session=True,
    )

    async def read() -> str:
        cap = OutputCap(limit)
        while chunk := await proc.stdout.read(READ_CHUNK):
            cap.feed(chunk)
        return cap.text()

    reader = asyncio.ensure_future(read())
    try:
        await asyncio.wait_for(proc.wait(), timeout)
        timed_out = False
    except TimeoutError:
        timed_out = True
    finally:
        _kill_group(proc.pid)
        if proc.returncode is None:
            with contextlib.suppress(Exception):
                await proc.wait()
    try:
        output = await asyncio.wait_for(reader, DRAIN_S)
    except TimeoutError:
        reader.cancel()
        output = ""
    return (124 if timed_out else proc.returncode or 0), output, timed_out
