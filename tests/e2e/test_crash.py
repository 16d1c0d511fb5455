"""Crash safety through the real CLI: kill -9 mid-run at random points, Ctrl-C, and resume to the end."""

from __future__ import annotations

import json
import os
import random
import signal
import time
from collections import Counter

import pytest

from tests.helpers.crash import cli_args, kill_mid_run, start, terminal_records
from tests.helpers.run import read_jsonl, write_jsonl
from tests.helpers.wait import exited, wait_for

pytestmark = pytest.mark.slow


def test_kill_minus_9_at_random_points_then_resume_exactly_once(server, tmp_path):
    rng = random.Random(1234)
    words = [f"task {i}" for i in range(40)]
    rows = [{"prompt": rng.choice(words[:30]) if i % 4 == 0 else words[i % 40], "id": i % 7} for i in range(60)]
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    run_dir = tmp_path / "run"
    server.latency = 0.03
    args = cli_args(server, tmp_path, ds, run_dir, "num_workers=4", "batch_size=5")
    log = tmp_path / "cli.log"
    # 120 model calls (2 a prompt); each kill after 1-8 of them, at a held call (mid-run by construction).
    kills, _ = kill_mid_run(args, log, server, rng, kills=12, calls=(1, 8))
    assert kills == 12

    entries = read_jsonl(run_dir / "trajectories.jsonl")
    # Every dataset row exactly once, duplicates included (as a multiset) ...
    assert Counter(e["conversations"][1]["value"] for e in entries) == Counter(r["prompt"] for r in rows)
    assert [e["prompt_index"] for e in entries] == list(range(len(rows)))
    # ... one terminal record per prompt in the ledger ...
    terms = terminal_records(run_dir)
    assert len(terms) == len(rows) and set(terms.values()) == {1}
    # ... and no prompt was sent more often than the kills allow (re-runs happen only to in-flight prompts).
    first_calls = Counter(r.prompt for r in server.requests if r.turn == 0)
    per_row = Counter(r["prompt"] for r in rows)
    for prompt, n in first_calls.items():
        assert n <= per_row[prompt] * (1 + kills)
    assert sum(first_calls.values()) <= len(rows) + kills * 4
    stats = json.loads((run_dir / "statistics.json").read_text())
    assert stats["prompts"]["ok"] == len(rows) and stats["prompts"]["failed"] == 0


def test_ctrl_c_stops_gracefully_and_a_rerun_finishes(server, tmp_path):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": f"p{i}"} for i in range(40)])
    run_dir = tmp_path / "run"
    sandboxes = tmp_path / "sandboxes"
    args = cli_args(server, tmp_path, ds, run_dir, "num_workers=4")
    log = tmp_path / "cli.log"
    # 12 model calls answered, then each waits: once the 4 workers wait, 4 to 6 prompts are done, 4 in flight.
    server.hold(after=12)
    proc = start(args, log)
    ledger = run_dir / "ledger.jsonl"

    def four_done_and_waiting() -> bool:
        return ledger.exists() and ledger.read_text().count("\n") >= 4 and server.held > 0

    try:
        wait_for(four_done_and_waiting, 180, "4 prompts done, the next call waiting", gone=exited(proc))
        proc.send_signal(signal.SIGINT)
        assert proc.wait(180) == 130, log.read_text()[-3000:]  # (bounds with room for a loaded machine)
    finally:
        server.release()
    ckpt = json.loads((run_dir / "checkpoint.json").read_text())
    entries = read_jsonl(run_dir / "trajectories.jsonl")
    assert 4 <= len(entries) < 40
    assert sorted(e["prompt_index"] for e in entries) == ckpt["completed_prompts"]
    assert not any(p.iterdir() for p in sandboxes.iterdir()), "sandboxes of cancelled prompts were left behind"
    assert start(args, log).wait(300) == 0
    entries = read_jsonl(run_dir / "trajectories.jsonl")
    assert [e["prompt_index"] for e in entries] == list(range(40))
    assert set(terminal_records(run_dir).values()) == {1}


def test_second_ctrl_c_exits_at_once(server, tmp_path):
    """The graceful stop is held up by a served model that ignores SIGTERM; a second Ctrl-C ends it now."""
    import psutil

    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": f"p{i}"} for i in range(8)])
    run_dir = tmp_path / "run"
    marker = f"marker-{os.getpid()}-{time.time_ns()}"
    serve = (
        f'model.serve.command=[sh,-c,\'trap "" TERM; exec env HR_MARK={marker} {{python}} '
        "-m hermes_runner.testing.scripted_server --port {port} --latency 30']"
    )

    def servers() -> list:
        found = []
        for p in psutil.process_iter():
            try:
                if p.environ().get("HR_MARK") == marker:
                    found.append(p)
            except (psutil.Error, OSError):
                pass
        return found

    log = tmp_path / "cli.log"
    args = cli_args(
        server,
        tmp_path,
        ds,
        run_dir,
        "num_workers=4",
        "model.serve.enabled=true",
        "model.base_url=served",
        "model.serve.stop_timeout_s=15",  # the graceful stop waits this long: "at once" is well below it
        serve,
    )
    proc = start(args, log)
    wait_for(lambda: "model server ready" in log.read_text(), 60, "the model server", gone=exited(proc), interval=0.1)
    assert len(servers()) == 1
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    time.sleep(1.5)  # the graceful path is now waiting for the server to stop (15 s: it cannot be done yet)
    assert proc.poll() is None
    proc.send_signal(signal.SIGINT)
    t0 = time.monotonic()
    assert proc.wait(20) == 130 and time.monotonic() - t0 < 10  # the graceful path had 12 s or more to go
    text = log.read_text()
    assert "second interrupt" in text
    assert not (run_dir / "statistics.json").exists()  # exited at once, before finalizing
    # The server ignores SIGTERM: the guard kills it after model.serve.stop_timeout_s (15 s here).
    wait_for(lambda: not servers(), 25, "the model server to end (it outlived the runner)", interval=0.2)
