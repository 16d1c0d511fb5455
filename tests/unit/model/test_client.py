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


def test_token_ids_and_logprobs_are_read_as_vllm_returns_them():
    lp = {"content": [{"token": "a", "logprob": -0.5}, {"token": "b", "logprob": -1.0}]}
    body = {"choices": [{"message": {"content": "ab"}, "finish_reason": "stop", "token_ids": [7, 8], "logprobs": lp}],
            "prompt_token_ids": [1, 2, 3]}  # fmt: skip
    tokens = parse_completion(body).tokens
    assert (tokens.prompt_ids, tokens.completion_ids, tokens.logprobs) == ([1, 2, 3], [7, 8], [-0.5, -1.0])
    choice_level = {"choices": [{"message": {"content": "ab"}, "prompt_token_ids": [1], "token_ids": [7]}]}
    assert parse_completion(choice_level).tokens.logprobs is None  # ids without logprobs
    assert parse_completion(reply({"content": "x"})).tokens is None  # an endpoint that returns none


def test_token_ids_that_are_not_integers_are_a_malformed_reply():
    body = {"choices": [{"message": {"content": "x"}, "token_ids": ["a"]}], "prompt_token_ids": [1]}
    with pytest.raises(MalformedReply, match="token ids"):
        parse_completion(body)
