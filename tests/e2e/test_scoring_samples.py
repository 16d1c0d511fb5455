"""Scoring with k samples per row (issue 18): best_of_k keeps the best sample, rescoring updates the per-scorer
statistics."""

from __future__ import annotations

import json

from hermes_runner.commands import score
from hermes_runner.run import rescore

from tests.helpers.run import read_jsonl, run_inprocess, script, write_jsonl


def test_best_of_k_keeps_the_best_sample_of_each_row(make_cfg, tmp_path, run_dir, server):
    # a row's samples follow the same script: a python scorer that reads metadata.sample_index ranks them
    rows = [{"prompt": script({"content": f"row {i}", "reasoning": "r"}, text=f"row{i}")} for i in range(2)]
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    cfg = make_cfg(
        "samples_per_prompt=3",
        "+scorer@scorers.s=python",
        f"scorers.s._target_={__name__}.by_sample",
        "filters.best_of_k=true",
        dataset=ds,
    )
    code, stats = run_inprocess(cfg, run_dir)
    assert code == 0 and stats["prompts"]["ok"] == 6
    kept = read_jsonl(run_dir / "trajectories.jsonl")
    assert [(e["prompt_index"], e["metadata"]["sample_index"], e["reward"]) for e in kept] == [(0, 1, 1.0), (1, 1, 1.0)]
    assert sum(1 for p in run_dir.glob("batch_*.jsonl") for _ in p.open()) == 6  # the others stay in the batches


def by_sample(entry: dict, row: dict) -> float:
    """Sample 1 is the best, then 0, then 2."""
    return {0: 0.5, 1: 1.0, 2: 0.0}[entry["metadata"]["sample_index"]]


def test_rescoring_updates_the_scores_in_the_statistics(make_cfg, tmp_path, run_dir):
    rows = [{"prompt": script({"content": "The answer is 42.", "reasoning": "r"}, text="q"), "target": "41"}]
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    cfg = make_cfg("samples_per_prompt=2", "+scorer@scorers.answer=match", dataset=ds)
    assert run_inprocess(cfg, run_dir)[0] == 0
    before = json.loads((run_dir / "statistics.json").read_text())["scores"]["overall"]["answer"]
    assert before["mean"] == 0.0 and before["samples"] == 2
    numeric = [
        "+scorer@scorers.answer=match",
        "scorers.answer.match.mode=numeric",
        "scorers.answer.match.abs_tolerance=2",
    ]
    assert rescore.rescore(run_dir, numeric, force=True)["scored"] == 2
    after = json.loads((run_dir / "statistics.json").read_text())["scores"]["overall"]["answer"]
    assert (after["mean"], after["samples"], after["pass_at_1"]) == (1.0, 2, 1.0)  # replaced, not added


def test_hermes_score_rebuilds_the_report_with_the_new_scorer(make_cfg, tmp_path, run_dir, capsys):
    rows = [{"prompt": script({"content": "The answer is 42.", "reasoning": "r"}, text="q"), "target": "42"}]
    cfg = make_cfg(
        "samples_per_prompt=3", "+scorer@scorers.answer=match", dataset=write_jsonl(tmp_path / "d.jsonl", rows)
    )
    assert run_inprocess(cfg, run_dir)[0] == 0
    page = (run_dir / "report.html").read_text()
    assert "<th>answer</th>" in page and "<th>second</th>" not in page and "pass^3" in page
    assert score.main([str(run_dir), "+scorer@scorers.second=match", "scorers.second.match.mode=numeric"]) == 0
    assert f"Report: {run_dir / 'report.html'}" in capsys.readouterr().out
    page = (run_dir / "report.html").read_text()
    assert "<th>answer</th>" in page and "<th>second</th>" in page  # the new scorer's rows, beside the old
    by_k = page.split("pass@k and pass^k for every k", 1)[1]
    assert by_k.count("<th>second</th>") == 3  # k = 1, 2, 3
