"""Labels that tie a container to its runner, and removal of containers whose runner died."""

from __future__ import annotations

import logging
import os
import socket

import docker
from docker.errors import APIError, NotFound

from hermes_runner.sandbox.base import process_start, runner_alive

log = logging.getLogger(__name__)

PREFIX = "io.hermes-runner"
RUN_NAME = f"{PREFIX}.run-name"
RUN_DIR = f"{PREFIX}.run-dir"
PROMPT_KEY = f"{PREFIX}.prompt-key"
RUNNER_PID = f"{PREFIX}.runner-pid"
RUNNER_START = f"{PREFIX}.runner-start"  # the pid's start time: a reused pid is not mistaken for the runner
HOSTNAME = f"{PREFIX}.hostname"
KEEP = f"{PREFIX}.keep"


def runner_labels(run_name: str, run_dir: str) -> dict[str, str]:
    """Labels of every container this process creates."""
    pid = os.getpid()
    return {
        RUN_NAME: run_name,
        RUN_DIR: run_dir,
        RUNNER_PID: str(pid),
        RUNNER_START: process_start(pid) or "",
        HOSTNAME: socket.gethostname(),
    }


def remove(api: docker.APIClient, cid: str) -> None:
    """Remove a container and its anonymous volumes; gone already is fine."""
    try:
        api.remove_container(cid, v=True, force=True)
    except NotFound:
        pass
    except APIError as exc:
        if exc.status_code != 409:  # 409: removal already in progress (auto-remove)
            raise


def reap(api: docker.APIClient) -> int:
    """Remove every container (of any run dir) whose runner on this host is dead; return how many.

    Any runner's start-up does this, so a killed runner's containers never wait for the same run dir.
    """
    host = socket.gethostname()
    reaped = 0
    for c in api.containers(all=True, filters={"label": RUNNER_PID}):
        labels = c.get("Labels") or {}
        if labels.get(KEEP) == "1" or labels.get(HOSTNAME) != host:
            continue
        pid = labels.get(RUNNER_PID, "")
        if pid.isdigit() and runner_alive(int(pid), labels.get(RUNNER_START, "")):
            continue
        remove(api, c["Id"])
        reaped += 1
    if reaped:
        log.warning("removed %d container(s) left behind by killed runners", reaped)
    return reaped


def sweep(api: docker.APIClient, labels: dict[str, str]) -> int:
    """Remove every container (except kept ones) created by this process."""
    keys = (RUN_DIR, RUNNER_PID, RUNNER_START, HOSTNAME)
    filters = {"label": [f"{k}={labels[k]}" for k in keys]}
    gone = 0
    for c in api.containers(all=True, filters=filters):
        if (c.get("Labels") or {}).get(KEEP) != "1":
            remove(api, c["Id"])
            gone += 1
    return gone
