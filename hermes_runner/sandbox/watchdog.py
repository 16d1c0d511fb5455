"""A watchdog process beside the runner: when the runner dies in any way (even kill -9), it cleans up.

The runner starts a watchdog module (`docker/watchdog.py`, `local/watchdog.py`) in a session of its own with
the read end of a pipe as stdin and keeps the write end; the kernel closes that end when the runner
exits in any way, the watchdog reads EOF (`wait_for_runner`), does its module's cleanup and exits.
At a clean shutdown the runner has cleaned up already and the watchdog finds nothing.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import hermes_runner


class Watchdog:
    def __init__(self, proc: subprocess.Popen, fd: int):
        self.proc = proc
        self._fd = fd

    def stop(self) -> None:
        """Close our end of the pipe (the watchdog finds nothing left to do, exits) and reap it."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)


def spawn(module: str, *args: str) -> Watchdog:
    """Start `python -m module *args` as the watchdog of this process."""
    r, w = os.pipe()  # both non-inheritable: no sandboxed command ever holds the write end
    pkg_root = str(Path(hermes_runner.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [pkg_root, os.environ.get("PYTHONPATH")]))}
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", module, *args],
            stdin=r,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd="/",
            start_new_session=True,  # a Ctrl-C or a kill of the runner's process group leaves it running
        )
    finally:
        os.close(r)
    return Watchdog(proc, w)


def wait_for_runner() -> None:
    """In the watchdog: return once the runner's end of the pipe closes (the runner exited)."""
    while os.read(0, 65536):
        pass
