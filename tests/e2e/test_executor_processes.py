"""executor.processes=N: sessions in worker processes, the runner the single writer; worker death, budget,
rate limits, Ctrl-C and kill -9 with resume, for real (subprocess workers, the scripted HTTP server)."""

from __future__ import annotations

import json
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

from tests.helpers import crash
from tests.helpers.run import ROOT, base_overrides, compose_cfg, read_jsonl, run_inprocess, script, write_jsonl

pytestmark = pytest.mark.timeout(300)
PROCS = ["executor.processes=2"]


def worker_pids(parent: int | None = None) -> list[int]:
    """The live worker processes (`-m hermes_runner.executors.procworker`) of `parent` (default: this process)."""
    me = psutil.Process(parent or os.getpid())
    out = []
    for p in me.children(recursive=True):
        try:
            if "hermes_runner.executors.procworker" in p.cmdline() and p.status() != psutil.STATUS_ZOMBIE:
                out.append(p.pid)
        except psutil.Error:
            continue
    return out


def sleepy(n: int, seconds: float) -> list[dict]:
    step = {"content": "done", "reasoning": "thinking", "sleep": seconds}
    return [{"prompt": script(step, text=f"task {i}")} for i in range(n)]


def terminal_records(run_dir: Path) -> Counter:
    return Counter(r["key"] for r in read_jsonl(run_dir / "ledger.jsonl") if r["status"] in ("ok", "discarded"))


def assert_each_prompt_once(run_dir: Path, n: int) -> None:
    rows = read_jsonl(run_dir / "trajectories.jsonl")
    assert [r["prompt_index"] for r in rows] == list(range(n))
    terminal = terminal_records(run_dir)
    assert len(terminal) == n and set(terminal.values()) == {1}
    batch_rows = [json.loads(line) for b in run_dir.glob("batch_*.jsonl") for line in b.read_text().splitlines()]
    assert sorted(r["prompt_index"] for r in batch_rows) == list(range(n))


def test_sessions_run_in_worker_processes_and_stream_back(make_cfg, tmp_path, run_dir, server):
    slow = {"content": "slow one", "reasoning": "r", "sleep": 4}
    rows = [{"prompt": script(slow, text="slow task")}] + [{"prompt": f"quick {i}"} for i in range(7)]
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    cfg = make_cfg(*PROCS, "num_workers=4", "sandbox.keep=true", dataset=ds)
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
