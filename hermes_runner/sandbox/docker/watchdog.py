"""A watchdog beside the runner: when the runner dies (even kill -9), it removes the runner's containers.

How it learns of the runner's end is sandbox/watchdog.py's (a clean shutdown leaves it nothing to do); on it,
this one removes every container labelled with the runner's pid and start time, and exits.
"""

from __future__ import annotations

import json
import sys

from hermes_runner.sandbox.watchdog import Watchdog, wait_for_runner
from hermes_runner.sandbox.watchdog import spawn as spawn_watchdog


def spawn(labels: dict[str, str], base_url: str | None = None) -> Watchdog:
    """Start the watchdog for the containers carrying `labels` on the engine at `base_url` (None: DOCKER_HOST)."""
    return spawn_watchdog("hermes_runner.sandbox.docker.watchdog", json.dumps(labels), base_url or "")


def main() -> int:
    labels, base_url = json.loads(sys.argv[1]), sys.argv[2]
    wait_for_runner()
    import docker

    from hermes_runner.sandbox.docker.orphans import sweep

    client = docker.DockerClient(base_url=base_url, timeout=60) if base_url else docker.from_env(timeout=60)
    try:
        sweep(client.api, labels)
    finally:
        client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
