"""The kill -9 loop of the crash tests: start the CLI in the background, kill it mid-run, resume."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import psutil

from hermes_runner.rundir.layout import INVOCATIONS
from hermes_runner.testing.scripted_server import ScriptedServer

from tests.helpers.run import ROOT, base_overrides, read_jsonl, script
from tests.helpers.wait import exited, wait_for


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


def kill_mid_run(
    args: list[str], log: Path, server: ScriptedServer, rng: random.Random, kills: int, calls: tuple[int, int]
) -> tuple[int, int]:
    """Run the CLI, SIGKILL it mid-run `kills` times, then let it finish; return the kills that landed (all of them,
    or it fails) and the model calls the server was still answering at those kills.

    Before each start the server lets a random number (in `calls`) of model calls through and holds the next one:
    the kill lands while the runner waits on that reply, which it cannot get, so it is mid-run by construction,
    whatever the machine's speed. The run must need more than `kills * (calls[1] + 1)` model calls (each life
    answers at most `calls[1]` of them), or a life could end before a call is held.

    The life must also have recorded its invocation (it started its run): a loaded server may take in a call the
    killed life sent only after the next life started, and that call, held, proves nothing of the new life."""
    invocations = Path(next(a for a in args if a.startswith("hydra.run.dir=")).split("=", 1)[1]) / INVOCATIONS
    landed = in_flight = 0
    for i in range(kills):
        before = recorded(invocations)
        server.hold(after=rng.randint(*calls))
        proc = start(args, log)
        try:
            wait_for(
                lambda before=before: server.held and recorded(invocations) > before,
                120,
                f"kill {i + 1} of {kills}: the runner started and waiting on a held model call",
                state=lambda: f"{len(server.requests)} requests seen, {server.held} held, {server.in_flight} in flight",
                gone=exited(proc),
            )
            in_flight += server.in_flight
            left = psutil.Process(proc.pid).children(recursive=True)  # worker processes, sandboxed commands
            proc.send_signal(signal.SIGKILL)
            assert proc.wait(60) == -signal.SIGKILL, "the runner ended before the kill"
            landed += 1
            server.release()
            # The next life starts once this one is wholly gone: no orphan of it makes a model call then.
            wait_for(
                lambda left=left: not any(map(alive, left)), 60, f"the killed runner's processes ({i + 1}) to leave"
            )
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the runner printed:\n{log.read_text()[-3000:]}") from None
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            server.release()
    assert start(args, log).wait(120) == 0, log.read_text()[-3000:]
    return landed, in_flight


def recorded(invocations: Path) -> int:
    """Invocations recorded in the run dir (each appends its line, fsynced, as its run starts)."""
    return len(invocations.read_bytes().splitlines()) if invocations.exists() else 0


def alive(p: psutil.Process) -> bool:
    try:
        return p.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


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
