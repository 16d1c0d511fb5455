"""The circuit breaker's state machine (a fake clock), the guard around each prompt, the silent-session watch."""

from __future__ import annotations

import asyncio
import functools
import logging

import httpx2
import openai

from hermes_runner.agent.loop import SessionResult
from hermes_runner.agent.session import Failure
from hermes_runner.config import BreakerClass, BreakerConfig, ErrorClass, ModelConfig
from hermes_runner.errors import RemoteCallError
from hermes_runner.model.base import Completion
from hermes_runner.run.breaker import (
    Breaker,
    Guard,
    NotStarted,
    call_class,
    endpoint_probe,
    merged,
    outcome_classes,
)
from hermes_runner.run.budget import CURRENT_PROMPT
from hermes_runner.run.progress import RunProgress
from hermes_runner.run.watch import SessionWatch, where
from hermes_runner.usage import Usage

from tests.helpers.inprocess import prompt


def in_loop(test):
    """Run an async test in its own event loop (the unit tier has no asyncio plugin)."""

    @functools.wraps(test)
    def run(*args, **kwargs):
        return asyncio.run(test(*args, **kwargs))

    return run


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t


def status_error(code: int) -> openai.APIStatusError:
    response = httpx2.Response(code, request=httpx2.Request("POST", "http://endpoint/v1/chat/completions"))
    return openai.APIStatusError(f"HTTP {code}", response=response, body=None)


def failed(i: int, cls: ErrorClass | None = ErrorClass.provider, error_type: str = "ModelCallError", calls: int = 1):
    return Failure(prompt(f"p{i}", i), error_type, "boom", usage=Usage(total_tokens=10), api_calls=calls,
                   error_class=cls)  # fmt: skip


def breaker(clock: Clock, **kw) -> Breaker:
    return Breaker(BreakerConfig(**{"window_s": 10.0, "threshold": 3, "probe_s": 1.0, **kw}), clock=clock)


def test_call_errors_are_classed_by_status() -> None:
    assert call_class(status_error(503)) == call_class(status_error(429)) == BreakerClass.provider
    assert call_class(RemoteCallError("APIStatusError", 502)) == BreakerClass.provider  # a worker process's call
    assert call_class(status_error(400)) is None and call_class(None) is None and call_class(ValueError()) is None


def test_it_opens_when_enough_distinct_prompts_fail_within_the_window(caplog) -> None:
    clock = Clock()
    b = breaker(clock)
    for _ in range(10):  # one prompt's retries count once
        b.note(BreakerClass.provider, "a", "HTTP 503")
    b.note(BreakerClass.provider, "b", "HTTP 503")
    clock.t += 11  # both leave the window
    b.note(BreakerClass.provider, "c", "HTTP 503")
    b.note(BreakerClass.provider, "d", "HTTP 503")
    assert not b.opened
    b.note(BreakerClass.sandbox, "e", "SandboxError")  # another class counts on its own
    assert not b.opened
    b.note(BreakerClass.provider, "e", "HTTP 503")
    assert list(b.opened) == [BreakerClass.provider]
    assert "breaker open: 3 prompts met provider errors within 10s (the last: HTTP 503)" in caplog.text
    assert b.describe().startswith("breaker open: provider 0s, probing every 1s")


def test_a_share_of_the_workers_opens_it_when_fewer_than_the_threshold() -> None:
    def threshold(workers: int, **cfg) -> int:
        return Breaker(BreakerConfig(**cfg), workers).threshold

    assert threshold(16) == 8 and threshold(64) == 20 and threshold(64, share=0.1) == 7
    assert threshold(1) == threshold(4) == 3  # one or two failing prompts are no spike ...
    assert threshold(4, threshold=1) == 1  # ... unless breaker.threshold says so


def test_an_answered_call_closes_the_provider_class(caplog) -> None:
    b = breaker(Clock())
    for key in "abc":
        CURRENT_PROMPT.set(key)
        b.after_call(status_error(429), None)
    assert BreakerClass.provider in b.opened
    b.after_call(None, Completion({"role": "assistant", "content": "hi"}, "stop", Usage()))
    assert not b.opened and "breaker closed: provider: a model call was answered" in caplog.text


def test_a_class_left_out_or_a_disabled_breaker_never_opens() -> None:
    for cfg in ({"enabled": False}, {"on": [BreakerClass.sandbox]}):
        b = breaker(Clock(), **cfg)
        for key in "abcdef":
            b.note(BreakerClass.provider, key, "HTTP 503")
        assert not b.opened


