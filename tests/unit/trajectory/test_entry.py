"""A finished conversation (ScriptedModel, real sandbox) as a ShareGPT entry, in both layouts."""

from __future__ import annotations

import json

from hermes_runner.config import OutputLayout
from hermes_runner.tools.catalog import tool_names
from hermes_runner.trajectory import entry as entries
from hermes_runner.trajectory.hermes import tool_responses

from tests.helpers.inprocess import talk

CALLS = [
    {"id": "A", "name": "write_file", "arguments": {"path": "f.txt", "content": "data"}},
    {"id": "B", "name": "terminal", "arguments": {"command": "cat f.txt"}},
]
STEPS = [{"tool_calls": CALLS, "reasoning": "write, then read"}, {"content": "it says data", "reasoning": "seen"}]


def make(res, layout=OutputLayout.hermes) -> dict:
    return entries.entry(res, batch_num=2, model="m", tool_names=tool_names(), system_prompt="SYS", layout=layout)


def test_the_hermes_layout_keeps_calls_and_results_in_the_values(tmp_path):
    res, _ = talk(STEPS, tmp_path)
    e = make(res)
    turns = e["conversations"]
    assert [t["from"] for t in turns] == ["system", "human", "gpt", "tool", "gpt"]
    assert all(set(t) == {"from", "value"} for t in turns)
    assert turns[0]["value"].endswith("\n\nSYS") and '"name": "write_file"' in turns[0]["value"]
    assert turns[2]["value"].startswith("<think>\nwrite, then read\n</think>\n") and turns[2]["value"].count("<tool_call>") == 2  # fmt: skip
    blocks = tool_responses(turns[3]["value"])
    assert [(b["tool_call_id"], b["name"]) for b in blocks] == [("A", "write_file"), ("B", "terminal")]
    assert json.loads(blocks[1]["content"])["output"] == "data"
    assert turns[4]["value"] == "<think>\nseen\n</think>\nit says data"
    assert (e["completed"], e["partial"], e["stop_reason"], e["api_calls"], e["prompt_index"]) == (True, False, "final_answer", 2, 0)  # fmt: skip
    assert e["tool_stats"]["terminal"] == {"count": 1, "success": 1, "failure": 0}
    assert e["tool_stats"]["read_file"] == {"count": 0, "success": 0, "failure": 0}  # zero-filled, every row alike
    assert set(e["tool_stats"]) == set(tool_names()) and e["metadata"]["batch_num"] == 2


def test_the_structured_layout_puts_the_calls_in_their_own_key(tmp_path):
    res, _ = talk(STEPS, tmp_path)
    turns = make(res, OutputLayout.structured)["conversations"]
    assert all(set(t) == {"from", "value", "tool_calls"} for t in turns)
    assert "<tool_call>" not in turns[2]["value"]
    assert [(c["id"], c["function"]["name"]) for c in turns[2]["tool_calls"]] == [
        ("A", "write_file"),
        ("B", "terminal"),
    ]
    assert turns[2]["tool_calls"][0]["function"]["arguments"] == {"path": "f.txt", "content": "data"}
    assert [t["tool_calls"] for t in turns if t["from"] != "gpt"] == [[], [], []]


def test_entries_of_different_conversations_have_the_same_keys_and_types(tmp_path):
    short, _ = talk([{"content": "at once"}], tmp_path)
    long, _ = talk(STEPS, tmp_path)

    def shape(obj):
        if isinstance(obj, dict):
            return {k: shape(v) for k, v in obj.items() if k not in ("conversations",)}
        return type(obj).__name__

    a, b = make(short), make(long)
    assert shape(a) == shape(b)
    assert json.loads(json.dumps(a)) == a  # plain JSON, no null standing in for a string
    assert entries.reasoning_turns(short) == (1, 0) and entries.reasoning_turns(long) == (2, 2)
