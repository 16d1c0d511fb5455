"""The one redispatch loop (executors/base.Dispatcher): a prompt lost with its slot is sent again, then failed."""

from __future__ import annotations

import asyncio

from hermes_runner.agent.session import Failure
from hermes_runner.executors.base import WORKER_LOST, Dispatcher, Slot
from hermes_runner.executors.local import LocalExecutor

from tests.helpers.inprocess import prompt


class Lost(Exception):
    pass


class Flaky(Dispatcher, LocalExecutor):
    """Slots that lose the first `losses` prompts sent to them (each loss kills the slot it happened in)."""

    noun, lost_errors = "test slot", (Lost,)

    def __init__(self, slots: int, losses: int, max_redispatch: int):
        super().__init__(4)
        self.slots = [Slot(i, "ready") for i in range(slots)]
        self.losses, self.max_redispatch, self.sent = losses, max_redispatch, []
        self._changed = asyncio.Condition()

    def _cap(self) -> int:
        return 2

    async def _send(self, slot: Slot, p, started: float):
        self.sent.append(slot.number)
        if self.losses > 0:
            self.losses -= 1
            slot.state = "dead"
            raise Lost(f"slot {slot.number} died")
        return f"done in {slot.number}"


def test_a_lost_prompt_goes_to_another_slot():
    ex = Flaky(slots=3, losses=2, max_redispatch=2)
    assert asyncio.run(ex.work(prompt())) == "done in 2" and ex.sent == [0, 1, 2]
    assert [s.load for s in ex.slots] == [0, 0, 0]  # every place given back


def test_a_prompt_lost_too_often_fails_and_a_run_without_slots_stops():
    ex = Flaky(slots=3, losses=3, max_redispatch=1)
    out = asyncio.run(ex.work(prompt()))
    assert isinstance(out, Failure) and out.error_type == WORKER_LOST and ex.sent == [0, 1]
    assert out.error == "slot 1 died; lost with its test slot 2 times (executor.max_redispatch=1)"
    ex.slots[2].state = "dead"
    out = asyncio.run(ex.work(prompt()))
    assert out.error == "no test slot is left" and ex._stopping  # no new prompt starts