def test_the_hook_counts_the_calls_of_the_current_prompt() -> None:
    b = breaker(Clock())
    for key in "abc":
        CURRENT_PROMPT.set(key)
        b.after_call(status_error(400), None)
        assert not b.opened
        b.after_call(status_error(503), None)
    assert BreakerClass.provider in b.opened


def test_outcomes_show_provider_sandbox_start_and_scorer_errors() -> None:
    assert outcome_classes(failed(0)) == {BreakerClass.provider}
    assert outcome_classes(failed(1, ErrorClass.sandbox, "SandboxError", calls=0)) == {BreakerClass.sandbox}
    assert outcome_classes(failed(2, ErrorClass.sandbox, "SandboxError", calls=3)) == set()  # died mid-run
    assert outcome_classes(failed(3, ErrorClass.timeout, "PromptTimeout")) == set()
    # A provider error of the prompt's own (a 400: context too long) is no outage; a 503 after the retries is.
    too_long, gone = failed(4), failed(5)
    too_long.status, gone.status = 400, 503
    assert outcome_classes(too_long) == set() and outcome_classes(gone) == {BreakerClass.provider}
    res = SessionResult(prompt("s"), [], [], scores=[{"name": "judge", "error": "judge unreachable"}])
    assert outcome_classes(res) == {BreakerClass.scorer}
    res.scores = [{"name": "judge", "error": ""}]
    assert outcome_classes(res) == set()


@in_loop
async def test_admit_waits_while_open_and_a_probe_closes_it(caplog) -> None:
    caplog.set_level(logging.INFO, "hermes_runner")
    clock = Clock()
    b = breaker(clock)
    for key in "abc":
        b.note(BreakerClass.provider, key, "HTTP 503")
    waiting = asyncio.ensure_future(b.admit())
    answers = ["HTTP 503", None]

    async def probe() -> str | None:
        return answers.pop(0)

    await b.probe_once(probe)
    await asyncio.sleep(0)
    assert not waiting.done() and "the probe failed: HTTP 503" in caplog.text
    assert "last probe: HTTP 503" in b.describe()
    clock.t += 30
    await b.probe_once(probe)
    assert await asyncio.wait_for(waiting, 5) == frozenset()
    assert not b.opened and "breaker closed: provider: a probe call was answered after 30s" in caplog.text
    assert await b.admit() == frozenset()


@in_loop
async def test_it_gives_up_after_give_up_s() -> None:
    clock, stopped = Clock(), []
    b = breaker(clock, give_up_s=60.0)
    b.on_give_up = stopped.append
    for key in "abc":
        b.note(BreakerClass.provider, key, "HTTP 503")
    waiting = asyncio.ensure_future(b.admit())

    async def down() -> str:
        return "HTTP 503"

    await b.probe_once(down)
    clock.t += 61
    await b.probe_once(down)
    assert await asyncio.wait_for(waiting, 5) is None
    assert len(stopped) == 1 and "provider errors for 61s (breaker.give_up_s=60)" in stopped[0]


@in_loop
async def test_a_class_without_a_probe_call_lets_one_trial_prompt_through() -> None:
    b = breaker(Clock())
    for i in range(3):
        b.judge(failed(i, ErrorClass.sandbox, "SandboxError", calls=0), frozenset())
    assert BreakerClass.sandbox in b.opened
    first, second = asyncio.ensure_future(b.admit()), asyncio.ensure_future(b.admit())
    await b.probe_once(None)  # grants one trial
    done, pending = await asyncio.wait([first, second], timeout=5, return_when=asyncio.FIRST_COMPLETED)
    assert len(done) == 1 and len(pending) == 1
    trial = done.pop().result()
    assert trial == frozenset({BreakerClass.sandbox})
    b.judge(failed(7, ErrorClass.sandbox, "SandboxError", calls=0), trial)  # the trial failed: still open
    assert BreakerClass.sandbox in b.opened and not pending.pop().done()
    await b.probe_once(None)
    trial = await asyncio.wait_for(second, 5)
    b.judge(SessionResult(prompt("ok"), [], []), trial)  # ran clean: closed
    assert not b.opened


