"""ScriptedModel (in process) answers exactly as the HTTP scripted server read through the OpenAI client."""

from __future__ import annotations

import asyncio
import base64
import json
import re

import pytest

from hermes_runner.config import ModelConfig, PriceConfig, ProviderConfig, ReasoningApi, ReasoningConfig
from hermes_runner.errors import ModelCallError, ScriptSyntaxError
from hermes_runner.model.base import CallHook, ChatModel, Completion
from hermes_runner.model.client import OpenAIChatModel
from hermes_runner.testing.model import ScriptedModel
from hermes_runner.testing.script import png_bytes
from hermes_runner.tools.catalog import tools_for

from tests.helpers.run import script

TOOLS = [t.openai_schema() for t in tools_for(["terminal", "file"])]
TERM = {"id": "call_t", "name": "terminal", "arguments": {"command": "echo hi"}}
RAW = {"id": "call_r", "name": "write_file", "arguments": '{"path": "a.txt", "content": "x"'}  # broken JSON, kept
USAGE = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18,
         "completion_tokens_details": {"reasoning_tokens": 5}, "prompt_tokens_details": {"cached_tokens": 3}}  # fmt: skip
FIELDS = ["reasoning", "reasoning_content", "reasoning_details", "think", "scratchpad"]

STEPS = {
    **{
        f"reasoning in {f}": {"content": " spaced answer ", "reasoning": "plan it", "reasoning_field": f}
        for f in FIELDS
    },
    "tool calls": {"tool_calls": [TERM, RAW], "reasoning": "two calls"},
    "calls, no content": {"tool_calls": [TERM]},
    "length cut": {"content": "cut sho", "finish_reason": "length"},
    "usage and cost": {"content": "paid", "usage": USAGE, "cost": 0.25},
    "answered by a router": {"content": "routed", "model": "other/model"},
    "no reasoning": {"content": "plain"},
}


def over_http(server, messages: list[dict], tools: list[dict]) -> Completion:
    cfg = ModelConfig(name="scripted", base_url=server.url, reasoning_api=ReasoningApi.none, max_retries=0)

    async def go() -> Completion:
        model = OpenAIChatModel(cfg, ProviderConfig(), ReasoningConfig(), pool_size=2)
        try:
            return await model.complete(messages, tools)
        finally:
            await model.aclose()

    return asyncio.run(go())


def in_process(messages: list[dict], tools: list[dict], model: ScriptedModel | None = None) -> Completion:
    return asyncio.run((model or ScriptedModel()).complete(messages, tools))


def conversation(prompt: str, turn: int = 0) -> list[dict]:
    """A system prompt, the user prompt and `turn` earlier assistant/tool rounds."""
    out = [{"role": "system", "content": "be brief"}, {"role": "user", "content": prompt}]
    for i in range(turn):
        out += [{"role": "assistant", "content": f"round {i}"}, {"role": "user", "content": "go on"}]
    return out


def same_but_ids(a: Completion, b: Completion) -> bool:
    """Equal but for generated call ids (`call_<n>_<i>`, n counts replies), and so one estimated token."""

    def strip(c: Completion) -> str:
        return re.sub(r'"call_\d+_(\d+)"', r'"call_\1"', json.dumps(c.message))

    return (
        strip(a) == strip(b)
        and a.usage.prompt_tokens == b.usage.prompt_tokens
        and abs(a.usage.completion_tokens - b.usage.completion_tokens) <= 1
        and (a.finish_reason, a.model) == (b.finish_reason, b.model)
    )


def test_it_is_a_chat_model():
    model: ChatModel = ScriptedModel()
    asyncio.run(model.aclose())
    assert model.closed


@pytest.mark.parametrize("name", list(STEPS))
def test_a_step_gives_the_same_completion_both_ways(server, name):
    messages = conversation(script(STEPS[name], text=name))
    assert in_process(messages, TOOLS) == over_http(server, messages, TOOLS)


