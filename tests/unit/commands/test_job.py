"""The Hydra job's printing (commands/job.py): the plan, the results table, the checks before a run dir is made."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from omegaconf import OmegaConf
from rich.console import Console

from hermes_runner.commands.job import (
    check_run_name,
    load_distributions,
    print_plan,
    print_results,
    print_summary,
    summary_lines,
)
from hermes_runner.errors import ConfigError
from hermes_runner.run.plan import Plan
from hermes_runner.util.console import stdout_console

from tests.helpers.inprocess import run_cfg


def console() -> Console:
    return Console(record=True, width=200, soft_wrap=True)


def test_a_run_name_that_is_no_plain_directory_name_is_refused():
    check_run_name(OmegaConf.create({"run_name": "my_run"}))
    with pytest.raises(ConfigError):
        check_run_name(OmegaConf.create({"run_name": "../../x"}))
    with pytest.raises(ConfigError):
        check_run_name(OmegaConf.create({}), ["ok", "a/b"])  # a sweep's values


def test_the_shipped_distributions_load_with_their_schema():
    names = {d.name for d in load_distributions()}
    assert {"default", "minimal", "terminal_only"} <= names


def test_the_plan_line_says_what_runs(tmp_path):
    c = console()
    plan = Plan(total=6, done=2, to_run=4, retry=1, skipped_failed=0, rejected=1)
    print_plan(c, run_cfg(tmp_path), plan, Path("outputs/unit"))
    text = c.export_text()
    assert text.startswith("unit: 6 prompts in scope, 2 already done, 4 to run (1 retries of failed prompts), 1 bad")
    assert "outputs/unit/rejected.jsonl" in text


def test_the_summary_adds_up_and_says_how_to_retry(tmp_path):
    stats = {
        "prompts": {"ok": 3, "completed": 2, "partial": 1, "stopped": 0, "discarded": 1, "failed": 1, "pending": 0,
                    "total": 5},
        "discarded_by_reason": {"no_reasoning": 1}, "failed_by_error": {"PromptTimeout": 1},
    }  # fmt: skip
    lines = summary_lines(stats, tmp_path, retry_failed=False)
    assert "3 kept = 2 completed + 1 partial + 0 stopped; 1 discarded (no_reasoning 1); 1 failed" in lines[0]
    assert "retry_failed=true" in lines[-1] and str(tmp_path / "failures.jsonl") in lines[-1]


def test_the_summary_counts_calls_sent_and_never_answered(tmp_path):
    stats = {
        "prompts": {"ok": 1, "completed": 1, "partial": 0, "stopped": 0, "discarded": 0, "failed": 0, "pending": 3,
                    "total": 4},
        "discarded_by_reason": {}, "failed_by_error": {},
        "model_calls": {"started": 6, "answered": 2, "failed": 0, "unanswered": 4},
    }  # fmt: skip
    assert any(ln.startswith("  4 model calls were sent and never answered") for ln in summary_lines(stats, tmp_path))
    stats["model_calls"]["unanswered"] = 0
    assert not any("never answered" in ln for ln in summary_lines(stats, tmp_path))


def test_the_results_table_or_why_there_is_none():
    c = console()
    print_results(c, {"results": []})
    assert "no scores recorded" in c.export_text()
    row = {"model": "m", "scorer": "answer", "n": 4, "k": 2, "pass_at_1": 0.5, "pass_at_1_se": 0.1, "pass_at_k": 0.75,
           "pass_at_k_se": None, "tokens": 1200, "cost_usd": 0.01}  # fmt: skip
    print_results(c, {"results": [row]})
    text = c.export_text()
    assert "pass@2" in text and "0.500 ± 0.100" in text and "0.750" in text and "1,200" in text
    assert "for every k" not in text  # a statistics.json of an older runner: no pass^k, no table by k


def test_the_results_table_gives_pass_hat_k_and_every_k():
    c = console()
    by_k = [
        {"k": 1, "rows": 3, "pass_at_k": 0.5, "pass_at_k_se": 0.1, "pass_hat_k": 0.5, "pass_hat_k_se": 0.1},
        {"k": 2, "rows": 3, "pass_at_k": 0.75, "pass_at_k_se": 0.2, "pass_hat_k": 0.25, "pass_hat_k_se": 0.05},
    ]
    row = {"model": "m", "scorer": "answer", "n": 6, "k": 2, "pass_at_1": 0.5, "pass_at_1_se": 0.1, "pass_at_k": 0.75,
           "pass_at_k_se": 0.2, "pass_hat_k": 0.25, "pass_hat_k_se": 0.05, "by_k": by_k, "tokens": 1, "cost_usd": 0}  # fmt: skip
    print_results(c, {"results": [row]})
    text = c.export_text()
    assert "pass^2" in text and "0.250 ± 0.050" in text and "for every k" in text
    per_k = text.split("for every k", 1)[1]
    assert "0.750 ± 0.200" in per_k and "0.250 ± 0.050" in per_k and "0.500 ± 0.100" in per_k


@pytest.mark.parametrize("width", [40, 80, 123])
def test_the_end_summary_wraps_at_word_boundaries_on_a_terminal(width):
    """On a terminal of any width every printed line fits and no word is cut; piped, each line stays whole."""
    stats = {
        "prompts": {"ok": 30, "completed": 20, "partial": 4, "stopped": 6, "discarded": 2, "failed": 3,
                    "pending": 0, "total": 35},
        "stopped_reasons": {"max_turns": 6}, "discarded_by_reason": {"no_reasoning": 2},
        "failed_by_error": {"PromptTimeout": 3}, "stop_reasons": {"final_answer": 20, "max_turns": 6},
        "invocation": {"prompts": 35, "seconds": 12.5, "prompts_per_s": 2.8, "retries": 1, "rate_limited": 0,
                       "backoff_seconds": 0.0},
        "api_calls": 140, "tool_statistics": {}, "trajectories": 30, "duration_seconds": 12.5,
        "reasoning_statistics": {"coverage_percent": 50.0, "total_assistant_turns": 100},
        "usage": {"total_tokens": 12000, "prompt_tokens": 10000, "completion_tokens": 2000, "cost_usd": 0.0},
    }  # fmt: skip
    out = io.StringIO()
    term = stdout_console(file=out, force_terminal=True, width=width, color_system=None)
    print_summary(term, stats, Path("outputs/unit"))
    printed = [line.rstrip() for line in out.getvalue().splitlines() if line.strip()]
    whole = io.StringIO()
    print_summary(stdout_console(file=whole, width=width), stats, Path("outputs/unit"))  # a file: no wrapping
    words = whole.getvalue().split()
    assert len(printed) > len(whole.getvalue().strip().splitlines())  # (it did wrap)
    assert all(len(line) <= width for line in printed), printed
    assert " ".join(printed).split() == words  # the same words in the same order: none cut in two
