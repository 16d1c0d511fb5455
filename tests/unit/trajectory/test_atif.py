"""Trajectory entries (both layouts) as ATIF trajectories: steps, calls and their results, metrics, subagents."""

from __future__ import annotations

import json

import pytest

from hermes_runner.agent.loop import StopReason
from hermes_runner.config import OutputLayout
from hermes_runner.errors import ExportError
from hermes_runner.tools.catalog import tool_names
from hermes_runner.trajectory import entry as entries
from hermes_runner.trajectory.atif import SCHEMA_VERSION, step_metrics, to_atif
from hermes_runner.trajectory.export import ATIF_INDEX, export, push_to_hub
from hermes_runner.trajectory.reproduce import export_one

from tests.helpers import small_run
from tests.helpers.inprocess import result
from tests.helpers.run import read_jsonl


def call(cid: str, name: str, **arguments) -> dict:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(arguments)}}


def reply(cid: str, name: str, content: dict) -> dict:
    return {"role": "tool", "tool_call_id": cid, "name": name, "content": json.dumps(content)}


PARALLEL = [
    {"role": "user", "content": "write then read"},
    {
        "role": "assistant",
        "content": "",
        "reasoning": "both at once",
        "tool_calls": [call("A", "write_file", path="f.txt", content="data"), call("B", "terminal", command="ls")],
    },
    reply("A", "write_file", {"bytes_written": 4}),
    reply("B", "terminal", {"output": "f.txt", "exit_code": 0}),
    {"role": "assistant", "content": "f.txt holds data", "reasoning": "seen"},
]
MOA_OUT = {
    "success": True,
    "response": "42",
    "models_used": {"reference_models": ["ref-a", "ref-b"], "aggregator_model": "agg"},
    "processing_time_s": 0.5,
}


def make(history: list[dict], layout=OutputLayout.hermes, toolsets=("terminal", "file"), **kw) -> dict:
    res = result("write then read", toolsets)
    res.history = history
    res.stop_reason = kw.pop("stop_reason", StopReason.final_answer)
    return entries.entry(
        res, batch_num=0, model="m-1", tool_names=tool_names(), system_prompt="SYS", layout=layout, **kw
    )


def atif(entry: dict, **kw) -> dict:
    return to_atif(entry, session_id="run/key", version="9.9", **kw)


@pytest.mark.parametrize("layout", list(OutputLayout))
def test_parallel_calls_are_one_agent_step_with_a_result_per_call(layout):
    t = atif(make(PARALLEL, layout))
    assert t["schema_version"] == SCHEMA_VERSION and t["session_id"] == t["trajectory_id"] == "run/key"
    assert (
        t["agent"]["name"] == "hermes-runner" and t["agent"]["version"] == "9.9" and t["agent"]["model_name"] == "m-1"
    )
    assert {d["function"]["name"] for d in t["agent"]["tool_definitions"]} >= {"terminal", "write_file"}
    steps = t["steps"]
    assert [(s["step_id"], s["source"]) for s in steps] == [(1, "system"), (2, "user"), (3, "agent"), (4, "agent")]
    assert steps[0]["message"] == "SYS" and steps[1]["message"] == "write then read"  # no tool listing in the text
    act = steps[2]
    assert act["message"] == "" and act["reasoning_content"] == "both at once"
    assert act["tool_calls"] == [
        {"tool_call_id": "A", "function_name": "write_file", "arguments": {"path": "f.txt", "content": "data"}},
        {"tool_call_id": "B", "function_name": "terminal", "arguments": {"command": "ls"}},
    ]
    results = act["observation"]["results"]
    assert [r["source_call_id"] for r in results] == ["A", "B"]
    assert json.loads(results[1]["content"]) == {"output": "f.txt", "exit_code": 0}
    assert steps[3] == {"step_id": 4, "source": "agent", "message": "f.txt holds data", "reasoning_content": "seen"}
    assert "subagent_trajectories" not in t and t["final_metrics"]["total_steps"] == 4


