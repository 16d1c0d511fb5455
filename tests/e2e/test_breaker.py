"""The circuit breaker through the real CLI against the scripted server's outage (issue 35): the run pauses,
probes, resumes on recovery, and no prompt is lost; a silent session is reported with where it waits."""

from __future__ import annotations

import json
import signal
import socket
import sys
from collections import Counter
from pathlib import Path

from hermes_runner.testing.scripted_server import ScriptedServer

from tests.helpers.run import ROOT, LiveRunner, base_overrides, read_jsonl, script, write_jsonl
from tests.helpers.wait import wait_for

PROMPTS, WORKERS = 16, 4


def cli(server: ScriptedServer, tmp_path: Path, ds: Path, *extra: str) -> list[str]:
    return [sys.executable, str(ROOT / "run.py"), *base_overrides(server, tmp_path), f"dataset_file={ds}",
            "run_name=breaker", f"hydra.run.dir={tmp_path / 'run'}", f"num_workers={WORKERS}", *extra]  # fmt: skip


def seen_prompts(server: ScriptedServer) -> set[str]:
    return {r.prompt for r in server.requests if r.prompt.startswith("task ")}


def test_an_outage_pauses_the_run_which_resumes_on_recovery_and_loses_no_prompt(server, tmp_path) -> None:
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": f"task {i}"} for i in range(PROMPTS)])
    # One prompt's 503 opens it (threshold=1: whatever the order the answers come in, it is open before any
    # prompt has used up its retries); probes every 0.1 s.
    args = cli(server, tmp_path, ds, "model.max_retries=2", "breaker.threshold=1", "breaker.probe_s=0.1")
    server.hold(after=2 * WORKERS)  # a few prompts run, then each of the next ones waits at a call
    with LiveRunner(args) as run:
        run.wait_for(lambda: server.held == WORKERS, 120, "the next prompts waiting at their first call")
        started = seen_prompts(server)  # every place taken by a prompt waiting at the server
        server.outage(503)
        server.release()
        run.wait_for(lambda: "breaker open: " in run.output, 60, "the breaker to open")
        held = "failed while the breaker is open"
        run.wait_for(lambda: run.output.count(held) == WORKERS, 60, "every prompt in flight failed and held")
        run.wait_for(lambda: run.output.count("the probe failed: HTTP 503") >= 3, 60, "three failed probes")
        # Open: no new prompt has started (the prompts that failed hold their places, waiting to run again).
        assert seen_prompts(server) == started
        server.recover()
        run.proc.wait(120)
        out = run.output
    assert run.proc.returncode == 0, out[-4000:]
    assert "breaker closed: provider: a probe call was answered" in out  # (no other call is in flight)
    run_dir = tmp_path / "run"
    ledger = read_jsonl(run_dir / "ledger.jsonl")
    assert Counter(r["key"] for r in ledger) == Counter({r["key"]: 1 for r in ledger}) and len(ledger) == PROMPTS
    assert all(r["status"] == "ok" for r in ledger)
    stats = json.loads((run_dir / "statistics.json").read_text())
    assert stats["prompts"]["ok"] == PROMPTS and stats["prompts"]["failed"] == 0
    # The runs that failed in the outage are attempts of their prompts (failures.jsonl), not failures.
    attempts = read_jsonl(run_dir / "failures.jsonl")
    assert len(attempts) == WORKERS and all("HTTP 503" in a["error"] for a in attempts)
    rerun = {a["key"] for a in attempts}
    assert all(r.get("attempts") == 2 for r in ledger if r["key"] in rerun)


def test_a_silent_session_is_reported_with_the_command_it_waits_on(server, tmp_path) -> None:
    sleeper = {"name": "terminal", "arguments": {"command": "sleep 600"}}
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": script({"tool_calls": [sleeper]}, {"content": "done"})}])
    args = cli(server, tmp_path, ds, "breaker.silent_after_s=1")
    with LiveRunner(args) as run:
        run.wait_for(lambda: "silent for" in run.output, 120, "the silent session's warning")
        line = next(ln for ln in run.output.splitlines() if "silent for" in ln)
        assert "prompt 0 " in line and 'in tool terminal {"command": "sleep 600"}' in line, line
        code, out = run.end(signal.SIGINT)
    assert code == 130, out[-3000:]


