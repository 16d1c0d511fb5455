"""The agent loop on ScriptedModel, its tools in a real local sandbox: turns, tools, limits, usage."""

from __future__ import annotations

import asyncio
import json
import re
import time

import pytest

from hermes_runner.errors import ModelCallError
from hermes_runner.testing.model import ScriptedModel
from hermes_runner.trajectory import entry as entries
from hermes_runner.trajectory.openai import to_openai

from tests.helpers.inprocess import AgentSettings, converse, result, talk

TERM = {"id": "t1", "name": "terminal", "arguments": {"command": "echo hi"}}
FINAL = {"content": "final answer", "reasoning": "wrap up"}


def roles(res) -> list[str]:
    return [m["role"] for m in res.history]


def tool_results(res) -> list[dict]:
    return [json.loads(m["content"]) for m in res.history if m["role"] == "tool"]


def test_tool_calls_run_in_the_sandbox_and_results_are_matched_by_id(tmp_path):
    calls = [
        {"id": "A", "name": "write_file", "arguments": {"path": "f.txt", "content": "data"}},
        {"id": "B", "name": "terminal", "arguments": {"command": "cat f.txt"}},
    ]
    res, model = talk([{"tool_calls": calls, "reasoning": "write then read"}, FINAL], tmp_path)
    assert roles(res) == ["user", "assistant", "tool", "tool", "assistant"]
    assert [(m["tool_call_id"], m["name"]) for m in res.history if m["role"] == "tool"] == [("A", "write_file"), ("B", "terminal")]  # fmt: skip
    assert tool_results(res)[1]["output"] == "data"  # really written, really read back
    assert res.tool_calls == [("write_file", True), ("terminal", True)]
    assert (res.completed, res.partial, res.stop_reason, res.api_calls) == (True, False, "final_answer", 2)
    assert res.history[-1] == {"role": "assistant", "content": "final answer", "reasoning": "wrap up"}
    assert len(model.calls) == 2 and [m["role"] for m in model.calls[1].messages][-2:] == ["tool", "tool"]


def test_an_answer_without_calls_ends_the_conversation_at_once(tmp_path):
    res, model = talk([FINAL, {"content": "never asked"}], tmp_path)
    assert roles(res) == ["user", "assistant"] and res.completed and res.api_calls == 1
    assert {t["function"]["name"] for t in model.calls[0].tools} >= {"terminal", "read_file", "write_file"}


def test_reasoning_is_kept_on_every_assistant_turn_whatever_field_it_came_in(tmp_path):
    steps = [
        {"tool_calls": [TERM], "reasoning": "plan", "reasoning_field": "think"},
        {"content": "the end", "reasoning": "done", "reasoning_field": "reasoning_details"},
    ]
    res, _ = talk(steps, tmp_path)
    turns = [m for m in res.history if m["role"] == "assistant"]
    assert [t.get("reasoning") for t in turns] == ["plan", "done"]
    assert turns[1]["content"] == "the end" and turns[1]["reasoning_details"][0]["text"] == "done"
    assert "<think>" not in json.dumps(res.history)


def test_unknown_tools_and_bad_arguments_get_errors_back_and_count_as_failures(tmp_path):
    steps = [
        {"tool_calls": [{"name": "teleport", "arguments": {}}]},
        {"tool_calls": [{"name": "terminal", "arguments": "{not json"}]},
        {"tool_calls": [{"name": "terminal", "arguments": "[1, 2]"}]},
        FINAL,
    ]
    res, _ = talk(steps, tmp_path, settings=AgentSettings(max_invalid_tool_turns=5))
    errors = [r["error"] for r in tool_results(res)]
    assert errors[0].startswith("Tool 'teleport' is not available. Available tools: ") and "terminal" in errors[0]
    assert errors[1].startswith("Arguments are not valid JSON") and errors[2] == "Arguments must be a JSON object"
    assert res.tool_calls == [("teleport", False), ("terminal", False), ("terminal", False)]
    assert res.completed and res.stop_reason == "final_answer"


