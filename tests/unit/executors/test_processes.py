"""executor.processes: its checks, the worker count, and how a worker's call ends reach the runner's hooks."""

from __future__ import annotations

import asyncio
import os

import httpx2
import openai
import pytest

from hermes_runner.config import ExecutorConfig, LimitsConfig, RateLimitConfig, check
from hermes_runner.errors import ConfigError, RemoteCallError
from hermes_runner.executors import worker_processes
from hermes_runner.executors.processes import call_end, rebuild_end
from hermes_runner.model.base import Completion
from hermes_runner.model.ratelimit import EndpointLimiter
from hermes_runner.run.budget import RunBudget
from hermes_runner.usage import Usage

from tests.helpers.run import compose_cfg


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["executor.processes=-1"], "executor.processes must be >= 0 (or null), not -1"),
        (["executor=ray", "executor.processes=2"], "executor.processes=2 applies to executor=local only"),
    ],
)
def test_bad_processes_are_config_errors(overrides, message):
    cfg = compose_cfg(overrides)
    with pytest.raises(ConfigError) as err:
        check(cfg)
    assert message in str(err.value)
    check(compose_cfg(["executor.processes=null"]))  # null: one per core


def test_worker_count():
    assert worker_processes(ExecutorConfig(), 8) == 1  # the default: the sessions stay in the runner's process
    assert worker_processes(ExecutorConfig(processes=3), 8) == 3
    assert worker_processes(ExecutorConfig(processes=None), 8) == min(8, os.cpu_count() or 1)
    assert worker_processes(ExecutorConfig(processes=0), 8) == min(8, os.cpu_count() or 1)
    assert worker_processes(ExecutorConfig(processes=16), 4) == 4  # never idle


def test_a_workers_429_backs_off_the_runners_limiter():
    request = httpx2.Request("POST", "http://127.0.0.1/v1/chat/completions")
    response = httpx2.Response(429, headers={"retry-after": "7"}, request=request)
    exc = openai.RateLimitError("slow down", response=response, body=None)
    end = call_end(exc, None)
    assert end == ("error", "RateLimitError", 429, 7.0)
    limiter = EndpointLimiter(RateLimitConfig(), 8)

    async def end_the_call() -> None:
        limiter.after_call(*rebuild_end(end))

    asyncio.run(end_the_call())
    throttle = limiter.throttle()
    assert throttle.rate_limited == 1 and 6.0 < throttle.backing_off_s <= 7.0


def test_a_workers_call_is_charged_and_recorded_by_the_runners_budget():
    records: list[dict] = []
    stops: list[str] = []
    budget = RunBudget(LimitsConfig(max_tokens_total=100), Usage(), stops.append, record=records.append)
    usage = Usage(prompt_tokens=90, completion_tokens=20, total_tokens=110)
    budget.after_call(*rebuild_end(call_end(None, Completion({}, "stop", usage, model="m"))))
    budget.after_call(*rebuild_end(call_end(ConnectionResetError(), None)))
    budget.after_call(*rebuild_end(call_end(asyncio.CancelledError(), None)))  # a cancelled call is not an error
    assert [r["event"] for r in records] == ["end", "error"]
    assert records[0]["usage"]["total_tokens"] == 110 and records[1]["error"] == "ConnectionResetError"
    assert stops and "max_tokens_total=100" in stops[0]
    assert isinstance(rebuild_end(("error", "X", None, None))[0], RemoteCallError)
