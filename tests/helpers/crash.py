"""The kill -9 loop of the crash tests: start the CLI in the background, kill it at random points, resume."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from tests.helpers.run import ROOT, base_overrides, read_jsonl, script


def start(args: list[str], log: Path) -> subprocess.Popen:
    """`python run.py ...` in the background, its output appended to `log`."""
    return subprocess.Popen(
        [sys.executable, str(ROOT / "run.py"), *args],
        cwd=ROOT,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "HYDRA_FULL_ERROR": "1"},
    )


def cli_args(server, tmp_path: Path, ds: Path, run_dir: Path, *extra: str) -> list[str]:
    return [
        *base_overrides(server, tmp_path),
        f"dataset_file={ds}",
        "run_name=crash",
        f"hydra.run.dir={run_dir}",
        *extra,
    ]


def kill_until_done(args: list[str], log: Path, rng: random.Random, max_kills: int) -> int:
    """Run the CLI, SIGKILL it 1-3 s in, up to `max_kills` times, then let it finish; return the kills that landed."""
    kills = 0
    for _ in range(30):
        proc = start(args, log)
        if kills < max_kills:
            time.sleep(rng.uniform(1.0, 3.0))
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                kills += 1
                continue
        assert proc.wait(120) == 0, log.read_text()[-3000:]
        return kills
    raise AssertionError(f"the run did not finish after {kills} kills: {log.read_text()[-3000:]}")


def terminal_records(run_dir: Path) -> Counter:
    return Counter(r["key"] for r in read_jsonl(run_dir / "ledger.jsonl") if r["status"] in ("ok", "discarded"))


def assert_each_prompt_once(run_dir: Path, n: int) -> None:
    """Prompts 0..n-1 each have one terminal ledger record, one trajectory and one batch line."""
    rows = read_jsonl(run_dir / "trajectories.jsonl")
    assert [r["prompt_index"] for r in rows] == list(range(n))
    terminal = terminal_records(run_dir)
    assert len(terminal) == n and set(terminal.values()) == {1}
    batch_rows = [json.loads(line) for b in run_dir.glob("batch_*.jsonl") for line in b.read_text().splitlines()]
    assert sorted(r["prompt_index"] for r in batch_rows) == list(range(n))


def sleepy(n: int, seconds: float) -> list[dict]:
    """n prompts whose one model call takes `seconds`: in flight long enough to be killed or cancelled."""
    step = {"content": "done", "reasoning": "thinking", "sleep": seconds}
    return [{"prompt": script(step, text=f"task {i}")} for i in range(n)]


def kill_mid_calls(
    args: list[str], log: Path, server, rng: random.Random, kills: int, calls: tuple[int, int]
) -> tuple[int, int]:
    """Like `kill_until_done`, but each SIGKILL lands after the run made a random number (in `calls`) of model
    calls, so it always hits prompts in flight, whatever the CLI's start-up time; return the kills that landed
    and the model calls the server was still answering at those kills."""
    landed = in_flight = 0
    for _ in range(kills + 1):
        proc, seen = start(args, log), len(server.requests)
        if landed < kills:
            target = seen + rng.randint(*calls)
            while proc.poll() is None and len(server.requests) < target:
                time.sleep(0.01)
            if proc.poll() is None:
                in_flight += server.in_flight
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                landed += 1
                continue
        assert proc.wait(120) == 0, log.read_text()[-3000:]
        return landed, in_flight
    raise AssertionError(f"the run did not finish after {landed} kills: {log.read_text()[-3000:]}")
