"""Atropos' real trajectory API server (`run-api` from the consumer venv `atropos`) and a scripted trainer that
talks to it over plain HTTP: register, start, pull batches."""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import urllib.request
from collections.abc import Iterator
from pathlib import Path

from tests.helpers.consumers import consumer_python
from tests.helpers.wait import exited, wait_for


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(url: str, body: object = None) -> dict:
    """GET (no body) or POST (a JSON body) and the JSON reply."""
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as r:
        return json.loads(r.read())


def _answers(url: str) -> bool:
    try:
        return http(url + "/").get("message") == "AtroposLib API"
    except OSError:
        return False


@contextlib.contextmanager
def api_server(log: Path) -> Iterator[str]:
    """`run-api` on a free loopback port, waited for by polling; its URL."""
    port = free_port()
    code = "from atroposlib.cli.run_api import main; main()"
    argv = [str(consumer_python("atropos")), "-c", code, "--host", "127.0.0.1", "--port", str(port)]
    proc = subprocess.Popen(argv, stdout=log.open("wb"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _answers(url), 60, "the Atropos API server", gone=exited(proc))
        yield url
    finally:
        proc.terminate()
        proc.wait(10)


class Trainer:
    """The trainer's side of the protocol: register (its batch size, in sequences), then pull batches."""

    def __init__(self, url: str, batch_size: int, max_token_len: int = 4096):
        self.url = url
        http(url + "/register", {"wandb_group": "g", "wandb_project": "p", "batch_size": batch_size,
                                 "max_token_len": max_token_len, "checkpoint_dir": "", "save_checkpoint_interval": 0,
                                 "starting_step": 0, "num_steps": 100})  # fmt: skip
        assert http(url + "/batch")["batch"] is None  # the first pull starts the run: environments may register

    def pull(self) -> list[dict]:
        """The groups of one batch ([] if the queue holds less than a batch)."""
        return http(self.url + "/batch")["batch"] or []

    def queued(self) -> int:
        return http(self.url + "/status")["queue_size"]
