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
import selectors
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Sequence
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
FD_ARG = "\0fd:{}"  # in argv: replaced by the number of the child's fd holding files[i] (no real arg has a NUL)


def fd_arg(i: int) -> str:
    """The argv placeholder of the fd that will hold `files[i]` (e.g. after `bwrap --seccomp`)."""
    return FD_ARG.format(i)


@contextlib.contextmanager
def passed_files(argv: list[str], files: Sequence[bytes]) -> Iterator[tuple[list[str], tuple[int, ...]]]:
    """argv with each `fd_arg(i)` replaced by a fresh memory file holding files[i] (read from its start), and
    the fds to pass; each fd is new per child, so a reader that reads to the end leaves nothing to the next."""
    if not files:
        yield argv, ()
        return
    fds: list[int] = []
    try:
        for data in files:
            fd = os.memfd_create("hermes-file", os.MFD_CLOEXEC)
            fds.append(fd)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.lseek(fd, 0, os.SEEK_SET)
        names = {fd_arg(i): str(fd) for i, fd in enumerate(fds)}
        yield [names.get(a, a) for a in argv], tuple(fds)
    finally:
        for fd in fds:
            os.close(fd)


async def run_command(
    argv: list[str],
    *,
    env: dict[str, str],
    cwd: str | None,
    timeout: float,
    limit: int,
    executor: Executor,
    check: Callable[[], None] | None = None,
    stdin: bytes | None = None,
    files: Sequence[bytes] = (),
    stop: asyncio.Future | None = None,
) -> tuple[int, str, bool]:
    """Run argv in a new session with stdout+stderr captured (capped at `limit`); kill its group at the end.

    `stdin` is the command's standard input (from a memory file, so input of any size never blocks
    and never goes through argv); returns (exit code, output, timed out); `check` runs first in the
    worker thread (and may raise); `files` go to fds named in argv by `fd_arg`; once `stop` is done the
    command is killed as on a timeout (but not reported as timed out).
    """
    if not PIDFD:
        return await _run_asyncio(
            argv, env=env, cwd=cwd, timeout=timeout, limit=limit, check=check, stdin=stdin, files=files, stop=stop
        )
    loop = asyncio.get_running_loop()
    start = functools.partial(_start, argv, env, cwd, check, stdin, files)
    proc, pidfd = await loop.run_in_executor(executor, start)
    out = proc.stdout.fileno()
    cap = OutputCap(limit)
    exited, eof = loop.create_future(), _capture(loop, out, cap)
    loop.add_reader(pidfd, lambda: exited.done() or exited.set_result(None))
    timed_out = False
    try:
        waits = [exited] if stop is None else [exited, stop]
        done, _ = await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)  # cancels neither
        timed_out = not done
        _kill_group(proc.pid)  # timed-out or stopped commands and stray background jobs
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


def _capture(loop: asyncio.AbstractEventLoop, fd: int, cap: OutputCap) -> asyncio.Future:
    """Feed what comes on `fd` into `cap`, read by the event loop; the future is done at its end."""
    eof = loop.create_future()

    def on_output() -> None:
        try:
            while chunk := os.read(fd, READ_CHUNK):
                cap.feed(chunk)
        except BlockingIOError:
            return
        except OSError:
            pass
        loop.remove_reader(fd)
        if not eof.done():
            eof.set_result(None)

    loop.add_reader(fd, on_output)
    return eof


@contextlib.contextmanager
def stdin_for(data: bytes | None) -> Iterator[int]:
    """What to give a child as stdin: a memory file holding `data` (read from its start), or /dev/null for
    None. The fd is ours to close once the child has it, which leaving the block does."""
    if data is None:
        yield subprocess.DEVNULL
        return
    fd = os.memfd_create("hermes-input", os.MFD_CLOEXEC)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.lseek(fd, 0, os.SEEK_SET)
        yield fd
    finally:
        os.close(fd)


def _start(
    argv: list[str],
    env: dict,
    cwd: str | None,
    check: Callable[[], None] | None,
    stdin: bytes | None = None,
    files: Sequence[bytes] = (),
) -> tuple[subprocess.Popen, int]:
    if check is not None:
        check()
    with stdin_for(stdin) as fd, passed_files(argv, files) as (args, fds):
        proc = subprocess.Popen(
            args, stdin=fd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, cwd=cwd, env=env,
            start_new_session=True, pass_fds=fds,
        )  # fmt: skip
    os.set_blocking(proc.stdout.fileno(), False)
    return proc, os.pidfd_open(proc.pid)


def run_io(
    argv: list[str],
    *,
    env: dict[str, str],
    cwd: str | None,
    stdin: bytes | None,
    max_out: int,
    timeout: float,
    files: Sequence[bytes] = (),
) -> tuple[int, bytes, str, bool]:
    """Run a short helper (blocking): (exit code, stdout up to max_out + 1 bytes, stderr head, timed out).

    For file reads and writes inside a sandbox: stdout is kept apart from stderr and read raw.
    """
    err = os.memfd_create("hermes-stderr", os.MFD_CLOEXEC)
    try:
        with stdin_for(stdin) as fd, passed_files(argv, files) as (args, fds):
            proc = subprocess.Popen(
                args, stdin=fd, stdout=subprocess.PIPE, stderr=err, cwd=cwd, env=env, start_new_session=True,
                pass_fds=fds,
            )  # fmt: skip
    except BaseException:
        os.close(err)
        raise
    out = bytearray()
    timed_out = False
    deadline = time.monotonic() + timeout
    try:
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            while len(out) <= max_out:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    timed_out = True
                    break
                chunk = os.read(proc.stdout.fileno(), READ_CHUNK)
                if not chunk:
                    break
                out += chunk
        if not timed_out and len(out) <= max_out:
            # End of stdout is not the end of the helper (`exec cat > file` closes it first, then copies
            # stdin): wait for its exit, and kill only what overran its time or output.
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            timed_out = proc.returncode is None
        _kill_group(proc.pid)
        code = proc.wait()
        os.lseek(err, 0, os.SEEK_SET)
        stderr = os.read(err, 4096).decode(errors="replace")
    finally:
        _kill_group(proc.pid)
        proc.stdout.close()
        os.close(err)
    return code, bytes(out[: max_out + 1]), stderr, timed_out


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


async def _run_asyncio(
    argv: list[str],
    *,
    env: dict,
    cwd: str | None,
    timeout: float,
    limit: int,
    check: Callable[[], None] | None,
    stdin: bytes | None = None,
    files: Sequence[bytes] = (),
    stop: asyncio.Future | None = None,
) -> tuple[int, str, bool]:
    if check is not None:
        check()
    with stdin_for(stdin) as fd, passed_files(argv, files) as (args, fds):
        proc = await asyncio.create_subprocess_exec(
            *args, stdin=fd, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, cwd=cwd, env=env,
            start_new_session=True, pass_fds=fds,
        )  # fmt: skip

    async def read() -> str:
        cap = OutputCap(limit)
        while chunk := await proc.stdout.read(READ_CHUNK):
            cap.feed(chunk)
        return cap.text()

    reader = asyncio.ensure_future(read())
    waiter = asyncio.ensure_future(proc.wait())
    try:
        waits = [waiter] if stop is None else [waiter, stop]
        done, _ = await asyncio.wait(waits, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        timed_out = not done
    finally:
        waiter.cancel()
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
