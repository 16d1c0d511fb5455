"""Labels that tie a container to its runner, and removal of containers whose runner died."""

from __future__ import annotations

import logging
import os
import socket
import time

import docker
from docker.errors import APIError, DockerException, NotFound
from requests import RequestException

from hermes_runner.errors import ContainerNotRemoved
from hermes_runner.sandbox.base import process_start, runner_alive
from hermes_runner.sandbox.docker import procs

log = logging.getLogger(__name__)

PREFIX = "io.hermes-runner"
RUN_NAME = f"{PREFIX}.run-name"
RUN_DIR = f"{PREFIX}.run-dir"
PROMPT_KEY = f"{PREFIX}.prompt-key"
RUNNER_PID = f"{PREFIX}.runner-pid"
RUNNER_START = f"{PREFIX}.runner-start"  # the pid's start time: a reused pid is not mistaken for the runner
HOSTNAME = f"{PREFIX}.hostname"
KEEP = f"{PREFIX}.keep"
REMOVAL_WAIT_S = 30.0  # how long an auto-removal under way may take before the container counts as stuck


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
    """Remove a container and its anonymous volumes; gone already is fine.

    When the engine cannot remove it (an error, a timeout, an auto-removal that does not end), its processes are
    killed from the host (docker/procs.py) and the removal tried once more; ContainerNotRemoved says it
    failed either way (the prompt fails: its container did not end cleanly), and what is left."""
    try:
        _remove(api, cid)
        return
    except (DockerException, RequestException) as exc:
        reason = _explain(exc)
    pid = procs.init_pid(api, cid)
    killed = procs.kill(cid, pid)
    try:
        _remove(api, cid)
        after = "then removed"
    except (DockerException, RequestException) as exc:
        after = f"it is still there ({_explain(exc)}); the next run's start removes it"
    what = f"container {cid[:12]} could not be removed ({reason}); {killed.describe()}; {after}"
    log.error("%s", what)
    raise ContainerNotRemoved(what)


def _remove(api: docker.APIClient, cid: str) -> None:
    """One removal; an auto-removal already under way (409) is waited for (REMOVAL_WAIT_S)."""
    try:
        api.remove_container(cid, v=True, force=True)
        return
    except NotFound:
        return
    except APIError as exc:
        if exc.status_code != 409:  # 409: removal already in progress (auto-remove)
            raise
    end = time.monotonic() + REMOVAL_WAIT_S
    delay = 0.05
    while time.monotonic() < end:
        try:
            api.inspect_container(cid)
        except NotFound:
            return
        time.sleep(delay)
        delay = min(delay * 2, 1.0)
    api.remove_container(cid, v=True, force=True)  # (raises when it still cannot be removed)


def _explain(exc: Exception) -> str:
    return str(getattr(exc, "explanation", None) or exc) or type(exc).__name__


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
        try:
            remove(api, c["Id"])  # (its processes are killed even when the engine cannot remove it)
        except ContainerNotRemoved:
            continue  # logged; the next start tries again
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
            try:
                remove(api, c["Id"])
            except ContainerNotRemoved:
                continue  # logged; the next start on this engine tries again
            gone += 1
    return gone
