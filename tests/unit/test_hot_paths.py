"""The paths made cheaper for throughput keep their meaning: executor, ledger reads, prompt keys, spawning."""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from concurrent.futures import ThreadPoolExecutor

import psutil
import pytest

from hermes_runner.dataset import canonical_digest, read_prompts
from hermes_runner.executors.local import LocalExecutor
from hermes_runner.rundir.stats import RunStats
from hermes_runner.rundir.store import RunStore, dumps_line
from hermes_runner.sandbox.local import spawn
from hermes_runner.util import fastjson

from tests.helpers.wait import wait_for


def test_executor_keeps_its_limit_and_yields_every_result():
    async def go() -> tuple[list[int], int, int]:
        ex = LocalExecutor(3)
        running, peak, after_raise = 0, 0, 0

        async def work(i: int) -> int:
            nonlocal running, peak, after_raise
            running += 1
            peak = max(peak, running)
            if i >= 30:
                after_raise = max(after_raise, running)
            await asyncio.sleep(random.uniform(0, 0.005))
            running -= 1
            return i

        out = []
        async for r in ex.map_unordered(work, iter(range(60))):
            out.append(r)
            if r == 20:
                ex.set_limit(8)
        return out, peak, after_raise

    out, peak, after_raise = asyncio.run(go())
    assert sorted(out) == list(range(60)) and peak <= 8 and after_raise > 3


def test_executor_stop_starts_nothing_new_and_cancel_drops_in_flight():
    async def go(cancel: bool) -> list[int]:
        ex = LocalExecutor(4)

        async def work(i: int) -> int:
            await asyncio.sleep(0.001 if i == 0 else 0.05)
            return i

        out = []
        async for r in ex.map_unordered(work, iter(range(100))):
            out.append(r)
            ex.cancel() if cancel else ex.stop()
        return out

    assert sorted(asyncio.run(go(cancel=False))) == [0, 1, 2, 3]  # the three in flight finish
    assert asyncio.run(go(cancel=True)) == [0]


def test_prompt_keys_do_not_depend_on_the_json_parser(tmp_path):
    line = '{"prompt": "p", "id": 1180591620717411303424, "score": 0.1}'
    (tmp_path / "d.jsonl").write_text(line + "\n")
    (p,) = read_prompts(tmp_path / "d.jsonl")
    assert p.key == f"{canonical_digest(json.loads(line))}-0"
    assert p.fields == {"id": 2**70, "score": 0.1}


def test_ledger_records_the_fast_parser_refuses_still_load(tmp_path):
    store = RunStore(tmp_path)
    store.write_failure({"key": "k1", "index": 0, "usage": {"cost_usd": float("nan")}, "batch": 0}, {})
    store.close()
    assert b"NaN" in (tmp_path / "ledger.jsonl").read_bytes()
    stats = RunStats()
    state = RunStore(tmp_path).load(on_record=stats.add)
    assert list(state.failed) == ["k1"] and state.records == 1


def test_fast_json_round_trips_what_the_stdlib_writes():
    obj = {"s": "ünï\u2028\x00", "big": 2**70, "f": 1e-7, "nested": [{"a": None, "b": True}]}
    assert fastjson.loads(dumps_line(obj)) == obj
    assert fastjson.loads(b'{"x": NaN}')["x"] != fastjson.loads(b'{"x": NaN}')["x"]  # NaN, via the stdlib


def _run(argv: list[str], timeout: float = 10, limit: int = 10_000, check=None):
    async def go():
        with ThreadPoolExecutor(2) as pool:
            return await spawn.run_command(argv, env=dict(os.environ), cwd=None, timeout=timeout, limit=limit,
                                           executor=pool, check=check)  # fmt: skip

    return asyncio.run(go())


@pytest.mark.parametrize("pidfd", [True, False])
def test_commands_behave_the_same_with_and_without_pidfd(monkeypatch, pidfd):
    monkeypatch.setattr(spawn, "PIDFD", pidfd and spawn.PIDFD)
    assert _run(["bash", "-c", "echo out; echo err >&2; exit 3"]) == (3, "out\nerr\n", False)
    t0 = time.monotonic()
    code, out, timed_out = _run(["bash", "-c", "echo started; (sleep 30; echo late) & sleep 30"], timeout=0.5)
    assert (code, out, timed_out) == (124, "started\n", True) and time.monotonic() - t0 < 5
    code, out, _ = _run(["bash", "-c", "seq 1 100000"], limit=100)
    assert code == 0 and out.startswith("1\n2\n") and out.rstrip().endswith("100000") and "truncated" in out

    def refuse() -> None:
        raise ValueError("checked first")

    with pytest.raises(ValueError, match="checked first"):
        _run(["true"], check=refuse)


def marked(marker: str) -> list[int]:
    """Pids of the processes whose command line holds `marker`."""
    return [p.pid for p in psutil.process_iter(["cmdline"]) if marker in " ".join(p.info["cmdline"] or [])]


def test_a_cancelled_command_is_killed_and_reaped():
    marker = f"hrspawn{os.getpid()}{time.time_ns() % 100000}"
    fds = len(os.listdir("/proc/self/fd"))

    async def go() -> None:
        with ThreadPoolExecutor(2) as pool:
            task = asyncio.ensure_future(
                spawn.run_command(
                    ["bash", "-c", f"exec -a {marker} sleep 60"],
                    env=dict(os.environ),
                    cwd=None,
                    timeout=60,
                    limit=1000,
                    executor=pool,
                )  # fmt: skip
            )
            await asyncio.to_thread(wait_for, lambda: marked(marker), 30, "the command to start")
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

    def left() -> dict:
        """What the command may have left: its process, zombies, file descriptors beyond those of the start."""
        zombies = [c.pid for c in psutil.Process().children() if c.status() == psutil.STATUS_ZOMBIE]
        return {"running": marked(marker), "zombies": zombies, "fds": max(0, len(os.listdir("/proc/self/fd")) - fds)}

    asyncio.run(go())
    wait_for(lambda: not any(left().values()), 10, "the command to be killed and reaped", state=left)
