"""executor=ray on a real local Ray cluster: streaming, worker death, resume, Ctrl-C."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import psutil
import pytest

from hermes_runner.config import ExecutorConfig
from hermes_runner.executors.ray import _init_ray

from tests.helpers.crash import assert_each_prompt_once, sleepy
from tests.helpers.otlp import model_turns_of, op, read_file, tool_calls_of, tree
from tests.helpers.run import ROOT, base_overrides, compose_cfg, read_jsonl, run_inprocess, script, write_jsonl
from tests.helpers.wait import exited, wait_for

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.timeout(600)
RAY = ["executor=ray", "executor.cpus_per_worker=0.5"]
# How long a test waits for the actors' first calls to reach the server's hold. The hold keeps the run from
# ending before, so only a broken run takes this long; on a loaded machine the actors alone took over 60 s to
# start (each imports Ray and the package), so the bound is roomy.
ACTORS_BUSY_S = 300


@pytest.fixture(scope="module", autouse=True)
def cluster():
    """One local cluster (2 CPUs) for the in-process tests of this module; runs reuse it."""
    if ray.is_initialized():
        ray.shutdown()
    assert _init_ray(ExecutorConfig(backend="ray", num_cpus=2))
    yield
    ray.shutdown()


def lines_of(path: Path) -> int:
    return path.read_text().count("\n") if path.exists() else 0


def actor_pids(talking_to: int) -> list[int]:
    """Our session actors (Ray titles them `ray::SessionActor...`) with a connection to port `talking_to`."""
    out = []
    for p in psutil.process_iter(["pid", "cmdline"]):
        cmd = p.info["cmdline"] or []
        if cmd and cmd[0].startswith("ray::SessionActor"):
            try:
                if any(c.raddr and c.raddr.port == talking_to for c in p.net_connections("tcp")):
                    out.append(p.info["pid"])
            except psutil.Error:
                continue
    return out


def test_sessions_run_on_actors_and_stream_back(make_cfg, tmp_path, run_dir, server):
    slow = {"content": "slow one", "reasoning": "r"}
    rows = [{"prompt": script(slow, text="slow task")}] + [{"prompt": f"quick {i}"} for i in range(7)]
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    cfg = make_cfg(*RAY, "num_workers=4", "executor.sessions_per_worker=2", "sandbox.keep=true", dataset=ds)
    server.hold(only="slow task")  # the slow prompt's reply waits until the 7 quick ones are in the ledger

    def release_when_the_quick_ones_are_recorded() -> None:
        try:
            wait_for(lambda: lines_of(run_dir / "ledger.jsonl") >= 7, ACTORS_BUSY_S, "7 prompts recorded")
        finally:
            server.release()

    t = threading.Thread(target=release_when_the_quick_ones_are_recorded, daemon=True)
    t.start()
    code, stats = run_inprocess(cfg, run_dir)
    t.join()
    assert code == 0 and stats["prompts"]["ok"] == 8
    assert_each_prompt_once(run_dir, 8)
    # The quick prompts ran a terminal command in sandboxes of two actor processes, not the driver.
    owners = {d.name.rsplit("-", 1)[1] for d in (tmp_path / "sandboxes").iterdir() if d.name.startswith("t-")}
    assert len(owners) == 2 and str(os.getpid()) not in owners
    # Streaming: the quick prompts were recorded while the slow one, dispatched first, was still in flight.
    order = [r["index"] for r in read_jsonl(run_dir / "ledger.jsonl")]
    assert order[-1] == 0 and sorted(order) == list(range(8))
    assert stats["tool_statistics"]["terminal"]["success"] == 7


def kill_one_actor_when_busy(server, busy: int, timeout: float = ACTORS_BUSY_S) -> int:
    """SIGKILL one session actor once `busy` model calls wait at the server's hold, then release it; return the
    pid. Held, no call of a prompt in flight can end before the kill, however slow the machine."""
    try:
        pids = wait_for(
            lambda: server.held >= busy and actor_pids(talking_to=server.port), timeout, f"{busy} calls of actors"
        )
        os.kill(pids[0], signal.SIGKILL)
        return pids[0]
    finally:
        server.release()


def run_while_killing(cfg, run_dir: Path, server, busy: int = 6) -> tuple[int, dict, int]:
    """Run in this (main) thread, where the runner sets its signal handlers; kill from another."""
    killed: dict = {}

    def killer() -> None:
        try:
            killed["pid"] = kill_one_actor_when_busy(server, busy=busy)
        except AssertionError as exc:
            killed["error"] = exc

    server.hold()  # every model call waits until the kill
    t = threading.Thread(target=killer, daemon=True)
    t.start()
    code, stats = run_inprocess(cfg, run_dir)
    t.join()  # the run could not end before the killer released the hold
    assert "pid" in killed, killed.get("error")
    return code, stats, killed["pid"]


def test_killed_worker_loses_only_its_prompts_which_are_redispatched(make_cfg, tmp_path, run_dir, server):
    n = 12
    ds = write_jsonl(tmp_path / "d.jsonl", sleepy(n, 1.5))
    cfg = make_cfg(*RAY, "num_workers=6", "executor.sessions_per_worker=2", dataset=ds)
    code, stats, killed = run_while_killing(cfg, run_dir, server)
    assert not psutil.pid_exists(killed) or psutil.Process(killed).status() == psutil.STATUS_ZOMBIE
    assert code == 0, stats["failed_by_error"]
    assert stats["prompts"]["ok"] == n and stats["prompts"]["failed"] == 0
    assert_each_prompt_once(run_dir, n)
    # The killed actor had 2 prompts in flight: each was sent again, and only those.
    first_calls = Counter(r.prompt.split("\n")[0] for r in server.requests if r.turn == 0)
    assert sorted(first_calls.values()) == [1] * (n - 2) + [2, 2]
    # The driver recorded every call as it started, the 2 lost with the actor too (never answered), and
    # charged each answered call once: what the ledger and usage.jsonl hold together is what was spent.
    calls = read_jsonl(run_dir / "usage.jsonl")
    assert sum(c["event"] == "start" for c in calls) == len(server.requests) == stats["model_calls"]["started"]
    assert stats["model_calls"]["unanswered"] == 2 and stats["model_calls"]["answered"] == len(server.requests) - 2
    ends = sum(c["usage"]["total_tokens"] for c in calls if c["event"] == "end")
    assert ends == stats["usage"]["total_tokens"] > 0


def test_lost_prompts_beyond_the_bound_fail_and_resume_retries_them(make_cfg, tmp_path, run_dir, server):
    n = 12
    ds = write_jsonl(tmp_path / "d.jsonl", sleepy(n, 1.5))
    opts = ["num_workers=6", "executor.sessions_per_worker=2", "executor.max_redispatch=0", "executor.max_restarts=0"]
    cfg = make_cfg(*RAY, *opts, dataset=ds)
    code, stats, _ = run_while_killing(cfg, run_dir, server)
    assert code == 1
    assert stats["failed_by_error"] == {"WorkerLost": 2} and stats["prompts"]["ok"] == n - 2
    failed = [r for r in read_jsonl(run_dir / "failures.jsonl")]
    assert len(failed) == 2 and all("max_redispatch=0" in r["error"] for r in failed)
    server.reset()
    code, stats = run_inprocess(make_cfg(*RAY, "num_workers=2", "executor.sessions_per_worker=2", dataset=ds), run_dir)
    assert code == 0 and stats["prompts"]["ok"] == n and stats["prompts"]["failed"] == 0
    assert len(server.requests) == 2  # only the two lost prompts ran again
    assert_each_prompt_once(run_dir, n)


def test_when_no_worker_is_left_the_run_stops(make_cfg, tmp_path, run_dir, server):
    ds = write_jsonl(tmp_path / "d.jsonl", sleepy(6, 1.5))
    cfg = make_cfg(*RAY, "num_workers=2", "executor.sessions_per_worker=2", "executor.max_restarts=0", dataset=ds)
    code, stats, _ = run_while_killing(cfg, run_dir, server, busy=2)
    assert code == 1
    assert stats["failed_by_error"] == {"WorkerLost": 2} and stats["prompts"]["pending"] == 4
    assert len(server.requests) == 2  # nothing else was started once the only actor was gone


def test_run_budget_is_charged_per_call_once(make_cfg, tmp_path, run_dir, server):
    """The driver charges each call of an actor as it ends (not the prompt's usage again when it comes back)."""
    term = {"name": "terminal", "arguments": {"command": "echo hi"}}
    rows = [
        {"prompt": script({"tool_calls": [term], "reasoning": "r", "cost": 0.01},
                          {"content": "done", "reasoning": "r", "cost": 0.01}, text=f"task {i}")}
        for i in range(12)
    ]  # fmt: skip
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    opts = [*RAY, "num_workers=2", "executor.sessions_per_worker=2"]
    code, stats = run_inprocess(make_cfg(*opts, "limits.max_cost_usd=0.1", dataset=ds), run_dir)
    assert code == 3 and stats["stopped_by_budget"].startswith("limits.max_cost_usd=0.1")
    started = {r.prompt for r in server.requests if r.turn == 0}
    # 0.1 buys five prompts of $0.02 (charged twice: fewer); the two in flight when it ran out may finish.
    assert 5 <= len(started) <= 7 and stats["prompts"]["ok"] == len(started)
    code, stats = run_inprocess(make_cfg(*opts, "limits.max_cost_usd=1.0", dataset=ds), run_dir)
    assert code == 0 and stats["prompts"]["ok"] == 12
    assert stats["usage"]["cost_usd"] == pytest.approx(0.24) and stats["stopped_by_budget"] is None


def test_worker_config_error_stops_the_run(make_cfg, tmp_path, run_dir, server, monkeypatch):
    monkeypatch.delenv("HERMES_TEST_NO_SUCH_KEY", raising=False)
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "p"}])
    cfg = make_cfg(*RAY, "model.api_key_env=HERMES_TEST_NO_SUCH_KEY", dataset=ds)
    code, _ = run_inprocess(cfg, run_dir)
    assert code == 2
    assert not server.requests


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_cancels_remote_sessions_and_resume_finishes(server, tmp_path, sig):
    """A CLI run on its own local cluster: Ctrl-C (or SIGTERM, which Ray's init would take over) ends the
    in-flight sessions at once and saves the run; a rerun completes it."""
    n = 4
    hang = {"content": "done", "reasoning": "r", "fail": [{"status": 500, "hang": 60}]}  # first attempt hangs
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": script(hang, text=f"task {i}")} for i in range(n)])
    run_dir = tmp_path / "run"
    args = [
        *base_overrides(server, tmp_path), *RAY, "executor.num_cpus=2", "num_workers=4",
        "executor.sessions_per_worker=2", f"dataset_file={ds}", "run_name=ray_int", f"hydra.run.dir={run_dir}",
    ]  # fmt: skip
    cmd = [sys.executable, str(ROOT / "run.py"), *args]
    env = {**os.environ, "HYDRA_FULL_ERROR": "0"}
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: len(server.requests) >= n, 120, "the sessions to start", gone=exited(proc), interval=0.1)
        assert len(server.requests) == n, "sessions never started"
        sent = time.monotonic()
        proc.send_signal(sig)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = out.decode(errors="replace")
    assert proc.returncode == 130, text[-3000:]
    assert time.monotonic() - sent < 40, "cancellation waited for the sessions to finish"
    assert not (run_dir / "trajectories.jsonl").read_text()
    # The actors closed their sandbox backends (nothing left behind) and are gone with the cluster.
    assert not list((tmp_path / "sandboxes").iterdir())
    # The rerun (in-process, on the module's cluster) finishes exactly the four prompts at their second attempt.
    code, _ = run_inprocess(compose_cfg(args[:-1]), run_dir)
    assert code == 0
    assert len(server.requests) == 2 * n
    assert_each_prompt_once(run_dir, n)


def test_actors_append_their_sessions_spans_to_one_file(make_cfg, tmp_path, run_dir, server):
    """telemetry.otlp_file on Ray: each actor has its own exporter appending to the file; one whole trace a prompt
    (which actors run the prompts is Ray's business: tests/e2e/test_telemetry.py has two writers for sure)."""
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": f"quick {i}"} for i in range(4)])
    out = tmp_path / "spans.jsonl"
    cfg = make_cfg(*RAY, "num_workers=4", "executor.sessions_per_worker=2", f"telemetry.otlp_file={out}", dataset=ds)
    code, stats = run_inprocess(cfg, run_dir)
    assert code == 0 and stats["prompts"]["ok"] == 4
    roots = tree(read_file(out))
    assert len(roots) == 4 and os.getpid() not in {r.resource["process.pid"] for r in roots.values()}  # actors wrote
    for e in read_jsonl(run_dir / "trajectories.jsonl"):
        kids = Counter(op(c) for c in roots[e["metadata"]["prompt_key"]].children)
        assert kids == Counter({"chat": model_turns_of(e), "execute_tool": tool_calls_of(e)}) and kids["chat"] == 2
