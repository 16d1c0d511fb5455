"""executor.address: a run joins a cluster started beforehand with `ray start --head`."""

from __future__ import annotations

import contextlib
import json
import os
import random
import re
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil
import pytest

from hermes_runner.model.serve import free_port

from tests.helpers.crash import assert_each_prompt_once, kill_mid_run
from tests.helpers.run import ROOT, LiveRunner, base_overrides, read_jsonl, run_cli, write_jsonl

pytest.importorskip("ray")
pytestmark = pytest.mark.timeout(300)
# Ray >= 2.59 turns token auth on for clusters it starts; a driver joining one must use it too.
# The token is given explicitly (not ~/.ray/auth_token), so the test does not depend on that file.
TOKEN_AUTH = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": secrets.token_hex(16)}


def ray_start(log: Path, *args: str) -> subprocess.Popen:
    """`ray start --block ARGS` (a node of a real cluster), once it says it started."""
    ray_bin = Path(sys.executable).parent / "ray"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [str(ray_bin), "start", "--block", "--disable-usage-stats", "--object-store-memory=100000000", *args],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True, env={**os.environ, **TOKEN_AUTH},
        )  # fmt: skip
    deadline = time.monotonic() + 120
    while "Ray runtime started" not in log.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            stop(proc)
            raise AssertionError(log.read_text()[-2000:])
        time.sleep(0.5)
    return proc


def stop(proc: subprocess.Popen) -> None:
    """`ray start --block` stops the processes it started on SIGTERM; SIGKILL to its group if it hangs."""
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(60)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)


@pytest.fixture
def head_node():
    """A real single-node cluster, as `ray start` makes one; stopped (only it) afterwards."""
    port = free_port()
    temp = tempfile.mkdtemp(prefix="ray")  # short: Ray's socket paths must fit in 107 bytes
    proc = ray_start(Path(temp) / "start.log", "--head", f"--port={port}", "--num-cpus=2", "--include-dashboard=false",
                     f"--temp-dir={temp}")  # fmt: skip
    try:
        yield f"127.0.0.1:{port}"
    finally:
        stop(proc)
        shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture
def two_nodes():
    """A head node and a second node (`ray start --address`), 1 CPU each: (address, the second node's process)."""
    port = free_port()
    temp = tempfile.mkdtemp(prefix="ray")
    head = ray_start(Path(temp) / "head.log", "--head", f"--port={port}", "--num-cpus=1", "--include-dashboard=false",
                     f"--temp-dir={temp}", '--resources={"head": 1}')  # fmt: skip
    second = None
    try:
        second = ray_start(Path(temp) / "second.log", f"--address=127.0.0.1:{port}", "--num-cpus=1",
                           '--resources={"second": 1}')  # fmt: skip
        yield f"127.0.0.1:{port}", second
    finally:
        for proc in (second, head):
            if proc is not None:
                stop(proc)
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


def test_a_node_lost_mid_run_then_the_driver_killed(two_nodes, server, tmp_path, monkeypatch):
    """200 prompts at 32 in flight spread over both nodes (the default sessions_per_worker=32 would make one
    actor); the second node's raylet and workers are killed while 32 calls are held: the run finishes with every
    prompt once, having made at most the distinct calls + those in flight at the loss, each in usage.jsonl. Then
    the driver of a second run on the surviving node is killed -9 mid-run and the rerun resumes."""
    address, second = two_nodes
    for key, value in TOKEN_AUTH.items():  # (the drivers below, started with this environment, join the cluster)
        monkeypatch.setenv(key, value)
    n, run_dir = 200, tmp_path / "run"
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": f"task {i}"} for i in range(n)])
    ray_opts = ["executor=ray", f"executor.address={address}", "executor.cpus_per_worker=1"]
    args = [*base_overrides(server, tmp_path), *ray_opts, "num_workers=32", f"dataset_file={ds}", "run_name=two",
            f"hydra.run.dir={run_dir}"]  # fmt: skip
    server.hold(after=100)
    with LiveRunner([sys.executable, str(ROOT / "run.py"), *args]) as run:
        ready = re.compile(r"Ray worker \d+ ready \(pid \d+, node (\w+)\)")
        run.wait_for(lambda: len(set(ready.findall(run.output))) == 2, 180, "an actor ready on each node")
        run.wait_for(lambda: server.held == 32, 180, "32 calls held", state=lambda: server.held)
        in_flight = server.in_flight
        raylet = next(p for p in psutil.Process(second.pid).children(recursive=True) if p.name() == "raylet")
        for proc in [raylet, *raylet.children(recursive=True)]:  # the node and its workers: a machine lost
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
        server.release()
        assert run.proc.wait(timeout=240) == 0, run.output[-3000:]
    assert_each_prompt_once(run_dir, n)
    assert 2 * n <= len(server.requests) <= 2 * n + in_flight, (len(server.requests), in_flight)
    # The driver recorded each call as it started, those lost with the node too: they count as unanswered.
    starts = sum(c["event"] == "start" for c in read_jsonl(run_dir / "usage.jsonl"))
    calls = json.loads((run_dir / "statistics.json").read_text())["model_calls"]
    assert starts == calls["started"] == len(server.requests), (starts, calls, len(server.requests))
    assert 1 <= calls["unanswered"] <= in_flight and calls["failed"] == 0, calls
    said = rf"{calls['unanswered']}\s+model\s+calls\s+were\s+sent\s+and\s+never\s+answered"
    assert not calls["unanswered"] or re.search(said, run.output), run.output[-3000:]  # (the summary says so)

    server.reset()
    m, again = 30, tmp_path / "again"
    ds2 = write_jsonl(tmp_path / "d2.jsonl", [{"prompt": f"job {i}"} for i in range(m)])
    args2 = [*base_overrides(server, tmp_path), *ray_opts, "num_workers=8", f"dataset_file={ds2}", "run_name=again",
             f"hydra.run.dir={again}"]  # fmt: skip
    landed, _ = kill_mid_run(args2, tmp_path / "again.log", server, random.Random(7), 1, (5, 20))
    assert landed == 1
    assert_each_prompt_once(again, m)
