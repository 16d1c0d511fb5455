"""Reading a chat-completions reply into a Completion: reasoning from every field, calls, usage."""

from __future__ import annotations

import pytest

from hermes_runner.errors import EmptyResponse, MalformedReply
from hermes_runner.model.client import api_message, parse_completion
from hermes_runner.usage import Usage


def reply(message: dict, usage: dict | None = None, **top) -> dict:
    return {"choices": [{"message": message, "finish_reason": "stop"}], "usage": usage or {}, **top}


@pytest.mark.parametrize(
    "message",
    [
        {"content": "answer", "reasoning": " why "},
        {"content": "answer", "reasoning_content": "why"},
        {"content": "answer", "reasoning_details": [{"type": "reasoning.text", "text": "why"}]},
        {"content": "<think>why</think>\nanswer"},
        {"content": "<REASONING_SCRATCHPAD>why</REASONING_SCRATCHPAD>\nanswer"},
    ],
)
def test_reasoning_is_read_from_every_place_providers_put_it(message):
    got = parse_completion(reply(message)).message
    assert (got["reasoning"], got["content"]) == ("why", "answer")


def test_tool_calls_get_string_arguments_and_ids():
    calls = [{"function": {"name": "terminal", "arguments": {"command": "ls"}}}, {"id": "x", "function": {"name": "f"}}]
    got = parse_completion(reply({"content": None, "tool_calls": calls})).message
    assert got["content"] == "" and [c["id"] for c in got["tool_calls"]] == ["call_0", "x"]
    assert [c["function"]["arguments"] for c in got["tool_calls"]] == ['{"command": "ls"}', ""]


def test_usage_and_the_answering_model_are_read():
    u = {"prompt_tokens": 10, "completion_tokens": 4, "cost": 0.5,
         "prompt_tokens_details": {"cached_tokens": 3}, "completion_tokens_details": {"reasoning_tokens": 2}}  # fmt: skip
    c = parse_completion(reply({"content": "x"}, u, model="vendor/m"))
    assert c.usage == Usage(10, 4, 3, 2, 14, 0.5) == Usage.from_openai(u) and c.model == "vendor/m"
    assert Usage.from_openai(None) == Usage()


@pytest.mark.parametrize(
    ("body", "error"),
    [({"choices": []}, EmptyResponse), ([], MalformedReply), ({"choices": [{"message": "text"}]}, MalformedReply)],
)
def test_a_reply_without_a_message_is_an_error(body, error):
    with pytest.raises(error):
        parse_completion(body)


def test_history_goes_back_without_our_bookkeeping():
    msg = {
        "role": "assistant",
        "content": None,
        "reasoning": "r",
        "tool_calls": [{"id": "a"}],
        "reasoning_details": [1],
    }
    assert api_message(msg) == {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "a"}],
        "reasoning_details": [1],
    }
    user = {"role": "user", "content": "q"}
    assert api_message(user) is user
