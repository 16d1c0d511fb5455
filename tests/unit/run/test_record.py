"""What a finished conversation becomes in the ledger: the filters (classify) and the record's summary."""

from __future__ import annotations

import pytest

from hermes_runner.config import FiltersConfig, HallucinatedToolPolicy
from hermes_runner.run.record import _summary, classify
from hermes_runner.tools.catalog import tool_names

from tests.helpers.inprocess import AgentSettings, run_cfg, talk

TERM = {"name": "terminal", "arguments": {"command": "echo hi"}}
GHOST = {"name": "teleport", "arguments": {"to": "mars"}}
FINAL = {"content": "done", "reasoning": "r"}


def cfg_with(tmp_path, **filters):
    return run_cfg(tmp_path, filters=FiltersConfig(**filters))


def test_a_clean_conversation_is_kept_with_its_summary(tmp_path):
    res, _ = talk([{"tool_calls": [TERM, TERM], "reasoning": "r"}, {"tool_calls": [{"name": "read_file", "arguments": {}}]}, FINAL], tmp_path)  # fmt: skip
    status, reason, summary = classify(res, cfg_with(tmp_path).filters, tool_names())
    assert (status, reason) == ("ok", None)
    assert summary == {
        "completed": True, "partial": False, "stop": "final_answer", "turns": 3, "reasoning_turns": 2,
        "tools": {"terminal": [2, 0], "read_file": [1, 1]}, "unknown_tools": {},
    }  # fmt: skip


@pytest.mark.parametrize(
    ("policy", "status", "reason"),
    [(HallucinatedToolPolicy.drop, "discarded", "hallucinated_tool"), (HallucinatedToolPolicy.keep, "ok", None)],
)
def test_hallucinated_tools_follow_the_policy(tmp_path, policy, status, reason):
    res, _ = talk([{"tool_calls": [GHOST, TERM], "reasoning": "r"}, {"tool_calls": [GHOST]}, FINAL], tmp_path)
    got = classify(res, cfg_with(tmp_path, hallucinated_tools=policy).filters, tool_names())
    assert got[:2] == (status, reason)
    assert got[2]["unknown_tools"] == {"teleport": 2} and got[2]["tools"] == {"terminal": [1, 0]}


def test_a_tool_outside_the_known_names_counts_as_hallucinated(tmp_path):
    res, _ = talk([{"tool_calls": [TERM], "reasoning": "r"}, FINAL], tmp_path)
    names = [n for n in tool_names() if n != "terminal"]
    status, reason, summary = classify(res, cfg_with(tmp_path).filters, names)
    assert (status, reason, summary["unknown_tools"], summary["tools"]) == ("discarded", "hallucinated_tool", {"terminal": 1}, {})  # fmt: skip


@pytest.mark.parametrize(("required", "status"), [(True, "discarded"), (False, "ok")])
def test_no_reasoning_in_any_turn_follows_require_reasoning(tmp_path, required, status):
    res, _ = talk([{"tool_calls": [TERM]}, {"content": "plain"}], tmp_path)
    got = classify(res, cfg_with(tmp_path, require_reasoning=required).filters, tool_names())
    assert got[0] == status and got[1] == ("no_reasoning" if required else None)
    assert (got[2]["turns"], got[2]["reasoning_turns"]) == (2, 0)


def test_no_reasoning_is_checked_before_hallucinated_tools(tmp_path):
    res, _ = talk([{"tool_calls": [GHOST]}, {"content": "plain"}], tmp_path)
    assert classify(res, cfg_with(tmp_path).filters, tool_names())[:2] == ("discarded", "no_reasoning")


@pytest.mark.parametrize(
    ("steps", "stop", "partial"),
    [
        ([{"content": "cut", "reasoning": "r", "finish_reason": "length"}], "length", True),
        ([{"tool_calls": [TERM], "reasoning": "r"}] * 3, "max_turns", False),
    ],
)
def test_a_stopped_conversation_is_kept_and_says_why(tmp_path, steps, stop, partial):
    res, _ = talk(steps, tmp_path, settings=AgentSettings(max_turns=2))
    status, _, summary = classify(res, cfg_with(tmp_path).filters, tool_names())
    assert (status, summary["stop"], summary["partial"], summary["completed"]) == ("ok", stop, partial, False)


def test_the_record_carries_the_spend_and_the_toolsets(tmp_path):
    usage = {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
    res, _ = talk([{"tool_calls": [TERM], "usage": usage, "cost": 0.25}, {**FINAL, "usage": usage}], tmp_path)
    rec = _summary(res, res.prompt.key, 7, 3)
    assert {k: rec[k] for k in ("key", "index", "inv", "api_calls", "retries", "toolsets")} == {
        "key": res.prompt.key, "index": 7, "inv": 3, "api_calls": 2, "retries": 0, "toolsets": ["terminal", "file"],
    }  # fmt: skip
    assert rec["usage"] == {"prompt_tokens": 20, "completion_tokens": 10, "cached_tokens": 0,
                            "reasoning_tokens": 0, "total_tokens": 30, "cost_usd": 0.25}  # fmt: skip
    assert rec["duration_s"] == round(res.duration_s, 3) and rec["ts"]
