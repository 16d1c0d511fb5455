"""A watchdog beside a root runner of the local sandbox: when the runner dies (even kill -9), its prompts' tmpfs
mounts go with it.

How it learns of the runner's end is sandbox/watchdog.py's (as for Docker's, sandbox/docker/watchdog.py); then it
unmounts every mount under the run's sandbox dir and removes the dir (`sandbox.keep=true`: copies each prompt's dir
to the disk first and keeps it). A watchdog killed too leaves the work to the next runner's start-up cleanup
(reap_orphans), which does the same.
"""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import sys
from pathlib import Path

from hermes_runner.sandbox.base import runner_alive
from hermes_runner.sandbox.local.mounts import copy_out, mounts_under, remove_tree
from hermes_runner.sandbox.watchdog import Watchdog, wait_for_runner
from hermes_runner.sandbox.watchdog import spawn as spawn_watchdog

log = logging.getLogger(__name__)

MARKER = ".hermes-runner-sandbox"  # written into each run's dir; the reaper removes only dirs holding it


def spawn(run_dir: Path, keep: bool) -> Watchdog:
    """Start the watchdog of the run's sandbox dir `run_dir`."""
    return spawn_watchdog("hermes_runner.sandbox.local.watchdog", str(run_dir), "1" if keep else "0")


def main() -> int:
    run_dir, keep = Path(sys.argv[1]), sys.argv[2] == "1"
    wait_for_runner()
    _clean(run_dir, keep)
    return 0


def _clean(run_dir: Path, keep: bool) -> list[str]:
    """A dead runner's dir: kept (each prompt's tmpfs copied to the disk, the dir left) or removed; returns the
    mounts that would not go."""
    if keep:
        for point in mounts_under(run_dir):
            with contextlib.suppress(OSError):
                copy_out(point)
        return []
    return remove_tree(run_dir) if run_dir.is_dir() else []


def reap_orphans(root: Path, own: Path) -> None:
    """At a runner's start: the dirs under `root` (but `own`) of dead runners, only those holding our marker, go
    as their watchdog would have done it (a kept run's prompt dirs are copied out of their tmpfs and stay)."""
    host = socket.gethostname()
    for d in root.iterdir():
        if d == own:
            continue
        try:
            if not d.is_dir() or d.is_symlink():
                continue
            m = d / MARKER
            if not m.is_file() or m.is_symlink():
                continue
            info = json.loads(m.read_text())
            pid, start = int(info["pid"]), str(info.get("start", ""))
            if info.get("host") != host or runner_alive(pid, start):
                continue
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if left := _clean(d, bool(info.get("keep"))):  # a killed runner's mounts go first, or nothing is removed
            log.error("cannot unmount %s: the dead runner's dir %s is left in place", left, d)


if __name__ == "__main__":
    sys.exit(main())