def test_the_entry_is_kept_whole_in_extra_and_max_turns_stops_show():
    e = make(PARALLEL[:4], stop_reason=StopReason.max_turns, discard_reason="too short", reward=0.5)
    e["provenance"] = {"template_sha256": "abc"}  # (added by the provenance work: carried as it is)
    t = atif(e, disposition="discarded")
    extra = t["extra"]
    assert extra["disposition"] == "discarded" and extra["discard_reason"] == "too short"
    assert (extra["stop_reason"], extra["completed"], extra["reward"]) == ("max_turns", False, 0.5)
    assert extra["provenance"] == {"template_sha256": "abc"} and extra["metadata"]["model"] == "m-1"
    assert "conversations" not in extra and extra["scores"] == e["scores"]
    assert t["steps"][-1]["source"] == "agent" and len(t["steps"][-1]["observation"]["results"]) == 2


def test_final_metrics_are_the_entry_usage_and_the_cost_only_when_known():
    e = make(PARALLEL)
    e["usage"] = {"prompt_tokens": 30, "completion_tokens": 7, "cached_tokens": 4, "total_tokens": 37,
                  "reasoning_tokens": 2, "cost_usd": 0.0}  # fmt: skip
    fm = atif(e)["final_metrics"]
    assert (fm["total_prompt_tokens"], fm["total_completion_tokens"], fm["total_cached_tokens"]) == (30, 7, 4)
    assert "total_cost_usd" not in fm and fm["extra"]["total_tokens"] == 37
    e["usage"]["cost_usd"] = 0.25
    assert atif(e)["final_metrics"]["total_cost_usd"] == 0.25


TIMELINE = [
    {"k": "model", "t": 0.0, "dur": 0.2, "error": "ModelCallError"},  # a failed call: no step of its own
    {"k": "model", "t": 0.3, "dur": 0.1, "in": 20, "out": 5, "retries": 1, "finish": "tool_calls"},
    {"k": "tool", "n": "terminal", "t": 0.4, "dur": 0.1, "ok": True},
    {"k": "model", "t": 0.6, "dur": 0.1, "in": 40, "out": 3, "retries": 0, "finish": "stop", "cached": True},
]


def test_per_step_metrics_come_from_the_timeline_when_it_has_one_call_per_agent_step():
    steps = atif(make(PARALLEL), timeline=TIMELINE)["steps"]
    assert steps[2]["metrics"] == {
        "prompt_tokens": 20,
        "completion_tokens": 5,
        "extra": {"duration_s": 0.1, "retries": 1, "finish_reason": "tool_calls"},
    }
    assert steps[3]["metrics"]["prompt_tokens"] == 40 and steps[3]["metrics"]["extra"]["replayed_from_cache"]
    assert steps[2]["llm_call_count"] == steps[3]["llm_call_count"] == 1
    # another number of calls than of agent steps: no step gets another's numbers
    assert step_metrics(TIMELINE[:2], 2) == [] and step_metrics(None, 2) == []
    assert all("metrics" not in s for s in atif(make(PARALLEL), timeline=TIMELINE[:2])["steps"])


def moa_history(out: dict) -> list[dict]:
    return [
        {"role": "user", "content": "hard"},
        {
            "role": "assistant",
            "content": "",
            "reasoning": "ask",
            "tool_calls": [call("M", "mixture_of_agents", user_prompt="6x7?")],
        },  # fmt: skip
        reply("M", "mixture_of_agents", out),
        {"role": "assistant", "content": "42", "reasoning": "ok"},
    ]


