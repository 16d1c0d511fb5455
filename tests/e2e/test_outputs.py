"""Outputs: one schema for every row (loads with HF datasets), executor, distributions, filters, stats."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from hermes_runner.config import DistributionConfig
from hermes_runner.tools import distributions
from hermes_runner.tools.catalog import NOT_IN_HERMES, tool_names, tools_for

from tests.helpers.run import read_jsonl, run_inprocess, script, write_jsonl

VARIED = [
    lambda i: f"default {i}",
    lambda i: script({"content": f"direct {i}", "reasoning": "easy"}),
    lambda i: script(
        {
            "tool_calls": [
                {"name": "write_file", "arguments": {"path": "a", "content": str(i)}},
                {"name": "read_file", "arguments": {"path": "a"}},
            ],
            "reasoning": "r",
            "reasoning_field": "think",
        },
        {"tool_calls": [{"name": "terminal", "arguments": {"command": "exit 1"}}], "reasoning": "r"},
        {"content": "ok", "reasoning": "r", "reasoning_field": "reasoning_details"},
    ),  # fmt: skip
    lambda i: script(
        {"tool_calls": [{"name": "read_file", "arguments": {"path": "missing"}}], "reasoning": "r"},
        {"content": "cut", "reasoning": "r", "finish_reason": "length"},
    ),  # fmt: skip
]


def shape(value):
    """The JSON 'type' of a value, recursively (dict keys included)."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in sorted(value.items())}
    if isinstance(value, list):
        return ["list"]
    return type(value).__name__


def test_200_prompts_16_workers_one_schema_and_hf_loadable(make_cfg, tmp_path, run_dir, server):
    rows = [
        {"prompt": VARIED[i % len(VARIED)](i), **({"extra": i} if i % 3 == 0 else {"other": "x"})} for i in range(200)
    ]
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    server.latency = 0.2  # long enough that all 16 sessions are in flight together
    code, stats = run_inprocess(make_cfg("num_workers=16", "batch_size=25", dataset=ds), run_dir)
    assert code == 0
    entries = read_jsonl(run_dir / "trajectories.jsonl")
    assert len(entries) == 200 and stats["prompts"]["ok"] == 200
    assert [e["prompt_index"] for e in entries] == list(range(200))
    top = {json.dumps({k: shape(v) for k, v in e.items() if k != "conversations"}, sort_keys=True) for e in entries}
    assert len(top) == 1  # identical keys and types, row to row (tool_stats zero-filled)
    turn_keys = {tuple(sorted(t)) for e in entries for t in e["conversations"]}
    assert turn_keys == {("from", "value")}  # hermes layout: the calls are in `value` only
    assert server.max_in_flight == 16
    assert len(list(run_dir.glob("batch_*.jsonl"))) == 8

    import datasets

    loaded = datasets.load_dataset("json", data_files=str(run_dir / "trajectories.jsonl"), split="train")
    assert loaded.num_rows == 200
    assert set(loaded.features["tool_stats"]) == set(tool_names()) - NOT_IN_HERMES  # in every row (moa unset)
    assert loaded[2]["tool_stats"]["write_file"]["count"] == 1


def test_a_slow_prompt_does_not_hold_up_the_others(make_cfg, tmp_path, run_dir, server):
    slow = script({"content": "slow", "reasoning": "r", "sleep": 6}, text="slow one")
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": slow}] + [{"prompt": f"fast {i}"} for i in range(12)])
    run_inprocess(make_cfg("num_workers=4", "batch_size=2", dataset=ds), run_dir)
    order = [r["index"] for r in read_jsonl(run_dir / "ledger.jsonl")]
    assert order[-1] == 0  # everything else finished while the slow prompt was in flight


def test_toolset_sampling_is_seeded_per_prompt():
    dist = DistributionConfig(name="d", toolsets={"terminal": 50, "file": 50})
    keys = [f"k{i}-0" for i in range(200)]
    a = [tuple(distributions.sample(dist, 7, k)) for k in keys]
    assert a == [tuple(distributions.sample(dist, 7, k)) for k in keys]
    assert a != [tuple(distributions.sample(dist, 8, k)) for k in keys]
    counts = Counter(a)
    assert set(counts) == {("terminal",), ("file",), ("terminal", "file")}  # never empty
    assert counts[("terminal", "file")] > 20
    none = DistributionConfig(name="n", toolsets={"terminal": 0, "file": 1})
    assert distributions.sample(none, 0, "x") in (["file"],)


@pytest.mark.browser  # balanced draws browser too
def test_toolsets_used_are_recorded_and_offered(make_cfg, tmp_path, run_dir, server):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": f"p{i}"} for i in range(30)])
    run_inprocess(make_cfg("distribution=balanced", dataset=ds), run_dir)
    entries = read_jsonl(run_dir / "trajectories.jsonl")
    assert len({tuple(e["toolsets_used"]) for e in entries}) >= 4  # independent draws per toolset
    for e in entries:
        offered = json.loads(e["conversations"][0]["value"].split("<tools>\n")[1].split("\n</tools>")[0])
        expected = {t.name for t in tools_for(e["toolsets_used"])}
        assert {t["name"] for t in offered} == expected  # the model had exactly the sampled toolsets


def test_no_reasoning_filter_is_switchable(make_cfg, tmp_path, run_dir, server):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": script({"content": "bare"})}, {"prompt": "ok"}])
    _, stats = run_inprocess(make_cfg(dataset=ds), run_dir)
    assert stats["discarded_no_reasoning"] == 1 and stats["prompts"]["ok"] == 1
    _, stats = run_inprocess(make_cfg("filters.require_reasoning=false", dataset=ds), tmp_path / "r2")
    assert stats["prompts"]["ok"] == 2 and stats["prompts"]["discarded"] == 0


def test_statistics_json(make_cfg, tmp_path, run_dir, server):
    rows = [{"prompt": VARIED[i % len(VARIED)](i)} for i in range(8)]
    rows.append({"prompt": script({"content": "no thinking"})})
    rows.append({"prompt": script({"fail": [{"status": 404}]})})
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    _, stats = run_inprocess(make_cfg(dataset=ds), run_dir)
    saved = json.loads((run_dir / "statistics.json").read_text())
    assert saved["prompts"] == {"total": 10, "ok": 8, "completed": 6, "partial": 2, "stopped": 0, "discarded": 1,
                                "failed": 1, "pending": 0, "rejected_lines": 0}  # fmt: skip
    assert saved["stop_reasons"] == {"final_answer": 6, "length": 2}
    assert saved["discarded_by_reason"] == {"no_reasoning": 1} and saved["failed_by_error"] == {"ModelCallError": 1}
    t = saved["tool_statistics"]
    assert t["terminal"]["count"] == 4 and t["terminal"]["success_rate"] == 100.0  # exit 1 is an answer
    assert t["read_file"] == {"count": 4, "success": 2, "failure": 2, "success_rate": 50.0, "failure_rate": 50.0}
    assert t["patch"]["count"] == 0  # zero-filled
    r = saved["reasoning_statistics"]
    assert r["total_assistant_turns"] == r["turns_with_reasoning"] + r["turns_without_reasoning"] == 17
    assert r["turns_without_reasoning"] == 1
    assert (
        saved["usage"]["total_tokens"] > 0
        and saved["api_calls"] == sum(e["api_calls"] for e in read_jsonl(run_dir / "trajectories.jsonl")) + 1
    )