def test_repeated_invalid_turns_stop_the_loop_as_partial(tmp_path):
    bad = {"tool_calls": [{"name": "teleport", "arguments": {}}]}
    res, model = talk([bad] * 5 + [FINAL], tmp_path, settings=AgentSettings(max_invalid_tool_turns=2))
    assert (res.partial, res.completed, res.stop_reason) == (True, False, "invalid_tool_calls")
    assert len(model.calls) == 2 and roles(res)[-1] == "assistant"  # the dangling tool results are trimmed


def test_a_valid_call_resets_the_invalid_streak(tmp_path):
    bad = {"tool_calls": [{"name": "teleport", "arguments": {}}]}
    res, _ = talk([bad, {"tool_calls": [TERM]}, bad, FINAL], tmp_path, settings=AgentSettings(max_invalid_tool_turns=2))
    assert res.completed and res.tool_calls == [("teleport", False), ("terminal", True), ("teleport", False)]


def test_a_tool_error_goes_back_to_the_model_and_the_loop_goes_on(tmp_path):
    steps = [{"tool_calls": [{"name": "read_file", "arguments": {}}], "reasoning": "r"}, FINAL]
    res, _ = talk(steps, tmp_path, settings=AgentSettings(max_invalid_tool_turns=1))
    assert res.tool_calls == [("read_file", False)] and res.completed  # a tool error is not an invalid call
    assert "missing required argument 'path'" in res.history[2]["content"]


def test_max_turns_ends_with_one_summary_call_without_tools(tmp_path):
    res, model = talk([{"tool_calls": [TERM], "reasoning": "r"}] * 5, tmp_path, settings=AgentSettings(max_turns=2))
    assert (res.stop_reason, res.completed, res.partial) == ("max_turns", False, False)
    assert len(model.calls) == 3 and model.calls[-1].tools == []
    assert "maximum number of tool-calling turns" in model.calls[-1].messages[-1]["content"]
    assert roles(res) == ["user", "assistant", "tool", "assistant", "tool", "assistant"]
    last = res.history[-1]
    assert "tool_calls" not in last and last["content"]  # the summary turn, calls dropped
    assert all("maximum number" not in str(m.get("content")) for m in res.history)  # the request is never saved
    assert res.api_calls == 3


def test_max_turns_without_final_summary_trims_the_last_tool_results(tmp_path):
    res, model = talk([{"tool_calls": [TERM]}] * 3, tmp_path, settings=AgentSettings(max_turns=2, final_summary=False))
    assert res.stop_reason == "max_turns" and len(model.calls) == 2
    assert roles(res) == ["user", "assistant", "tool", "assistant"] and res.history[-1].get("tool_calls")


def test_a_failed_summary_call_trims_instead_of_losing_the_conversation(tmp_path):
    steps = [{"tool_calls": [TERM]}, {"fail": [{"status": 500}], "content": "never"}]
    res, model = talk(steps, tmp_path, settings=AgentSettings(max_turns=1))
    assert res.stop_reason == "max_turns" and len(model.calls) == 2
    assert roles(res) == ["user", "assistant"] and res.api_calls == 1


def test_output_cut_by_length_is_partial(tmp_path):
    res, _ = talk([{"content": "cut sho", "reasoning": "r", "finish_reason": "length"}], tmp_path)
    assert (res.partial, res.completed, res.stop_reason) == (True, False, "length")


@pytest.mark.parametrize(
    ("settings", "stop"),
    [({"max_tokens": 150}, "token_limit"), ({"max_cost_usd": 0.05}, "cost_limit")],
)
def test_a_prompt_budget_stops_the_loop_as_partial(tmp_path, settings, stop):
    step = {"tool_calls": [TERM], "reasoning": "r", "usage": {"total_tokens": 100}, "cost": 0.03}
    res, model = talk([step] * 5, tmp_path, settings=AgentSettings(**settings))
    assert (res.partial, res.stop_reason, len(model.calls)) == (True, stop, 2)
    assert res.usage.total_tokens == 200 and res.usage.cost_usd == pytest.approx(0.06)
    assert roles(res)[-1] == "assistant" and len(res.tool_calls) == 1  # the over-budget turn's calls never ran


