"""The parts of the report page (report/summary, plots, viewer, page) on a small run dir written by the package."""

from __future__ import annotations

import json
import re

import pytest

from hermes_runner.report.page import build_report, render, script_json
from hermes_runner.report.plots import comparison_charts, run_charts
from hermes_runner.report.summary import Job, by_k_rows, compare_table, score_rows, summary
from hermes_runner.report.viewer import Clipper, viewer_data
from hermes_runner.rundir.reader import RunData

from tests.helpers import small_run


@pytest.fixture
def job(tmp_path) -> Job:
    return Job("run", RunData.load(small_run.write(tmp_path / "run")))


def test_the_summary_counts_every_outcome(job):
    s = summary(job)
    assert s["counts"]["completed"] == 1 and s["counts"]["discarded"] == 1 and s["counts"]["failed"] == 1
    assert (s["done"], s["kept"], s["tool_calls"], s["tool_success_pct"]) == (3, 1, 1, 100.0)
    assert s["discarded_by_reason"] == {"no_reasoning": 1} and s["failed_by_error"] == {"PromptTimeout": 1}
    assert s["live"] and s["total"] is None and s["pending"] is None  # no statistics.json: a run still going


def test_a_run_has_its_charts_and_a_sweep_compares_its_jobs(job):
    charts = run_charts(job, summary(job))
    titles = [c.title for c in charts]
    assert titles[:4] == ["Outcomes", "Tool calls and success rate per tool", "Assistant turns per trajectory",
                          "API calls per prompt"]  # fmt: skip
    assert titles[-2:] == ["Reasoning coverage", "Time per prompt"]
    assert all(c.svg.startswith("<svg") for c in charts if c.title != "Toolsets: sampled vs. used")
    assert charts[0].note == "3 prompts done so far" and "kept trajectories" in charts[1].note
    other = Job("other", job.run, "#2")
    summs = [summary(job), summary(other)]
    assert comparison_charts([job, other], summs) and compare_table(summs)


def test_the_viewer_shows_each_prompt_once_with_its_messages_or_error(job):
    data = viewer_data([job], max_trajectories=10, max_chars=200)
    items = {i["st"]: i for i in data["items"]}
    assert (data["shown"], data["total"], set(items)) == (3, 3, {"completed", "discarded", "failed"})
    done = items["completed"]
    assert done["tools"] == ["terminal"] and done["prompt"] == "list the files" and done["tool_errors"] == 0
    assert [m["r"] for m in done["msgs"]][0] == "user" and "head" in done and "entry" in done["raw"]
    assert json.loads(data["heads"][done["head"]])  # the system turn and tools, shared by index
    failed = items["failed"]
    assert [m["r"] for m in failed["msgs"]] == ["user", "error"] and "PromptTimeout" in failed["msgs"][1]["c"]
    assert "failure" in failed["raw"] and "model" not in failed
    assert viewer_data([job], max_trajectories=0, max_chars=200)["items"] == []


def test_a_text_is_clipped_with_where_to_find_the_rest():
    clip = Clipper(100)
    assert clip("short", "; see x") == "short"
    cut = clip("a" * 1000, "; see x")
    assert len(cut) < 1000 and "see x" in cut


def test_the_page_embeds_its_data_safely_and_is_written_where_asked(job, tmp_path):
    text = script_json({"s": "</script><!-- & \u2028"})
    assert (
        "<" not in text and ">" not in text and "&" not in text and json.loads(text) == {"s": "</script><!-- & \u2028"}
    )
    html = render(tmp_path, [job], False, 10, 200)
    assert html.lower().startswith("<!doctype html>") and len(re.findall(r"<svg", html)) >= 5
    target = build_report(job.run.dir, tmp_path / "page.html")
    assert target == tmp_path / "page.html" and "list the files" in target.read_text()


def test_the_jobs_side_by_side_give_pass_at_k_and_pass_hat_k_per_scorer():
    curve = [
        {"k": 1, "rows": 2, "pass_at_k": 0.5, "pass_at_k_se": 0.5, "pass_hat_k": 0.5, "pass_hat_k_se": 0.5},
        {"k": 2, "rows": 2, "pass_at_k": 0.75, "pass_at_k_se": 0.25, "pass_hat_k": 0.25, "pass_hat_k_se": None},
    ]
    est = {"mean": 0.5, "mean_se": 0.5, "pass_at_1": 0.5, "pass_at_1_se": 0.5, "k": 2, "pass_at_k": 0.75,
           "pass_at_k_se": 0.25, "pass_hat_k": 0.25, "pass_hat_k_se": None, "samples": 4, "by_k": curve}  # fmt: skip
    rows = {r["metric"]: r["cells"] for r in score_rows([{"scores_k": 2, "scores_overall": {"answer": est}}, {}])}
    assert rows["answer pass@2"] == ["0.750 ± 0.250", "–"] and rows["answer pass^2"] == ["0.250", "–"]
    per_k = by_k_rows({"answer": est})
    assert [(r["k"], r["pass_at_k"], r["pass_hat_k"]) for r in per_k] == [(1, "0.500 ± 0.500", "0.500 ± 0.500"),
                                                                          (2, "0.750 ± 0.250", "0.250")]  # fmt: skip
