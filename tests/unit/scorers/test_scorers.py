"""The scorers on their own (issue 18): match in each mode, judge verdicts, python checks, the score record's
schema, the scorer config checks, best_of_k, the dataset row of an entry."""

from __future__ import annotations

import asyncio
import dataclasses
import json

import pytest

from hermes_runner.config import MatchMode, ScorerConfig, ScorerKind, check
from hermes_runner.errors import ConfigError
from hermes_runner.scorers import Job, Score, Scorers, open_scorers, row_from_entry
from hermes_runner.scorers.judge import parse_verdict
from hermes_runner.scorers.match import MatchScorer, last_number
from hermes_runner.scorers.python import PythonScorer
from hermes_runner.trajectory.entry import SCORE_TYPES, best_of_k, features

from tests.helpers.run import compose_cfg


def entry_with(answer_text: str) -> dict:
    return {
        "conversations": [
            {"from": "system", "value": "sys"},
            {"from": "human", "value": "q"},
            {"from": "gpt", "value": f"<think>\nhm\n</think>\n{answer_text}"},
        ],
        "metadata": {"row_fields": "{}", "image": "", "cwd": ""},
    }


def match(mode: str = "includes", **opts) -> MatchScorer:
    cfg = ScorerConfig(kind=ScorerKind.match)
    cfg.match = dataclasses.replace(cfg.match, mode=MatchMode(mode), **opts)
    return MatchScorer("m", cfg)


def judge_one(scorer, answer_text: str, target: object) -> Score:
    scorers = Scorers({scorer.name: scorer.cfg}, [scorer])
    job = Job(entry_with(answer_text), {"prompt": "q", "target": target})
    return asyncio.run(scorers.score(job))[0]


# -- match, in each mode ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "answer_text", "target", "ok"),
    [
        ("includes", "The capital is   PARIS, of course.", "paris", True),
        ("includes", "It is Lyon.", "Paris", False),
        ("exact", "  42 ", "42", True),
        ("exact", "42.", "42", False),
        ("regex", "Result: x=17", r"x=\d+", True),
        ("regex", "Result: none", r"x=\d+", False),
        ("numeric", "so the total is 1,234.5 dollars", "1234.5", True),
        ("numeric", "about 3.14159", "3.1416", False),
        ("numeric", "no number here", "7", False),
    ],
)
def test_match_modes(mode, answer_text, target, ok):
    s = judge_one(match(mode), answer_text, target)
    assert (s.value, s.passed, s.error) == (float(ok), ok, ""), s


def test_match_numeric_tolerance_and_answer_pattern():
    assert judge_one(match("numeric", abs_tolerance=1e-3), "about 3.14159", "3.1416").passed
    assert judge_one(match("numeric", rel_tolerance=0.01), "99.5", "100").passed
    s = judge_one(match("exact", answer_pattern=r"Answer: (\w+)"), "I think... Answer: blue", "blue")
    assert s.passed
    assert last_number("from 2 to -3e2") == -300.0


def test_match_without_target_is_an_error_record_not_a_crash():
    s = judge_one(match(), "anything", None)
    assert (s.value, s.passed) == (0.0, False) and "no `target`" in s.error
    s = judge_one(match("regex"), "x", "(")
    assert "not a regular expression" in s.error


# -- judge and python units ---------------------------------------------------------------------------------


def test_judge_verdicts_are_parsed_or_refused():
    assert parse_verdict('{"score": 0.5, "explanation": "half"}') == (0.5, "half")
    assert parse_verdict('Sure!\n```json\n{"score": 1, "explanation": "ok"}\n```') == (1.0, "ok")
    for bad in ("no json", '{"score": 2}', '{"score": "high"}', '{"verdict": 1}'):
        with pytest.raises(Exception, match="score"):
            parse_verdict(bad)


def length_score(entry: dict, row: dict, scale: float = 1.0) -> float:
    return min(1.0, len(row.get("prompt", "")) * scale)


def dict_score(entry: dict, row: dict) -> dict:
    return {"value": 0.25, "explanation": "a quarter", "tokens": 3}


def bad_score(entry: dict, row: dict) -> str:
    return "high"


