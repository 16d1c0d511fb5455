"""Checkpoint and resume: exactly once, duplicates, torn lines, discards, config changes."""

from __future__ import annotations

import hashlib
import json
import os
from collections import Counter
from pathlib import Path

from tests.helpers.run import read_jsonl, run_inprocess, script, write_jsonl

NO_REASONING = {"content": "plain answer"}


def prompts_of(path: Path) -> list[str]:
    return [r["conversations"][1]["value"] for r in read_jsonl(path)]


def test_rerun_of_a_finished_run_makes_no_model_call(make_cfg, tmp_path, run_dir, server):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": f"p{i}"} for i in range(6)])
    assert run_inprocess(make_cfg(dataset=ds), run_dir)[0] == 0
    calls = len(server.requests)
    code, stats = run_inprocess(make_cfg(dataset=ds), run_dir)
    assert code == 0 and len(server.requests) == calls
    assert stats["prompts"]["ok"] == 6 and stats["invocations"] == 2
    assert len(read_jsonl(run_dir / "trajectories.jsonl")) == 6


def test_duplicate_prompts_give_one_trajectory_each(make_cfg, tmp_path, run_dir, server):
    rows = [{"prompt": "same"}, {"prompt": "other"}, {"prompt": "same"}, {"prompt": "same"}]
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    # First run only the first two rows, then the whole file: the duplicates must still run.
    run_inprocess(make_cfg("max_samples=2", dataset=ds), run_dir)
    assert sorted(prompts_of(run_dir / "trajectories.jsonl")) == ["other", "same"]
    code, stats = run_inprocess(make_cfg(dataset=ds), run_dir)
    assert code == 0
    entries = read_jsonl(run_dir / "trajectories.jsonl")
    assert [e["conversations"][1]["value"] for e in entries] == ["same", "other", "same", "same"]
    assert [e["prompt_index"] for e in entries] == [0, 1, 2, 3]
    assert len({e["metadata"]["prompt_key"] for e in entries}) == 4
    assert len(server.calls_for("same")) == 3 * 2  # three sessions of two calls, never more


def test_reordered_and_extended_dataset_resumes_by_content(make_cfg, tmp_path, run_dir, server):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": f"p{i}"} for i in range(4)])
    run_inprocess(make_cfg(dataset=ds), run_dir)
    first = len(server.requests)
    rows = [{"prompt": p} for p in ["p3", "new1", "p1", "p0", "p2", "new2"]]
    write_jsonl(ds, rows)
    code, _ = run_inprocess(make_cfg(dataset=ds), run_dir)
    assert code == 0
    assert len(server.requests) - first == 2 * 2  # only new1 and new2 ran
    entries = read_jsonl(run_dir / "trajectories.jsonl")
    assert [e["conversations"][1]["value"] for e in entries] == [r["prompt"] for r in rows]
    assert [e["prompt_index"] for e in entries] == list(range(6))  # positions in the current dataset
    ckpt = json.loads((run_dir / "checkpoint.json").read_text())
    assert ckpt["completed_prompts"] == list(range(6))


def test_discarded_prompts_are_never_paid_twice(make_cfg, tmp_path, run_dir, server):
    rows = [{"prompt": script(NO_REASONING, text="bare")}, {"prompt": "good"}]
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    code, stats = run_inprocess(make_cfg(dataset=ds), run_dir)
    assert code == 0 and stats["discarded_by_reason"] == {"no_reasoning": 1}
    assert len(server.calls_for("bare")) == 1
    for _ in range(2):
        code, stats = run_inprocess(make_cfg(dataset=ds), run_dir)
        assert stats["discarded_by_reason"] == {"no_reasoning": 1} and stats["prompts"]["ok"] == 1
    assert len(server.calls_for("bare")) == 1
    assert prompts_of(run_dir / "trajectories.jsonl") == ["good"]
    discarded = read_jsonl(run_dir / "discarded.jsonl")
    assert len(discarded) == 1 and discarded[0]["discard_reason"] == "no_reasoning"


def test_failed_prompts_are_retried_on_resume_unless_told_not_to(make_cfg, tmp_path, run_dir, server):
    flaky = script({"fail": [{"status": 400}], "content": "ok", "reasoning": "r"}, text="flaky")
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": flaky}, {"prompt": "fine"}])
    code, stats = run_inprocess(make_cfg(dataset=ds), run_dir)
    assert code == 1 and stats["failed_by_error"] == {"ModelCallError": 1}
    fail = read_jsonl(run_dir / "failures.jsonl")[0]
    assert fail["error_type"] == "ModelCallError" and "400" in fail["error"]
    code, stats = run_inprocess(make_cfg("retry_failed=false", dataset=ds), run_dir)
    assert len(server.calls_for("flaky")) == 1 and stats["prompts"]["failed"] == 1
    code, stats = run_inprocess(make_cfg(dataset=ds), run_dir)  # the scripted 400 happens only once
    assert code == 0 and stats["prompts"]["ok"] == 2 and stats["prompts"]["failed"] == 0
    assert len(read_jsonl(run_dir / "trajectories.jsonl")) == 2