def test_an_outage_longer_than_give_up_s_stops_the_run_and_a_rerun_finishes_it(server, tmp_path) -> None:
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": f"task {i}"} for i in range(PROMPTS)])
    args = cli(server, tmp_path, ds, "model.max_retries=1", "breaker.probe_s=0.1", "breaker.give_up_s=1")
    server.outage(503)  # from the start, never recovering in this invocation
    with LiveRunner(args) as run:
        run.proc.wait(120)
        out = run.output
    assert run.proc.returncode == 4, out[-4000:]
    assert "breaker open: 3 prompts met provider errors" in out  # 3: half of 4 workers, but at least 3
    assert "Stopped: the circuit breaker stayed open: provider errors for" in out and "prompts left to run" in out
    run_dir = tmp_path / "run"
    stats = json.loads((run_dir / "statistics.json").read_text())
    # Failed: the prompts held when it gave up, and at most the 2 that may have failed before it opened.
    assert stats["prompts"]["ok"] == 0 and stats["prompts"]["failed"] <= WORKERS + 2
    assert stats["prompts"]["failed"] + stats["prompts"]["pending"] == PROMPTS  # none lost: each to run again
    server.recover()
    with LiveRunner(args) as again:
        again.proc.wait(120)
    assert again.proc.returncode == 0, again.output[-4000:]
    ok = [r["key"] for r in read_jsonl(run_dir / "ledger.jsonl") if r["status"] == "ok"]
    assert len(ok) == len(set(ok)) == PROMPTS


def refuses(port: int) -> bool:
    """Whether a connection to this host's `port` is refused (nothing listens there)."""
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except ConnectionRefusedError:
        return True
    return False


def test_a_server_gone_mid_run_pauses_the_run_until_it_listens_again(server, tmp_path) -> None:
    """Connections refused after the endpoint has answered: an outage the breaker waits out (a refusal before
    any answer is still an endpoint that is not there: the run stops, exit 4)."""
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": f"task {i}"} for i in range(PROMPTS)])
    args = cli(server, tmp_path, ds, "breaker.threshold=1", "breaker.probe_s=0.1")
    server.hold(after=2 * WORKERS)  # a few prompts run, then each of the next ones waits at a call
    with LiveRunner(args) as run:
        run.wait_for(lambda: server.held == WORKERS, 120, "the next prompts waiting at their first call")
        server._loop.call_soon_threadsafe(server._loop.stop)  # the server goes: its listener first, then the rest
        wait_for(lambda: refuses(server.port), 60, "the port to refuse connections")
        server.release()  # (the held calls are answered on their open connections as the server shuts down)
        server._thread.join(60)
        run.wait_for(lambda: "breaker open: " in run.output, 120, "the breaker to open")
        # Down longer than model.refused_retries: the prompts in flight fail (refused) and wait to run again.
        held = "failed while the breaker is open"
        run.wait_for(lambda: run.output.count(held) == WORKERS, 60, "every prompt in flight failed and held")
        run.wait_for(lambda: "the probe failed: connection refused" in run.output, 60, "a refused probe")
        server.start()  # listening again, on the same port
        run.proc.wait(120)
        out = run.output
    assert run.proc.returncode == 0, out[-4000:]
    assert "(the last: connection refused)" in out and "breaker closed: provider" in out
    run_dir = tmp_path / "run"
    ledger = read_jsonl(run_dir / "ledger.jsonl")
    assert sorted(r["index"] for r in ledger) == list(range(PROMPTS)) and all(r["status"] == "ok" for r in ledger)
    stats = json.loads((run_dir / "statistics.json").read_text())
    assert stats["prompts"]["ok"] == PROMPTS and stats["prompts"]["failed"] == 0
    attempts = read_jsonl(run_dir / "failures.jsonl")  # the runs that failed while it was down: attempts
    assert len(attempts) == WORKERS and all("connection refused" in a["error"] for a in attempts)
