"""A watchdog beside a root runner of the local sandbox: when the runner dies (even kill -9), its prompts' tmpfs
mounts go with it.

As for Docker (docker_watchdog.py): the runner starts it in a session of its own with the read end of
a pipe as stdin and keeps the write end, which the kernel closes when the runner exits in any way.
On EOF the watchdog unmounts every mount under the run's sandbox dir and removes the dir
(`sandbox.keep=true`: copies each prompt's dir to the disk first and keeps it). At a clean shutdown
the runner has done that already and the watchdog finds nothing. A watchdog killed too leaves the
work to the next runner's start-up cleanup (LocalBackend._reap_orphans), which does the same.
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
        """Close our end of the pipe (the watchdog finds nothing left, exits) and reap it."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)


def spawn(run_dir: Path, keep: bool) -> Watchdog:
    """Start the watchdog of the run's sandbox dir `run_dir`."""
    r, w = os.pipe()  # both non-inheritable: no sandboxed command ever holds the write end
    pkg_root = str(Path(hermes_runner.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [pkg_root, os.environ.get("PYTHONPATH")]))}
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "hermes_runner.sandbox.local_watchdog", str(run_dir), "1" if keep else "0"],
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


def main() -> int:
    run_dir, keep = Path(sys.argv[1]), sys.argv[2] == "1"
    while os.read(0, 65536):  # until the runner's end of the pipe closes
        pass
    from hermes_runner.sandbox.mounts import copy_out, mounts_under, remove_tree

    if keep:
        for point in mounts_under(run_dir):
            with contextlib.suppress(OSError):
                copy_out(point)
    elif run_dir.is_dir():
        remove_tree(run_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