class Threshold:
    def __init__(self, at: int):
        self.at = at

    def __call__(self, entry: dict, row: dict) -> dict:
        return {"score": 1.0 if len(row["prompt"]) >= self.at else 0.0, "passed": len(row["prompt"]) >= self.at}


def py_scorer(target: str, **args) -> PythonScorer:
    return PythonScorer("p", ScorerConfig(kind=ScorerKind.python, _target_=f"{__name__}.{target}", args=args))


def test_python_scorer_float_dict_class_and_bad_return():
    assert judge_one(py_scorer("length_score", scale=0.1), "x", None).value == pytest.approx(0.1)
    s = judge_one(py_scorer("dict_score"), "x", None)
    assert (s.value, s.passed, s.explanation, json.loads(s.details)) == (0.25, False, "a quarter", {"tokens": 3})
    assert judge_one(py_scorer("Threshold", at=1), "x", None).passed
    s = judge_one(py_scorer("bad_score"), "x", None)
    assert "not a finite number" in s.error and s.value == 0.0
    with pytest.raises(ConfigError, match="cannot be imported"):
        py_scorer("no_such_function")


def test_score_record_has_the_features_keys_and_types():
    rec = Score("n", "match", 1, 1, exit_code=3).as_dict()
    assert list(rec) == list(SCORE_TYPES)
    kinds = {"string": str, "float64": float, "bool": bool, "int64": int}
    assert all(type(rec[k]) is kinds[t] for k, t in SCORE_TYPES.items())
    feats = features([])
    assert feats["reward"] == {"dtype": "float64", "_type": "Value"}
    assert set(feats["scores"]["feature"]) == set(SCORE_TYPES)


def test_scorer_config_checks(tmp_path):
    def cfg(*overrides: str):
        return compose_cfg([f"dataset_file={tmp_path / 'd.jsonl'}", *overrides])

    with pytest.raises(ConfigError, match="at most one scorer may be primary"):
        check(
            cfg(
                "+scorer@scorers.a=match", "+scorer@scorers.b=match", "scorers.a.primary=true", "scorers.b.primary=true"
            )
        )
    with pytest.raises(ConfigError, match="_target_ must name a callable"):
        check(cfg("+scorer@scorers.p=python"))
    with pytest.raises(ConfigError, match="not a valid Jinja2 template"):
        check(cfg("+scorer@scorers.v=verify", "scorers.v.verify.command='test {{ row.x'"))
    with pytest.raises(ConfigError, match="min_reward needs a scorer"):
        check(cfg("filters.min_reward=0.5"))
    with pytest.raises(ConfigError, match="timeout_s must be > 0"):
        check(cfg("+scorer@scorers.v=verify", "scorers.v.verify.timeout_s=0"))
    check(cfg("+scorer@scorers.a=match", "+scorer@scorers.q=judge", "+scorer@scorers.v=verify"))


def test_best_of_k_keeps_the_best_sample_of_each_row():
    def e(key: str, reward: float, sample: int) -> tuple[str, dict]:
        return key, {"reward": reward, "metadata": {"prompt_key": key, "sample_index": sample}}

    rows = [e("r1", 0.2, 0), e("r1~s1", 0.9, 1), e("r1~s2", 0.9, 2), e("r2", 0.0, 0), e("r2~s1", 0.0, 1), e("r3", 1, 0)]
    assert best_of_k(rows) == {"r1~s1", "r2", "r3"}  # ties go to the lowest sample_index


def test_row_from_entry_gives_back_the_dataset_row():
    entry = entry_with("x")
    entry["metadata"] = {"row_fields": json.dumps({"target": "t", "n": 1}), "image": "img", "cwd": "/w"}
    assert row_from_entry(entry) == {"target": "t", "n": 1, "prompt": "q", "image": "img", "cwd": "/w"}


def test_open_scorers_builds_every_kind(make_cfg, tmp_path):
    cfg = make_cfg("+scorer@scorers.a=match", "+scorer@scorers.q=judge", "+scorer@scorers.v=verify")
    scorers = open_scorers(cfg.scorers, cfg.model)
    assert [s.kind for s in scorers.items] == [ScorerKind.match, ScorerKind.judge, ScorerKind.verify]
    assert scorers.primary == "a"
    asyncio.run(scorers.aclose())
