"""Tie a model server's life to the runner's: ``python -P serve_guard.py [--stop-timeout S] -- CMD...``.

The runner starts this guard with a pipe on its stdin and keeps the only write end. The guard
starts CMD in a process group of its own and waits. When the pipe closes (the runner asked for
the stop, exited, crashed or was killed with SIGKILL), when the guard gets SIGTERM/SIGINT/SIGHUP,
or when the server exits, the guard stops the server's process group (SIGTERM, then SIGKILL after
the timeout) and every other descendant (it is their subreaper on Linux), then exits with the
server's exit code. The server also gets SIGKILL if the guard itself is killed. So no model
server outlives its run, whatever starts it (llama.cpp, vLLM, a shell script with children).

Standalone on purpose (standard library only, run by path): it must work without the package
being importable in the child's environment.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import os
import select
import signal
import subprocess
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
PREFIX = "[serve-guard]"


def _prctl(option: int, value: int) -> None:
    with contextlib.suppress(Exception):  # not Linux: the process group still covers the usual case
        ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0)


def _say(text: str) -> None:
    print(f"{PREFIX} {text}", flush=True)


def descendants(root: int) -> list[int]:
    """Every live process below `root` (from /proc), parents before children."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc") if os.path.isdir("/proc") else []:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2 :].split()  # after "pid (comm) ": state, ppid, ...
        children.setdefault(int(fields[1]), []).append(int(entry))
    out, todo = [], [root]
    while todo:
        kids = children.get(todo.pop(), [])
        out += kids
        todo += kids
    return out


def _kill(pids: list[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


class Guard:
    def __init__(self, argv: list[str], stop_timeout: float):
        self.argv = argv
        self.stop_timeout = stop_timeout
        self.server: subprocess.Popen | None = None
        self.code: int | None = None  # the server's exit code, once reaped
        self.stopping = False

    def _on_signal(self, signum: int, _frame: object) -> None:
        self.stopping = True

    def _reap(self) -> None:
        """Collect exited children (the server and adopted orphans) so none stays a zombie."""
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            if self.server is not None and pid == self.server.pid:
                self.code = os.waitstatus_to_exitcode(status)
                self.server.returncode = self.code

    def run(self) -> int:
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._on_signal)
        me = os.getpid()

        def tie_to_guard() -> None:  # in the child, before exec (the guard has no threads)
            _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
            if os.getppid() != me:
                os._exit(1)

        try:
            self.server = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                process_group=0,
                preexec_fn=tie_to_guard,  # noqa: PLW1509
            )
        except OSError as exc:
            _say(f"cannot start {self.argv[0]!r}: {exc}")
            return 127
        _say(f"server pid {self.server.pid}")
        while not self.stopping and self.code is None:
            with contextlib.suppress(InterruptedError):
                ready, _, _ = select.select([0], [], [], 0.2)
                if ready and not os.read(0, 4096):
                    break  # runner gone or done
            self._reap()
        self.stop()
        if self.code is None:
            return 0
        return self.code if self.code >= 0 else 128 - self.code

    def stop(self) -> None:
        """SIGTERM to the server's group and other descendants; SIGKILL to what is left after the timeout."""
        assert self.server is not None
        if self.code is None:
            _say(f"stopping server pid {self.server.pid}")
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.server.pid, signal.SIGTERM)
        _kill(descendants(os.getpid()), signal.SIGTERM)
        deadline = time.monotonic() + self.stop_timeout
        while time.monotonic() < deadline:
            self._reap()
            if not descendants(os.getpid()):
                return
            time.sleep(0.05)
        _say(f"still running after {self.stop_timeout:g}s: SIGKILL")
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.server.pid, signal.SIGKILL)
        deadline = time.monotonic() + 5.0
        while (left := descendants(os.getpid())) and time.monotonic() < deadline:
            _kill(left, signal.SIGKILL)
            time.sleep(0.05)
            self._reap()
        if left:
            _say(f"could not kill {left} (uninterruptible?)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stop-timeout", type=float, default=10.0, help="seconds between SIGTERM and SIGKILL")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- then the server command")
    args = ap.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("no server command given")
    return Guard(command, args.stop_timeout).run()


if __name__ == "__main__":
    sys.exit(main())
