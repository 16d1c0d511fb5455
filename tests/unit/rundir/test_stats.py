"""RunStats over ledger records: how a prompt answered at a limit counts in pass@k (limits.at_limit)."""

from __future__ import annotations

import pytest

from hermes_runner.rundir.stats import RunStats


def rec(key: str, passed: bool, **extra) -> dict:
    score = {"name": "v", "kind": "verify", "value": float(passed), "passed": passed, "error": None}
    return {
        "key": key,
        "status": "ok",
        "batch": 0,
        "completed": True,
        "stop": "final_answer",
        "scores": [score],
    } | extra


@pytest.mark.parametrize(("counted", "pass_at_1", "rows"), [("scored", 1.0, 3), ("fail", 1 / 3, 3), ("drop", 1.0, 1)])
def test_a_prompt_at_a_limit_counts_as_limits_at_limit_says(counted, pass_at_1, rows):
    s = RunStats()
    s.add(rec("a", True))
    s.add(rec("b", True, completed=False, partial=True, stop="timeout", at_limit=counted))
    s.add(rec("c", True, completed=False, stop="max_turns", at_limit=counted))
    overall = s.scores.summary(1)["overall"]["v"]
    assert (overall["pass_at_1"], overall["rows"]) == (pytest.approx(pass_at_1, abs=1e-6), rows)
    assert s.at_limit == {"timeout": 1, "max_turns": 1} and s.at_limit_counted == {counted: 2}
    assert (s.ok, s.completed, s.partial, s.stopped) == (3, 1, 1, 1)  # the rows are kept whatever pass@k does


def test_rescored_scores_of_a_prompt_at_a_limit_count_as_its_first_ones_did():
    s = RunStats()
    s.add(rec("b", False, stop="timeout", at_limit="fail"))
    new = rec("b", True, stop="timeout", at_limit="fail")
    s.add({**new, "status": "rescored", "prev_scores": rec("b", False)["scores"]})
    overall = s.scores.summary(1)["overall"]["v"]
    assert (overall["samples"], overall["passed"]) == (1, 0)