def test_torn_last_lines_are_ignored_and_the_prompt_rerun(make_cfg, tmp_path, run_dir, server):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": f"p{i}"} for i in range(3)])
    run_inprocess(make_cfg(dataset=ds), run_dir)
    ledger = run_dir / "ledger.jsonl"
    lines = ledger.read_bytes().splitlines(keepends=True)
    # Simulate a crash while writing the last record: its line is cut in the middle.
    ledger.write_bytes(b"".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2])
    with (run_dir / "batch_0.jsonl").open("ab") as fp:
        fp.write(b'{"prompt_index": 9, "conversations": [{"from"')  # torn trajectory line
    lost = json.loads(lines[-1])["key"]
    before = len(server.requests)
    code, stats = run_inprocess(make_cfg(dataset=ds), run_dir)
    assert code == 0 and len(server.requests) - before == 2  # exactly the lost prompt, again
    assert all(line.endswith(b"\n") for line in ledger.read_bytes().splitlines(keepends=True))
    entries = read_jsonl(run_dir / "trajectories.jsonl")
    assert sorted(e["metadata"]["prompt_key"] for e in entries).count(lost) == 1
    assert [e["prompt_index"] for e in entries] == [0, 1, 2]


def test_resumed_batches_are_numbered_after_old_ones_which_stay_untouched(make_cfg, tmp_path, run_dir, server):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": f"p{i}"} for i in range(5)])
    run_inprocess(make_cfg("batch_size=2", "max_samples=3", dataset=ds), run_dir)
    old = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in run_dir.glob("batch_*.jsonl")}
    assert sorted(old) == ["batch_0.jsonl", "batch_1.jsonl"]
    run_inprocess(make_cfg("batch_size=2", dataset=ds), run_dir)
    now = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in run_dir.glob("batch_*.jsonl")}
    assert sorted(now) == ["batch_0.jsonl", "batch_1.jsonl", "batch_2.jsonl"]
    assert all(now[k] == v for k, v in old.items())
    assert [e["metadata"]["batch_num"] for e in read_jsonl(run_dir / "batch_2.jsonl")] == [2, 2]
    stats = json.loads((run_dir / "statistics.json").read_text())
    assert stats["total_batches"] == 3 and stats["prompts"]["ok"] == 5


def test_statistics_cover_the_whole_run_across_resumes(make_cfg, tmp_path, run_dir, server):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": f"p{i}"} for i in range(6)])
    run_inprocess(make_cfg("max_samples=2", dataset=ds), run_dir)
    run_inprocess(make_cfg("max_samples=4", dataset=ds), run_dir)
    _, stats = run_inprocess(make_cfg(dataset=ds), run_dir)
    entries = read_jsonl(run_dir / "trajectories.jsonl")
    assert stats["prompts"]["ok"] == len(entries) == 6
    assert stats["tool_statistics"]["terminal"]["count"] == sum(e["tool_stats"]["terminal"]["count"] for e in entries)
    assert stats["api_calls"] == sum(e["api_calls"] for e in entries) == 12
    assert stats["usage"]["total_tokens"] == sum(e["usage"]["total_tokens"] for e in entries)
    assert stats["invocations"] == 3


def test_resume_false_on_existing_run_is_a_clear_error(make_cfg, tmp_path, run_dir, server, caplog):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "a"}])
    run_inprocess(make_cfg(dataset=ds), run_dir)
    code, _ = run_inprocess(make_cfg("resume=false", dataset=ds), run_dir)
    assert code == 2
    assert "resume=false" in caplog.text and "delete" in caplog.text


def test_changed_data_config_refuses_unless_forced(make_cfg, tmp_path, run_dir, server, caplog):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "a"}, {"prompt": "b"}])
    run_inprocess(make_cfg("max_samples=1", dataset=ds), run_dir)
    before = len(server.requests)
    code, _ = run_inprocess(make_cfg("model.name=other-model", dataset=ds), run_dir)
    assert code == 2 and len(server.requests) == before
    assert "model.name" in caplog.text and "force_resume=true" in caplog.text
    code, stats = run_inprocess(make_cfg("model.name=other-model", "force_resume=true", dataset=ds), run_dir)
    assert code == 0 and stats["prompts"]["ok"] == 2
    history = read_jsonl(run_dir / "invocations.jsonl")
    assert [h["config"]["model"]["name"] for h in history] == ["local-model", "local-model", "other-model"][
        -len(history) :
    ]


def test_multiset_of_outputs_matches_dataset(make_cfg, tmp_path, run_dir, server):
    rows = [{"prompt": p} for p in ["x", "y", "x", "z", "x", "y"]]
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    run_inprocess(make_cfg("num_workers=3", dataset=ds), run_dir)
    assert Counter(prompts_of(run_dir / "trajectories.jsonl")) == Counter(r["prompt"] for r in rows)


def test_one_run_directory_takes_one_runner_at_a_time(make_cfg, tmp_path, run_dir, server, caplog):
    from hermes_runner.rundir.store import RunStore

    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "a"}])
    holder = RunStore(run_dir)
    holder.lock()
    try:
        code, _ = run_inprocess(make_cfg(dataset=ds), run_dir)
        assert code == 2 and f"pid {os.getpid()}" in caplog.text and server.requests == []
    finally:
        holder.unlock()
    assert run_inprocess(make_cfg(dataset=ds), run_dir)[0] == 0