def test_usage_retries_and_the_answering_model_add_up_over_the_calls(tmp_path):
    steps = [
        {"tool_calls": [TERM], "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}, "cost": 0.5},
        {"content": "x", "usage": {"prompt_tokens": 20, "completion_tokens": 7, "total_tokens": 27,
                                    "prompt_tokens_details": {"cached_tokens": 4}}, "model": "other/m"},
    ]  # fmt: skip
    res, _ = talk(steps, tmp_path)
    u = res.usage
    assert (u.prompt_tokens, u.completion_tokens, u.total_tokens, u.cached_tokens) == (30, 12, 42, 4)
    assert u.cost_usd == 0.5 and res.model == "other/m" and res.retries == 0 and res.duration_s > 0


def test_ephemeral_prompt_and_prefill_are_sent_but_never_kept(tmp_path):
    prefill = [{"role": "user", "content": "PREFILL-Q"}, {"role": "assistant", "content": "PREFILL-A"}]
    settings = AgentSettings(system_prompt="SYS", ephemeral_system_prompt="EPHEMERAL", prefill_messages=prefill)
    res, model = talk([{"content": "answer", "reasoning": "r"}], tmp_path, text="the task", settings=settings)
    sent = model.calls[0].messages
    assert sent[0] == {"role": "system", "content": "SYS\n\nEPHEMERAL"} and sent[1:3] == prefill
    assert sent[3] == {"role": "user", "content": "the task"}
    assert "EPHEMERAL" not in json.dumps(res.history) and "PREFILL" not in json.dumps(res.history)


def test_a_model_failure_propagates_and_the_result_keeps_what_was_spent(tmp_path):
    steps = [{"tool_calls": [TERM], "usage": {"total_tokens": 9}}, {"fail": [{"status": 400, "message": "bad"}]}]
    res = result()
    with pytest.raises(ModelCallError, match="bad"):
        asyncio.run(converse(ScriptedModel(steps), tmp_path, res=res))
    assert (res.api_calls, res.usage.total_tokens, res.tool_calls) == (1, 9, [("terminal", True)])
    assert roles(res) == ["user", "assistant", "tool"] and not res.completed


def test_tell_agent_sends_what_is_left_after_the_conversation_and_never_keeps_it(tmp_path):
    step = {"tool_calls": [TERM], "usage": {"total_tokens": 100}, "cost": 0.25}
    settings = AgentSettings(max_turns=3, max_tokens=1000, max_cost_usd=1.0, tell_agent=True)
    res = result()
    res.deadline = time.monotonic() + 100
    res, model = talk([step, FINAL], tmp_path, settings=settings, res=res)
    first, second = (c.messages[-1] for c in model.calls)
    assert first["role"] == second["role"] == "system"
    seconds = re.fullmatch(
        r"\[budget\] Left for this task: 3 model calls \(this one included\), (\d+) seconds, 1,000 tokens, \$1\.0000\. "
        r"Give your final answer before any of these runs out\.",
        first["content"],
    )
    assert seconds and 0 < int(seconds.group(1)) <= 100
    assert "2 model calls (this one included), " in second["content"] and ", 900 tokens, $0.7500." in second["content"]
    assert model.calls[1].messages[:-1] == [*res.history[:-1]]  # the conversation as it was, the note after it
    assert roles(res) == ["user", "assistant", "tool", "assistant"] and "[budget]" not in json.dumps(res.history)


def test_tell_agent_names_only_the_limits_that_are_set_and_keep_note_keeps_the_notes(tmp_path):
    settings = AgentSettings(max_turns=2, tell_agent=True, keep_note=True)
    res, model = talk([{"tool_calls": [TERM]}, FINAL], tmp_path, settings=settings)
    assert (
        model.calls[1]
        .messages[-1]["content"]
        .startswith("[budget] Left for this task: 1 model call (this one included). Give")
    )
    assert roles(res) == ["user", "system", "assistant", "tool", "system", "assistant"]
    saved = entries.entry(res, batch_num=0, model="m", tool_names=["terminal"], system_prompt="")
    turns = [(t["from"], t["value"][:8]) for t in saved["conversations"]]
    assert turns[1:] == [("human", "task"), ("system", "[budget]"), ("gpt", turns[3][1]), ("tool", turns[4][1]),
                         ("system", "[budget]"), ("gpt", turns[6][1])]  # fmt: skip
    assert [m["role"] for m in to_openai(saved)["messages"]] == [
        "user", "system", "assistant", "tool", "system", "assistant"
    ]  # fmt: skip