@in_loop
async def test_the_guard_runs_again_what_failed_while_open_and_records_it_once() -> None:
    b = breaker(Clock())
    runs: list[int] = []
    guard = Guard(b, lambda p: None, lambda p: None)
    for key in "ab":  # two other prompts met 503s (the call hooks)
        b.note(BreakerClass.provider, key, "HTTP 503")

    async def work(p):
        runs.append(p.index)
        if len(runs) == 1:
            return failed(p.index)  # the third prompt: it opens the breaker, and is held
        return SessionResult(p, [], [], usage=Usage(total_tokens=5), api_calls=1, entry={"api_calls": 1})

    task = asyncio.ensure_future(guard.run(prompt("x", 4), work))
    await asyncio.sleep(0.01)
    assert not task.done() and guard.held == 1 and runs == [4] and BreakerClass.provider in b.opened

    async def up() -> None:
        return None

    await b.probe_once(up)
    outcome = await asyncio.wait_for(task, 5)
    assert isinstance(outcome, SessionResult) and runs == [4, 4] and guard.rerun == 1 and guard.held == 0
    assert [f.attempt for f in outcome.earlier_failures] == [1]  # the failure in the spike: failures.jsonl
    assert outcome.usage.total_tokens == 15 and outcome.api_calls == 2  # its spend counts ...
    assert outcome.entry["usage"]["total_tokens"] == 15 and outcome.entry["api_calls"] == 2  # ... in its entry too


@in_loop
async def test_the_guard_keeps_failures_while_closed_and_gives_up_with_the_held_one() -> None:
    b = breaker(Clock())
    guard = Guard(b, lambda p: None, lambda p: None)

    async def fail(p):
        return failed(p.index)

    assert isinstance(await guard.run(prompt("y", 1), fail), Failure)  # closed: the failure is the outcome
    for key in "abc":
        b.note(BreakerClass.provider, key, "HTTP 503")
    task = asyncio.ensure_future(guard.run(prompt("z", 2), fail))
    b.gave_up = "gave up"
    b._poke()
    assert isinstance(await asyncio.wait_for(task, 5), NotStarted)  # never started: stays pending


def test_merged_numbers_every_earlier_attempt() -> None:
    inner = failed(0)
    first = failed(0)
    first.earlier_failures = [inner]
    last = failed(0)
    out = merged(last, [first])
    assert out is last and [f.attempt for f in out.earlier_failures] == [1, 2] and out.attempt == 3
    assert out.usage.total_tokens == 20  # first's usage holds inner's already (agent/session.py sums them)


@in_loop
async def test_a_silent_session_is_reported_with_the_tool_it_waits_in(caplog) -> None:
    clock = Clock()
    watch = SessionWatch(60.0, clock)
    gate = asyncio.Event()
    p = prompt("slow", 3)

    async def _run_tool(call: dict) -> None:  # as agent/loop.py's, where a tool call runs
        await gate.wait()

    async def session() -> None:
        CURRENT_PROMPT.set(p.key)
        watch.started(p)
        await watch.before_call()
        watch.after_call(None, None)
        await _run_tool({"function": {"name": "terminal", "arguments": '{"command": "sleep 999"}'}})

    task = asyncio.ensure_future(session())
    await asyncio.sleep(0.01)
    assert watch.check() == ""
    clock.t += 61
    note = watch.check()
    assert note.startswith("1 silent (prompt 3 61s: in tool terminal") and "sleep 999" in note
    assert caplog.text.count("silent for 61s") == 1
    watch.check()
    assert caplog.text.count("silent for") == 1  # once per silence
    CURRENT_PROMPT.set(p.key)
    await watch.before_call()  # a model call starts: heard again, and in flight
    clock.t += 61
    assert where(watch.live[p.key]) == "waiting on a model call (1 in flight)"
    gate.set()
    await task
    watch.ended(p)
    assert watch.check() == ""


def test_the_progress_line_says_what_the_run_says_of_itself() -> None:
    clock = Clock()
    b = breaker(clock)
    line = RunProgress("r", 10, enabled=False, notes=b.describe).line()
    assert "in flight 0 | 0 tok" in line  # nothing to say: nothing added
    for key in "abc":
        b.note(BreakerClass.provider, key, "HTTP 503")
    clock.t += 42
    assert (
        "in flight 0 | breaker open: provider 42s, probing every 1s | 0 tok"
        in RunProgress("r", 10, enabled=False, notes=b.describe).line()
    )


def test_the_probe_is_a_real_call_answered_once_the_outage_ends(server) -> None:
    probe = endpoint_probe(ModelConfig(name="scripted", base_url=server.url, api_key_env=None), None)
    server.outage(503)
    assert asyncio.run(probe()) == "HTTP 503" and server.outage_answered == 1
    server.outage(400)  # an answer, if not a good one: the endpoint is back
    assert asyncio.run(probe()) is None
    server.recover()
    assert asyncio.run(probe()) is None
    assert server.requests[-1].body["max_tokens"] == 1
