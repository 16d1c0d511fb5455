"""util/stacks: the asyncio part of the SIGUSR1 report (the signal itself: tests/e2e/test_cli_app.py)."""

from __future__ import annotations

import asyncio

from hermes_runner.util.stacks import await_chain, task_report


async def _inner(ev: asyncio.Event) -> None:
    await ev.wait()


async def _outer(ev: asyncio.Event) -> None:
    await _inner(ev)


def test_tasks_are_grouped_by_their_chain_of_awaits():
    async def go() -> tuple[str, list[str]]:
        ev = asyncio.Event()
        waiting = [asyncio.create_task(_outer(ev)) for _ in range(5)]
        other = asyncio.create_task(asyncio.sleep(30))
        await asyncio.sleep(0)  # each has run up to its first wait
        chain = await_chain(waiting[0].get_coro())
        report = task_report(asyncio.get_running_loop())
        ev.set()
        other.cancel()
        await asyncio.gather(*waiting, other, return_exceptions=True)
        return report, chain

    report, chain = asyncio.run(go())
    assert [line.rsplit(" in ", 1)[1] for line in chain] == ["_outer", "_inner", "wait"]
    assert report.startswith("asyncio tasks: 7\n")  # the 5, the sleep, and go() itself
    first = report.split("\n", 1)[1]
    assert first.startswith("5 task(s) waiting at:\n  ") and "in _outer\n  " in first and "in _inner\n" in first
    assert "1 task(s) waiting at:" in report and " in sleep" in report
