"""A watchdog beside the runner: when the runner dies (even kill -9), it removes the runner's containers.

The runner starts it in a session of its own with the read end of a pipe as stdin and keeps
the write end; the kernel closes that end when the runner exits in any way, the watchdog reads
EOF, removes every container labelled with the runner's pid and start time, and exits. At a
clean shutdown the runner has removed them already and the sweep finds nothing.
"""

from __future__ import annotations

import contextlib
import json
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
        """Close our end of the pipe (the watchdog sweeps, finds nothing, exits) and reap it."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)


def spawn(labels: dict[str, str], base_url: str | None = None) -> Watchdog:
    """Start the watchdog for the containers carrying `labels` on the engine at `base_url` (None: DOCKER_HOST)."""
    r, w = os.pipe()  # both non-inheritable: no sandboxed command ever holds the write end
    pkg_root = str(Path(hermes_runner.__file__).resolve().parent.parent)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [pkg_root, os.environ.get("PYTHONPATH")]))}
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "hermes_runner.sandbox.docker_watchdog", json.dumps(labels), base_url or ""],
            stdin=r,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            start_new_session=True,  # a Ctrl-C or a kill of the runner's process group leaves it running
        )
    finally:
        os.close(r)
    return Watchdog(proc, w)


def main() -> int:
    labels, base_url = json.loads(sys.argv[1]), sys.argv[2]
    while os.read(0, 65536):  # until the runner's end of the pipe closes
        pass
    import docker

    from hermes_runner.sandbox.docker_orphans import sweep

    client = docker.DockerClient(base_url=base_url, timeout=60) if base_url else docker.from_env(timeout=60)
    try:
        sweep(client.api, labels)
    finally:
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
