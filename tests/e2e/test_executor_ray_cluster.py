"""executor.address: a run joins a cluster started beforehand with `ray start --head`."""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from hermes_runner.model.serve import free_port

from tests.helpers.run import base_overrides, read_jsonl, run_cli, write_jsonl

pytest.importorskip("ray")
pytestmark = pytest.mark.timeout(300)
# Ray >= 2.59 turns token auth on for clusters it starts; a driver joining one must use it too.
# The token is given explicitly (not ~/.ray/auth_token), so the test does not depend on that file.
TOKEN_AUTH = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16)}


@pytest.fixture
def head_node():
    """A real single-node cluster, as `ray start` makes one; stopped (only it) afterwards."""
    port = free_port()
    temp = tempfile.mkdtemp(prefix="ray")  # short: Ray's socket paths must fit in 107 bytes
    ray_bin = Path(sys.executable).parent / "ray"
    log = Path(temp) / "start.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [str(ray_bin), "start", "--head", "--block", f"--port={port}", "--num-cpus=2", "--include-dashboard=false",
             "--disable-usage-stats", "--object-store-memory=100000000", f"--temp-dir={temp}"],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env={**os.environ, **TOKEN_AUTH},
        )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while "Ray runtime started" not in log.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
            time.sleep(0.5)
        yield f"127.0.0.1:{port}"
    finally:
        proc.send_signal(signal.SIGTERM)  # `ray start --block` stops the processes it started
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        shutil.rmtree(temp, ignore_errors=True)


def test_run_on_an_existing_cluster(head_node, server, tmp_path):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": f"task {i}"} for i in range(6)])
    res = run_cli(
        *base_overrides(server, tmp_path), "executor=ray", f"executor.address={head_node}", "num_workers=4",
        "executor.sessions_per_worker=2", "executor.cpus_per_worker=0.5", f"dataset_file={ds}", "run_name=cl",
        f"hydra.run.dir={tmp_path / 'run'}", timeout=240, env=TOKEN_AUTH,
    )  # fmt: skip
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    out = res.stdout + res.stderr
    assert f"connecting to the Ray cluster at {head_node}" in out and "starting a local Ray cluster" not in out
    assert len(read_jsonl(tmp_path / "run" / "trajectories.jsonl")) == 6