@pytest.mark.parametrize("turn", [0, 1, 2, 5])
def test_the_turn_picks_the_step_and_past_the_end_is_done(server, turn):
    steps = [{"tool_calls": [TERM]}, {"content": "second", "reasoning": "r2"}, {"content": "third"}]
    messages = conversation(script(*steps, text=f"turn {turn}"), turn)
    got = in_process(messages, TOOLS)
    assert got == over_http(server, messages, TOOLS)
    assert got.message["content"] == ["", "second", "third", "Done.", "Done.", "Done."][turn]


@pytest.mark.parametrize("tools", [TOOLS, []], ids=["tools offered", "no tools"])
def test_without_a_script_the_default_turns_follow_the_tools(server, tools):
    for turn in (0, 1):
        messages = conversation("no script here", turn)
        got = in_process(messages, tools)
        assert same_but_ids(got, over_http(server, messages, tools))
    first = in_process(conversation("no script here"), tools)
    assert bool(first.message.get("tool_calls")) == bool(tools)


def test_a_step_with_calls_offered_no_tools_answers_instead(server):
    messages = conversation(script({"tool_calls": [TERM], "reasoning": "r"}, text="no tools"))
    got = in_process(messages, [])
    assert got == over_http(server, messages, [])
    assert "tool_calls" not in got.message and got.message["content"] and got.finish_reason == "stop"


def test_images_in_the_last_user_message_are_described(server):
    url = "data:image/png;base64," + base64.b64encode(png_bytes(3, 2, (9, 9, 9))).decode()
    messages = [{"role": "user", "content": [{"type": "text", "text": "what?"}, {"type": "image_url", "image_url": {"url": url}}]}]  # fmt: skip
    got = in_process(messages, [])
    assert got == over_http(server, messages, [])
    assert "image/png 3x2" in got.message["content"]


def test_fail_entries_fail_the_first_calls_then_the_step_answers():
    model = ScriptedModel()
    messages = conversation(
        script({"fail": [{"status": 503}, {"status": 429, "message": "slow down"}], "content": "ok"})
    )
    with pytest.raises(ModelCallError, match="scripted error 503") as first:
        in_process(messages, TOOLS, model)
    with pytest.raises(ModelCallError, match="slow down") as second:
        in_process(messages, TOOLS, model)
    assert (first.value.status, second.value.status) == (503, 429)
    assert in_process(messages, TOOLS, model).message["content"] == "ok"
    assert len(model.calls) == 3 and model.calls[0].turn == 0


def test_a_bad_script_line_raises_and_the_server_answers_400(server):
    messages = conversation("task\n#script [{not json")
    with pytest.raises(ScriptSyntaxError, match="bad #script"):
        in_process(messages, TOOLS)
    with pytest.raises(ModelCallError, match="HTTP 400"):
        over_http(server, messages, TOOLS)


def test_steps_given_to_the_model_script_every_conversation():
    model = ScriptedModel([{"content": "fixed", "reasoning": "r"}])
    assert in_process(conversation("anything"), TOOLS, model).message["content"] == "fixed"
    assert in_process(conversation(script({"content": "ignored"})), TOOLS, model).message["content"] == "fixed"


class Meter(CallHook):
    """A call hook: sees the estimate before, the outcome after."""

    def __init__(self):
        self.seen: list[tuple] = []

    async def before_call(self, estimate: float) -> None:
        self.seen.append(("before", estimate))

    def after_call(self, exc: BaseException | None, completion: Completion | None) -> None:
        self.seen.append(
            ("after", type(exc).__name__ if exc else None, completion.usage.cost_usd if completion else None)
        )


def test_hooks_see_every_call_and_the_price_fills_the_cost():
    meter = Meter()
    price = PriceConfig(prompt_per_mtok=1_000_000.0, completion_per_mtok=0.0)  # a dollar a prompt token
    model = ScriptedModel(hooks=[meter], price=price)
    done = in_process([{"role": "user", "content": script({"content": "a", "usage": {"prompt_tokens": 3}})}], [], model)
    with pytest.raises(ModelCallError):
        in_process([{"role": "user", "content": script({"fail": [{"status": 500}]})}], [], model)
    assert done.usage.cost_usd == 3.0
    assert [s[0] for s in meter.seen] == ["before", "after", "before", "after"]
    assert meter.seen[1][1:] == (None, 3.0) and meter.seen[3][1:] == ("ModelCallError", None)
