"""The chat and openai exports of one conversation (ScriptedModel, real sandbox), and the fine-tuning checker."""

from __future__ import annotations

import json

import pytest

from hermes_runner.config import OutputLayout
from hermes_runner.errors import ExportError
from hermes_runner.trajectory.export import chat_row, fine_tuning_row, openai_options

from tests.helpers.inprocess import talk
from tests.helpers.openai_ft import violations
from tests.unit.trajectory.test_entry import STEPS, make

# OpenAI's fine-tuning guide's example of a tool-calling line (a call with JSON-text arguments, then its tools)
DOCUMENTED = {
    "messages": [
        {"role": "user", "content": "What is the weather in San Francisco?"},
        {
            "role": "assistant",
            "tool_calls": [
                {
                    "id": "call_id",
                    "type": "function",
                    "function": {"name": "get_current_weather", "arguments": '{"location": "San Francisco, USA"}'},
                }
            ],
        },
    ],
    "tools": [
        {
            "type": "function",
            "function": {
                "name": "get_current_weather",
                "description": "Get the current weather",
                "parameters": {"type": "object", "properties": {"location": {"type": "string"}}},
            },
        }
    ],
}


def test_the_checker_passes_openais_example_and_finds_each_kind_of_violation():
    assert violations(DOCUMENTED) == []
    call = DOCUMENTED["messages"][1]["tool_calls"][0]
    bad = [  # what the earlier `--to openai` wrote, one at a time
        ({**DOCUMENTED, "tools": json.dumps(DOCUMENTED["tools"])}, "tools_not_an_array"),
        ({**DOCUMENTED, "id": "x"}, "unrecognized_top_level_key"),
        ({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "tool_calls": []}]},
         "empty_key"),
        ({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a", "tool_call_id": ""}]},
         "message_unrecognized_key"),
        ({**DOCUMENTED, "messages": [DOCUMENTED["messages"][0], {"role": "assistant", "tool_calls": [
            {**call, "function": {**call["function"], "arguments": {"location": "SF"}}}]}]}, "arguments_not_a_json_string"),
        ({"messages": [{"role": "user", "content": "q"}]}, "example_missing_assistant_message"),
        ({"messages": [{"role": "user", "content": "q"}, {"role": "tool", "tool_call_id": "c", "content": "r"},
                       {"role": "assistant", "content": "a"}]}, "tool_message_answers_no_call"),
        ({**DOCUMENTED, "messages": [*DOCUMENTED["messages"], {"role": "assistant", "content": "a"}]},
         "unanswered_tool_call"),
        ({"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": ""}]}, "missing_content"),
    ]  # fmt: skip
    for line, kind in bad:
        assert kind in violations(line), (kind, line)


@pytest.mark.parametrize("layout", list(OutputLayout))
def test_openai_lines_follow_the_fine_tuning_rules_and_chat_lines_keep_only_set_keys(tmp_path, layout):
    res, _ = talk(STEPS, tmp_path)
    entry = make(res, layout)
    row = fine_tuning_row(entry, "drop")
    assert violations(row) == [] and set(row) == {"messages", "tools"}
    calls = row["messages"][2]["tool_calls"]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [c["arguments"] for c in STEPS[0]["tool_calls"]]
    assert [m.get("tool_call_id") for m in row["messages"][3:5]] == ["A", "B"]
    assert row["messages"][-1] == {"role": "assistant", "content": "it says data"}
    asked = fine_tuning_row(entry, "field", metadata=True)
    assert set(asked) == {"messages", "tools", "id", "metadata", "provenance"}
    assert violations(asked) and not [
        v for v in violations(asked, frozenset({"id", "metadata", "provenance"})) if v != "message_unrecognized_key"
    ]  # reasoning_content and the bookkeeping only when asked
    chat = chat_row(entry, "field")
    assert [sorted(m) for m in chat["messages"]] == [
        ["content", "role"],
        ["content", "role"],
        ["reasoning_content", "role", "tool_calls"],  # no content key beside calls without text
        ["content", "name", "role", "tool_call_id"],
        ["content", "name", "role", "tool_call_id"],
        ["content", "reasoning_content", "role"],  # the final answer: no tool_calls key (Hermes 3 tests for one)
    ]
    assert chat["messages"][2]["tool_calls"][0]["function"]["arguments"] == {"path": "f.txt", "content": "data"}


def test_openai_takes_arguments_as_json_text_only():
    assert openai_options("openai", None, None) == ("drop", "string")
    assert openai_options("chat", None, None) == ("field", "object")
    with pytest.raises(ExportError, match="--to chat"):
        openai_options("openai", None, "object")
