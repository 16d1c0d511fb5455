"""executor.processes=N: sessions in worker processes, the runner the single writer; worker death, budget,
rate limits, Ctrl-C and kill -9 with resume, for real (subprocess workers, the scripted HTTP server)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import psutil
import pytest

from hermes_runner.sandbox.docker import orphans as docker_orphans

from tests.helpers import crash
from tests.helpers.crash import assert_each_prompt_once, sleepy
from tests.helpers.machine import require
from tests.helpers.run import ROOT, base_overrides, compose_cfg, read_jsonl, run_inprocess, script, write_jsonl
from tests.helpers.wait import exited, wait_for

pytestmark = pytest.mark.timeout(300)
PROCS = ["executor.processes=2"]


def worker_pids(parent: int | None = None) -> list[int]:
    """The live worker processes (`-m hermes_runner.executors.procworker`) of `parent` (default: this process).

    Only direct children: a worker's own child caught between fork and exec has the worker's command line."""
    me = psutil.Process(parent or os.getpid())
    out = []
    for p in me.children(recursive=False):
        try:
            if "hermes_runner.executors.procworker" in p.cmdline() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p.pid)
        except psutil.Error:
            continue
    return out


def test_sessions_run_in_worker_processes_and_stream_back(make_cfg, tmp_path, run_dir, server, caplog):
    slow = {"content": "slow one", "reasoning": "r", "sleep": 4}
    rows = [{"prompt": script(slow, text="slow task")}] + [{"prompt": f"quick {i}"} for i in range(7)]
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    cfg = make_cfg(*PROCS, "num_workers=4", "sandbox.keep=true", "sandbox.local.isolation=none", dataset=ds)
    code, stats = run_inprocess(cfg, run_dir)
    assert code == 0 and stats["prompts"]["ok"] == 8
    assert_each_prompt_once(run_dir, 8)
    # The quick prompts ran a terminal command in sandboxes of two worker processes, not the runner.
    owners = {d.name.rsplit("-", 1)[1] for d in (tmp_path / "sandboxes").iterdir() if d.name.startswith("t-")}
    assert len(owners) == 2 and str(os.getpid()) not in owners
    # Streaming: the slow prompt, dispatched first, was recorded after all the quick ones.
    order = [r["index"] for r in read_jsonl(run_dir / "ledger.jsonl")]
    assert order[-1] == 0 and sorted(order) == list(range(8))
    assert stats["tool_statistics"]["terminal"]["success"] == 7
    # Every model call was recorded by the runner as it happened (usage.jsonl), under its prompt's key.
    calls = read_jsonl(run_dir / "usage.jsonl")
    keys = {r["key"] for r in read_jsonl(run_dir / "ledger.jsonl")}
    ends = [c for c in calls if c["event"] == "end"]
    assert len(ends) == 15 and {c["key"] for c in ends} == keys
    assert not worker_pids()  # all stopped
    # The workers' log records went through the runner's logging (its console, run.log).
    unconfined = [r.getMessage() for r in caplog.records if "commands run unconfined" in r.getMessage()]
    assert sorted(m.split("]")[0] for m in unconfined) == ["[worker 0", "[worker 1"]


def kill_one_worker_when_busy(server, busy: int, timeout: float = 60) -> int:
    """SIGKILL one worker process once `busy` model calls wait at the server's hold, then release it; return the
    pid. Held, no call of a prompt in flight can end before the kill, however slow the machine."""
    try:
        pids = wait_for(lambda: server.held >= busy and worker_pids(), timeout, f"{busy} calls of worker processes")
        os.kill(pids[0], signal.SIGKILL)
        return pids[0]
    finally:
        server.release()


def run_while_killing(cfg, run_dir: Path, server, busy: int = 6) -> tuple[int, dict, int, set[int]]:
    """Run in this (main) thread, where the runner sets its signal handlers; kill from another.
    Returns the exit code, statistics, the killed pid and every worker pid seen after the kill."""
    killed: dict = {}
    seen: set[int] = set()

    def killer() -> None:
        try:
            killed["pid"] = kill_one_worker_when_busy(server, busy=busy)
            while not killed.get("stop"):
                seen.update(worker_pids())
                time.sleep(0.05)
        except AssertionError as exc:
            killed["error"] = exc

    server.hold()  # every model call waits until the kill
    t = threading.Thread(target=killer, daemon=True)
    t.start()
    code, stats = run_inprocess(cfg, run_dir)
    killed["stop"] = True
    t.join(60)
    assert "pid" in killed, killed.get("error")
    return code, stats, killed["pid"], seen - {killed["pid"]}


def test_killed_worker_loses_only_its_prompts_which_are_sent_again_and_it_is_replaced(
    make_cfg, tmp_path, run_dir, server
):
    n = 12
    ds = write_jsonl(tmp_path / "d.jsonl", sleepy(n, 1.5))
    cfg = make_cfg(*PROCS, "num_workers=6", dataset=ds)
    code, stats, killed, after = run_while_killing(cfg, run_dir, server)
    assert not psutil.pid_exists(killed) or psutil.Process(killed).status() == psutil.STATUS_ZOMBIE
    assert code == 0, stats["failed_by_error"]
    assert stats["prompts"]["ok"] == n and stats["prompts"]["failed"] == 0
    assert_each_prompt_once(run_dir, n)
    # The killed worker had 3 prompts in flight: each was sent again, and only those.
    first_calls = Counter(r.prompt.split("\n")[0] for r in server.requests if r.turn == 0)
    assert sorted(first_calls.values()) == [1] * (n - 3) + [2, 2, 2]
    assert len(after) == 2  # the other worker and the one that replaced the killed one
    # The lost calls were recorded by the runner (the spend of a lost attempt counts).
    errors = [c for c in read_jsonl(run_dir / "usage.jsonl") if c["event"] == "error"]
    assert len(errors) == 3 and {c["error"] for c in errors} == {"WorkerLost"}


def test_lost_prompts_beyond_the_bound_fail_and_resume_retries_them(make_cfg, tmp_path, run_dir, server):
    n = 12
    ds = write_jsonl(tmp_path / "d.jsonl", sleepy(n, 1.5))
    opts = ["num_workers=6", "executor.max_redispatch=0", "executor.max_restarts=0"]
    code, stats, _, _ = run_while_killing(make_cfg(*PROCS, *opts, dataset=ds), run_dir, server)
    assert code == 1
    assert stats["failed_by_error"] == {"WorkerLost": 3} and stats["prompts"]["ok"] == n - 3
    failed = read_jsonl(run_dir / "failures.jsonl")
    assert len(failed) == 3 and all("max_redispatch=0" in r["error"] for r in failed)
    server.reset()
    code, stats = run_inprocess(make_cfg(*PROCS, "num_workers=2", dataset=ds), run_dir)
    assert code == 0 and stats["prompts"]["ok"] == n and stats["prompts"]["failed"] == 0
    assert len(server.requests) == 3  # only the three lost prompts ran again
    assert_each_prompt_once(run_dir, n)


def test_when_no_worker_is_left_the_run_stops(make_cfg, tmp_path, run_dir, server):
    ds = write_jsonl(tmp_path / "d.jsonl", sleepy(6, 1.5))
    cfg = make_cfg(*PROCS, "num_workers=2", "executor.max_restarts=0", dataset=ds)  # both die, neither replaced
    killed: list[int] = []

    def killer() -> None:
        try:
            pids = wait_for(lambda: server.held >= 2 and len(worker_pids()) == 2 and worker_pids(), 60, "2 calls")
            for pid in pids:
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
        finally:
            server.release()

    server.hold()  # every model call waits until both workers are killed: none can end and start another
    t = threading.Thread(target=killer, daemon=True)
    t.start()
    code, stats = run_inprocess(cfg, run_dir)
    t.join(60)
    assert len(killed) == 2
    assert code == 1
    assert stats["failed_by_error"] == {"WorkerLost": 2} and stats["prompts"]["pending"] == 4
    assert len(server.requests) == 2  # nothing else was started once no worker was left


def test_worker_config_error_stops_the_run(make_cfg, tmp_path, run_dir, server):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "p"}])
    # The runner's own check passes (the root exists); each worker's sandbox backend refuses a file as its root.
    (tmp_path / "afile").write_text("")
    cfg = make_cfg(*PROCS, f"sandbox.local.root={tmp_path / 'afile'}", dataset=ds)
    code, _ = run_inprocess(cfg, run_dir)
    assert code == 2
    assert not server.requests
    assert not worker_pids()


def test_run_budget_stops_dispatch_across_processes(make_cfg, tmp_path, run_dir, server):
    term = {"name": "terminal", "arguments": {"command": "echo hi"}}
    rows = [
        {"prompt": script({"tool_calls": [term], "reasoning": "r", "cost": 0.01},
                          {"content": "done", "reasoning": "r", "cost": 0.01}, text=f"task {i}")}
        for i in range(20)
    ]  # fmt: skip
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    code, stats = run_inprocess(make_cfg(*PROCS, "num_workers=2", "limits.max_cost_usd=0.1", dataset=ds), run_dir)
    assert code == 3 and stats["stopped_by_budget"].startswith("limits.max_cost_usd=0.1")
    started = {r.prompt for r in server.requests if r.turn == 0}
    # 0.1 buys five prompts of $0.02; the two in flight when it ran out may finish, nothing else starts.
    assert 5 <= len(started) <= 7 and stats["prompts"]["ok"] == len(started)
    assert stats["usage"]["cost_usd"] <= 0.1 + 2 * 0.02 + 1e-9
    code, stats = run_inprocess(make_cfg(*PROCS, "num_workers=2", "limits.max_cost_usd=1.0", dataset=ds), run_dir)
    assert code == 0 and stats["prompts"]["ok"] == 20
    assert stats["usage"]["cost_usd"] == pytest.approx(0.4) and stats["stopped_by_budget"] is None


def test_rate_limit_is_the_runners_across_processes(make_cfg, tmp_path, run_dir, server):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": f"p{i}"} for i in range(8)])
    opts = ["num_workers=8", "model.rate_limit.requests_per_minute=180"]
    code, _ = run_inprocess(make_cfg(*PROCS, *opts, dataset=ds), run_dir)
    assert code == 0
    times = sorted(r.at for r in server.requests)
    assert len(times) == 16
    # One limiter for both processes: 180/min = 3/s with a one-second burst, as in one process.
    assert max(sum(1 for t in times if s <= t < s + 2.0) for s in times) <= 10
    assert (len(times) - 3) / (times[-1] - times[0]) <= 3.3


def test_a_429_in_one_process_backs_off_the_other(make_cfg, tmp_path, run_dir, server):
    step = {"fail": [{"status": 429, "retry_after": 1}], "content": "ok", "reasoning": "r"}
    rows = [{"prompt": script(step, text=f"storm {i}") if i < 2 else f"calm {i}"} for i in range(16)]
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    server.latency = 0.05
    code, stats = run_inprocess(make_cfg(*PROCS, "num_workers=8", dataset=ds), run_dir)
    assert code == 0 and stats["prompts"]["ok"] == 16
    first_429 = min(r.at for r in server.requests if "#script" in r.prompt)
    assert not [r for r in server.requests if first_429 + 0.1 < r.at < first_429 + 0.95]
    inv = stats["invocation"]
    assert inv["retries"] == 2 and inv["rate_limited"] == 2 and inv["backoff_seconds"] >= 0.9


def cli(server, tmp_path: Path, ds: Path, run_dir: Path, *extra: str) -> list[str]:
    return [*base_overrides(server, tmp_path), *PROCS, f"dataset_file={ds}", "run_name=procs",
            f"hydra.run.dir={run_dir}", *extra]  # fmt: skip


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_cancels_the_workers_sessions_and_resume_finishes(server, tmp_path, sig):
    n = 4
    hang = {"content": "done", "reasoning": "r", "fail": [{"status": 500, "hang": 60}]}  # first attempt hangs
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": script(hang, text=f"task {i}")} for i in range(n)])
    run_dir = tmp_path / "run"
    args = cli(server, tmp_path, ds, run_dir, "num_workers=4")
    env = {**os.environ, "HYDRA_FULL_ERROR": "0"}
    cmd = [sys.executable, str(ROOT / "run.py"), *args]
    # Its own process group, as a shell gives a job: Ctrl-C is sent to the whole group.
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)  # fmt: skip
    try:
        wait_for(lambda: len(server.requests) >= n, 120, "the sessions to start", gone=exited(proc), interval=0.1)
        assert len(server.requests) == n, "sessions never started"
        workers = worker_pids(proc.pid)
        assert len(workers) == 2
        sent = time.monotonic()
        os.killpg(proc.pid, sig)
        out, _ = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    text = out.decode(errors="replace")
    assert proc.returncode == 130, text[-3000:]
    assert time.monotonic() - sent < 30, "cancellation waited for the sessions to finish"
    assert not any(psutil.pid_exists(p) and psutil.Process(p).status() != psutil.STATUS_ZOMBIE for p in workers)
    assert not (run_dir / "trajectories.jsonl").read_text()
    assert not list((tmp_path / "sandboxes").iterdir())  # the workers closed their sandbox backends
    # The rerun finishes exactly the four prompts, at their second attempt.
    code, stats = run_inprocess(compose_cfg(args), run_dir)
    assert code == 0 and stats["prompts"]["ok"] == n
    assert_each_prompt_once(run_dir, n)


def test_kill_9_of_the_runner_then_resume_finishes_each_prompt_once(server, tmp_path):
    n = 30
    server.latency = 0.1
    term = {"name": "terminal", "arguments": {"command": "echo hi"}}
    rows = [{"prompt": script({"tool_calls": [term], "reasoning": "r"}, {"content": "done", "reasoning": "r"},
                              text=f"task {i}")} for i in range(n)]  # fmt: skip
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    run_dir = tmp_path / "run"
    args = cli(server, tmp_path, ds, run_dir, "num_workers=4", "batch_size=5")
    # 60 model calls (2 a prompt); each kill after 4-20 of them, at a held call (mid-run by construction).
    kills, _ = crash.kill_mid_run(args, tmp_path / "log.txt", server, random.Random(23), kills=2, calls=(4, 20))
    assert kills == 2
    assert_each_prompt_once(run_dir, n)
    # The killed runners' workers saw their socket close and left, cleaning up their sandboxes.
    wait_for(lambda: not _orphan_workers(), 30, "the orphan workers to leave", state=_orphan_workers, interval=0.2)


def _orphan_workers() -> list[int]:
    out = []
    for p in psutil.process_iter(["pid", "cmdline", "ppid"]):
        cmd = p.info["cmdline"] or []
        if "hermes_runner.executors.procworker" in cmd and p.info["ppid"] == 1:
            out.append(p.info["pid"])
    return out


def test_docker_sandboxes_in_worker_processes(make_cfg, tmp_path, run_dir, server):
    """Each worker opens its own Docker backend; the commands ran in containers, none is left at the end."""
    import docker

    require("docker")
    client = docker.from_env(timeout=60)
    term = {"name": "terminal", "arguments": {"command": "echo from-$(hostname)"}}
    rows = [{"prompt": script({"tool_calls": [term], "reasoning": "r"}, {"content": "done", "reasoning": "r"},
                              text=f"task {i}")} for i in range(6)]  # fmt: skip
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    opts = ["sandbox=docker", "sandbox.image=local/busybox:ci", "distribution=terminal_only", "num_workers=4"]
    code, stats = run_inprocess(make_cfg(*PROCS, *opts, dataset=ds), run_dir)
    assert code == 0 and stats["prompts"]["ok"] == 6, stats["failed_by_error"]
    assert stats["tool_statistics"]["terminal"]["success"] == 6
    tool_turns = [m["value"] for e in read_jsonl(run_dir / "trajectories.jsonl") for m in e["conversations"]
                  if m["from"] == "tool"]  # fmt: skip
    assert len(tool_turns) == 6 and all("from-" in t for t in tool_turns)
    label = f"{docker_orphans.RUN_DIR}={Path(run_dir).resolve()}"
    assert not client.api.containers(all=True, filters={"label": label})
    client.close()


def test_the_response_cache_serves_every_worker(make_cfg, tmp_path, server):
    """Each worker opens the shared cache: a rerun into a new dir with two processes pays no call."""
    term = {"name": "terminal", "arguments": {"command": "echo same"}}
    rows = [{"prompt": script({"tool_calls": [term], "reasoning": "r"}, {"content": "done", "reasoning": "r"},
                              text=f"task {i}")} for i in range(6)]  # fmt: skip
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    cache = ["cache=readwrite", f"cache.dir={tmp_path / 'cache'}", "distribution=terminal_only", "num_workers=4"]
    code, first = run_inprocess(make_cfg(*PROCS, *cache, dataset=ds), tmp_path / "one")
    assert code == 0 and len(server.requests) == 12 and first["cache"]["hits"] == 0
    code, again = run_inprocess(make_cfg(*PROCS, *cache, dataset=ds), tmp_path / "two")
    assert code == 0 and len(server.requests) == 12  # not one call more
    assert again["prompts"]["ok"] == 6 and again["cache"]["hits"] == 12 and again["api_calls"] == 0


def test_a_worker_answers_sigusr1_with_where_it_waits_and_goes_on(server, tmp_path):
    from tests.helpers.run import LiveRunner

    server.latency = 1.5
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": f"p{i}"} for i in range(4)])
    run_dir = tmp_path / "run"
    args = cli(server, tmp_path, ds, run_dir, "num_workers=4", "distribution=terminal_only")
    with LiveRunner([sys.executable, str(ROOT / "run.py"), *args], {**os.environ, "HYDRA_FULL_ERROR": "0"}) as runner:
        runner.wait_for(lambda: len(server.requests) >= 4, 120, "four model calls in flight")
        workers = worker_pids(runner.proc.pid)
        assert len(workers) == 2
        os.kill(workers[0], signal.SIGUSR1)
        runner.wait_for(lambda: "in _complete" in runner.output, 10, "the worker's task report")
        assert runner.proc.wait(timeout=60) == 0, runner.output
    report = runner.output.split("asyncio tasks: ", 1)[1]
    assert report.startswith(("2\n", "3\n", "4\n")), report  # its two sessions (and its link to the runner)
    assert "procworker.py" in runner.output  # faulthandler's stacks of the worker's threads
    assert len(read_jsonl(run_dir / "trajectories.jsonl")) == 4