def test_a_tool_that_ran_a_model_is_an_embedded_subagent_linked_from_its_result():
    t = atif(make(moa_history(MOA_OUT), toolsets=("moa",)))
    (sub,) = t["subagent_trajectories"]
    (ref,) = t["steps"][2]["observation"]["results"][0]["subagent_trajectory_ref"]
    assert ref["trajectory_id"] == sub["trajectory_id"] == "run/key#M" and sub["session_id"] == "run/key"
    assert sub["agent"] == {
        "name": "hermes-runner/mixture_of_agents",
        "version": "9.9",
        "model_name": "agg",
        "extra": {"reference_models": ["ref-a", "ref-b"]},
    }
    assert [(s["source"], s["message"]) for s in sub["steps"]] == [("user", "6x7?"), ("agent", "42")]
    assert sub["extra"]["tool_call_id"] == "M" and sub["extra"]["processing_time_s"] == 0.5
    failed = {"success": False, "error": "only 0 of 2 reference models answered", "models_used": {}}
    t = atif(make(moa_history(failed), toolsets=("moa",)))
    assert "subagent_trajectories" not in t
    assert "subagent_trajectory_ref" not in t["steps"][2]["observation"]["results"][0]


def test_a_vision_call_is_a_subagent_too():
    history = [
        {"role": "user", "content": "look"},
        {
            "role": "assistant",
            "content": "",
            "reasoning": "see",
            "tool_calls": [call("V", "vision_analyze", image_url="a.png", question="What is it?")],
        },  # fmt: skip
        reply("V", "vision_analyze", {"success": True, "analysis": "A red square."}),
    ]
    (sub,) = atif(make(history, toolsets=("vision",)))["subagent_trajectories"]
    assert [s["message"] for s in sub["steps"]] == ["What is it?", "A red square."]
    assert sub["agent"] == {"name": "hermes-runner/vision_analyze", "version": "9.9"} and "image_url" in sub["notes"]


def test_a_result_that_answers_no_call_of_its_step_keeps_its_id_in_extra():
    e = make(PARALLEL, OutputLayout.structured)
    e["conversations"][3]["value"] = e["conversations"][3]["value"].replace(
        '"tool_call_id": "B"', '"tool_call_id": "Z"'
    )
    results = atif(e)["steps"][2]["observation"]["results"]
    assert results[0]["source_call_id"] == "A"
    assert "source_call_id" not in results[1] and results[1]["extra"] == {"tool_call_id": "Z", "name": "terminal"}


def test_an_entry_without_turns_is_still_a_trajectory_of_one_step():
    t = atif({"prompt_index": 3, "conversations": [], "metadata": {}, "usage": {}})
    assert t["steps"] == [{"step_id": 1, "source": "system", "message": ""}] and "model_name" not in t["agent"]


def test_the_export_writes_a_file_per_trajectory_and_an_index_that_names_the_failures(tmp_path):
    run = small_run.write(tmp_path / "run")  # one kept, one discarded, one failed prompt
    where, counts = export(run, "atif", discarded=True)
    assert where == run / "export" / "atif" and counts == {"kept": 1, "discarded": 1}
    index = read_jsonl(where / ATIF_INDEX)
    assert [(i["status"], i["prompt_index"]) for i in index] == [("ok", 0), ("discarded", 1), ("failed", 2)]
    assert index[2]["file"] is None and index[2]["error_type"] == "PromptTimeout" and "5s" in index[2]["error"]
    kept = json.loads((where / index[0]["file"]).read_text())
    assert kept["session_id"] == f"run/{index[0]['key']}" and kept["extra"]["disposition"] == "kept"
    assert kept["steps"][1]["tool_calls"][0]["tool_call_id"] == "c1"
    assert kept["steps"][1]["observation"]["results"][0]["source_call_id"] == "c1"
    # Again without the discards, through the command's path (built aside, then installed): their file goes.
    export_one(run, "atif", None, {}, manifest=False)
    assert sorted(p.name for p in where.glob("*.json")) == [index[0]["file"]]
    assert [i["status"] for i in read_jsonl(where / ATIF_INDEX)] == ["ok", "failed"]


def test_the_export_refuses_discards_in_other_formats_and_a_hub_push(tmp_path):
    run = small_run.write(tmp_path / "run")
    with pytest.raises(ExportError, match="use it with --to atif"):
        export(run, "openai", discarded=True)
    with pytest.raises(ExportError, match="hf upload user/x"):
        push_to_hub(run / "export" / "atif", "atif", "user/x", private=False)
