"""The Inspect eval log of a run (trajectory/inspect_log.py): its zip members and how entries map to samples.

tests/e2e/test_export_inspect.py reads a real run's log with inspect-ai itself and opens it in `inspect view`."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from hermes_runner.errors import ExportError
from hermes_runner.rundir.reader import RunData
from hermes_runner.trajectory import inspect_log
from hermes_runner.trajectory.export import export

from tests.helpers import small_run


@pytest.fixture
def run(tmp_path: Path) -> RunData:
    return RunData.load(small_run.write(tmp_path / "run"))


def members(path: Path) -> dict[str, object]:
    with zipfile.ZipFile(path) as zf:
        return {name: json.loads(zf.read(name)) for name in zf.namelist()}


def test_a_run_is_one_eval_file_with_every_sample(run: RunData, tmp_path: Path) -> None:
    path, counts = export(run.dir, "inspect")
    assert path == run.dir / "export" / "inspect" / "run.eval" and counts == {"samples": 3}
    got = members(path)
    names = sorted(n for n in got if n.startswith("samples/"))
    assert len(names) == 3 and all(n.endswith("_epoch_1.json") for n in names)
    assert {"header.json", "summaries.json", "_journal/start.json"} <= set(got)
    head = got["header.json"]
    # (small_run writes no statistics.json: a run that did not finish, so Inspect's "started")
    assert head["version"] == 2 and head["status"] == "started" and "samples" not in head
    assert head["eval"]["task"] == "run" and head["eval"]["config"]["epochs"] == 1
    assert head["results"]["total_samples"] == 3 and head["results"]["completed_samples"] == 2
    by_state = {s["metadata"]["disposition"]: s for s in got["summaries.json"]}
    assert set(by_state) == {"kept", "discarded", "failed"}
    assert by_state["failed"]["error"] == "PromptTimeout: the prompt took longer than 5s"
    assert by_state["kept"]["error"] is None and by_state["kept"]["message_count"] == 4


def test_messages_carry_reasoning_tool_calls_and_results(run: RunData) -> None:
    kept = next(s for s in inspect_log.samples(run) if s["metadata"]["disposition"] == "kept")
    user, call, result, answer = kept["messages"]
    assert user == {"role": "user", "content": "list the files"}
    assert call["content"] == [{"type": "reasoning", "reasoning": "look first"}]
    assert call["tool_calls"] == [{"id": "c1", "function": "terminal", "arguments": {"command": "ls"}}]
    assert (result["role"], result["tool_call_id"], result["function"]) == ("tool", "c1", "terminal")
    assert result["error"] is None
    assert answer["content"][-1] == {"type": "text", "text": "There is a.txt."}
    assert kept["output"]["completion"] == "There is a.txt." and kept["output"]["choices"][0]["stop_reason"] == "stop"
    assert kept["scores"] is None  # no scorer judged it: no Inspect score at all


def test_scores_epochs_usage_and_provenance_of_an_entry(run: RunData) -> None:
    key, rec = next((k, r) for k, r in run.final.items() if r["status"] == "ok")
    _, entry = next(run.entries([key]))
    rec = {**rec, "row": key, "sample": 2}  # the third sample of its row
    entry["scores"] = [
        {"name": "answer", "kind": "match", "value": 1.0, "passed": True, "explanation": "target found", "error": ""},
        {"name": "judge", "kind": "judge", "value": 0.0, "passed": False, "explanation": "", "error": "HTTP 500"},
    ]
    entry["usage"] = {"prompt_tokens": 10, "completion_tokens": 4, "cached_tokens": 3, "cost_usd": 0.5}
    entry["provenance"] = {"template_sha256": "abc"}
    sample = inspect_log.entry_sample(run, key + "~s2", rec, entry)
    assert (sample["id"], sample["epoch"]) == (key, 3)
    assert sample["scores"]["answer"]["value"] == 1.0 and sample["scores"]["answer"]["explanation"] == "target found"
    assert sample["scores"]["judge"]["explanation"] == "HTTP 500" and sample["scores"]["judge"]["metadata"]["error"]
    assert sample["model_usage"]["m"] == {
        "input_tokens": 10,
        "output_tokens": 4,
        "total_tokens": 14,
        "input_tokens_cache_read": 3,
        "reasoning_tokens": 0,
        "total_cost": 0.5,
    }
    assert sample["metadata"]["provenance"] == {"template_sha256": "abc"}
    result = inspect_log.results([sample])["scores"]
    assert [(r["name"], r["scored_samples"], r["unscored_samples"]) for r in result] == [
        ("answer", 1, 0),
        ("judge", 0, 1),
    ]
    assert result[0]["metrics"]["accuracy"]["value"] == 1.0 and "mean" not in result[1]["metrics"]


def test_a_failed_tool_call_is_a_tool_error(run: RunData) -> None:
    key = next(k for k, r in run.final.items() if r["status"] == "ok")
    rec, entry = next(run.entries([key]))
    for turn in entry["conversations"]:
        if turn["from"] == "tool":
            turn["value"] = turn["value"].replace('"exit_code": 0}', '"exit_code": 127, "error": "ls: not found"}')
    result = next(m for m in inspect_log.entry_sample(run, key, rec, entry)["messages"] if m["role"] == "tool")
    assert result["error"] == {"type": "unknown", "message": "ls: not found"}


def test_a_conversation_stopped_by_a_limit_has_its_inspect_limit(run: RunData) -> None:
    key = next(k for k, r in run.final.items() if r["status"] == "ok")
    rec, entry = next(run.entries([key]))
    assert inspect_log.entry_sample(run, key, rec, entry)["limit"] is None  # it ended with an answer
    run.invocations = [{"config": {"max_turns": 7, "limits": {"prompt_max_tokens": None, "timeout_s": 30}}}]
    stopped = inspect_log.entry_sample(run, key, rec, {**entry, "stop_reason": "max_turns"})
    assert stopped["limit"] == {"type": "turn", "limit": 7.0, "reason": "max_turns"}
    assert inspect_log.summary(stopped)["limit"] == "turn"
    assert inspect_log.entry_sample(run, key, rec, {**entry, "stop_reason": "token_limit"})["limit"]["type"] == "token"
    timed_out = inspect_log.entry_sample(run, key, rec, {**entry, "stop_reason": "timeout"})
    assert timed_out["limit"] == {"type": "time", "limit": 30.0, "reason": "timeout"}  # limits.timeout_s: wall clock


@pytest.mark.parametrize(
    ("dataset_file", "name"),
    [("data/qa.jsonl", "qa"), ("hf:org/gsm8k", "org/gsm8k"), ("out/saved_ds", "saved_ds"), ("", None)],
)
def test_the_dataset_name(run: RunData, dataset_file: str, name: str | None) -> None:
    run.manifest["data_config"] = {"dataset_file": dataset_file}
    assert inspect_log.spec(run, [])["dataset"]["name"] == name


@pytest.mark.parametrize("option", [{"min_reward": 1.0}, {"best": True}, {"only_completed": True}])
def test_row_filters_do_not_apply_to_the_whole_run_log(run: RunData, option: dict) -> None:
    with pytest.raises(ExportError, match="every sample of the run"):
        export(run.dir, "inspect", **option)
