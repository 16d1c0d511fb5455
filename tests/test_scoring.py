"""Scorers (issue 18): verify in the prompt's sandbox, match, an LLM judge, python checks; reward and scores
on every entry with one schema; resume and rescoring never score twice; min_reward, best_of_k, export."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import pytest

from hermes_runner.config import MatchMode, ScorerConfig, ScorerKind, check
from hermes_runner.errors import ConfigError
from hermes_runner.run import rescore
from hermes_runner.score import Job, Score, Scorers, open_scorers, row_from_entry
from hermes_runner.score.judge import parse_verdict
from hermes_runner.score.match import MatchScorer, last_number
from hermes_runner.score.python import PythonScorer
from hermes_runner.trajectory.entry import SCORE_TYPES, best_of_k, features
from hermes_runner.trajectory.export import export

from tests.helpers.run import compose_cfg, read_jsonl, run_inprocess, script, write_jsonl

JUDGE_RUBRIC = "#judging\n{{ prompt }}\nAnswer: {{ answer }}\nTarget: {{ target }}"


def answer(text: str) -> str:
    """A prompt whose agent answers `text` at once (with reasoning, so the default filters keep it)."""
    return script({"content": text, "reasoning": "I know this."}, text=f"say {text}")


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
    with pytest.raises(ConfigError, match="not a valid template"):
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


# -- in a run: match, verify (local and Docker), judge, python -----------------------------------------------


def test_match_in_a_run_sets_reward_and_scores_and_min_reward_discards(make_cfg, tmp_path, run_dir):
    rows = [
        {"prompt": answer("The answer is 42."), "target": "42"},
        {"prompt": answer("I do not know."), "target": "42"},
        {"prompt": answer("no target here")},
    ]
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    cfg = make_cfg("+scorer@scorers.answer=match", "filters.min_reward=1", dataset=ds)
    code, stats = run_inprocess(cfg, run_dir)
    assert code == 0 and stats["prompts"]["ok"] == 1 and stats["discarded_by_reason"] == {"low_reward": 2}
    kept = read_jsonl(run_dir / "trajectories.jsonl")
    assert [e["reward"] for e in kept] == [1.0]
    (rec,) = kept[0]["scores"]
    assert (rec["name"], rec["kind"], rec["passed"], rec["error"]) == ("answer", "match", True, "")
    dropped = {e["prompt_index"]: e for e in read_jsonl(run_dir / "discarded.jsonl")}
    assert dropped[1]["scores"][0]["error"] == "" and dropped[1]["discard_reason"] == "low_reward"
    assert "no `target`" in dropped[2]["scores"][0]["error"]
    ledger = {r["index"]: r for r in read_jsonl(run_dir / "ledger.jsonl")}
    assert ledger[0]["reward"] == 1.0 and ledger[0]["scores"][0]["passed"] is True
    assert set(ledger[0]["scores"][0]) == {"name", "kind", "value", "passed", "error"}


def writes(path: str, text: str) -> str:
    step = {
        "reasoning": "write it",
        "tool_calls": [{"name": "terminal", "arguments": {"command": f"echo {text} > {path}"}}],
    }
    return script(step, {"content": "Written.", "reasoning": "done"}, text=f"write {text}")


def verify_rows() -> list[dict]:
    return [
        {"prompt": writes("answer.txt", "42"), "verify": "grep -qx 42 answer.txt && echo verified"},
        {"prompt": writes("answer.txt", "41"), "verify": "grep -qx 42 answer.txt"},
        {"prompt": writes("other.txt", "42"), "expect": "42"},  # the template: a row field, shell-quoted
    ]


def check_verified(run_dir: Path) -> None:
    entries = {e["prompt_index"]: e for e in read_jsonl(run_dir / "trajectories.jsonl")}
    assert [entries[i]["reward"] for i in range(3)] == [1.0, 0.0, 1.0]
    first = entries[0]["scores"][0]
    assert (first["kind"], first["exit_code"], first["output"].strip()) == ("verify", 0, "verified")
    assert entries[1]["scores"][0]["exit_code"] == 1 and not entries[1]["scores"][0]["passed"]


def test_verify_checks_the_file_the_agent_wrote_in_the_local_sandbox(make_cfg, tmp_path, run_dir):
    ds = write_jsonl(tmp_path / "d.jsonl", verify_rows())
    cfg = make_cfg(
        "distribution=terminal_only",
        "+scorer@scorers.tests=verify",
        "scorers.tests.verify.command='grep -qx {{ row.expect | quote }} other.txt'",
        dataset=ds,
    )
    code, _ = run_inprocess(cfg, run_dir)
    assert code == 0
    check_verified(run_dir)


@pytest.mark.docker
def test_verify_checks_the_file_the_agent_wrote_in_a_docker_sandbox(make_cfg, tmp_path, run_dir):
    ds = write_jsonl(tmp_path / "d.jsonl", verify_rows())
    cfg = make_cfg(
        "sandbox=docker",
        "sandbox.image=local/busybox:ci",
        "sandbox.docker.pool_size=0",
        "distribution=terminal_only",
        "+scorer@scorers.tests=verify",
        "scorers.tests.verify.command='grep -qx {{ row.expect | quote }} other.txt'",
        dataset=ds,
    )
    code, _ = run_inprocess(cfg, run_dir)
    assert code == 0
    check_verified(run_dir)


def test_verify_timeout_fails_the_check_and_is_kept(make_cfg, tmp_path, run_dir):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": answer("hi"), "verify": "sleep 5"}])
    cfg = make_cfg("+scorer@scorers.v=verify", "scorers.v.verify.timeout_s=0.5", dataset=ds)
    assert run_inprocess(cfg, run_dir)[0] == 0
    (e,) = read_jsonl(run_dir / "trajectories.jsonl")
    assert e["reward"] == 0.0 and "timed out" in e["scores"][0]["explanation"]


def judge_cfg(make_cfg, ds: Path, *extra: str):
    cfg = make_cfg("+scorer@scorers.quality=judge", *extra, dataset=ds)
    cfg.scorers["quality"].judge.rubric = JUDGE_RUBRIC
    return cfg


def judged(text: str, score: float, cost: float = 0.01) -> str:
    reply = {"content": json.dumps({"score": score, "explanation": f"graded {text}"}), "cost": cost}
    return f"{answer(text)}\n#judge {json.dumps(reply)}"


def judge_calls(server) -> int:
    return len(server.calls_for("#judging"))


def test_judge_scores_counts_in_usage_and_budget_and_resume_never_rescores(make_cfg, tmp_path, run_dir, server):
    rows = [{"prompt": judged("Paris", 0.75), "target": "Paris"}, {"prompt": judged("Lyon", 0.25), "target": "Paris"}]
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    cfg = judge_cfg(make_cfg, ds, "+scorer@scorers.answer=match", "scorers.answer.primary=true")
    code, stats = run_inprocess(cfg, run_dir)
    assert code == 0 and judge_calls(server) == 2
    entries = read_jsonl(run_dir / "trajectories.jsonl")
    assert [e["reward"] for e in entries] == [1.0, 0.0]  # the primary is `answer`, listed first
    assert [[s["name"] for s in e["scores"]] for e in entries] == [["answer", "quality"]] * 2
    q = entries[0]["scores"][1]
    assert (q["value"], q["passed"], q["explanation"]) == (0.75, True, "graded Paris")
    (request,) = [r.prompt for r in server.calls_for("#judging") if "say Paris" in r.prompt]
    assert "Answer: Paris" in request and "Target: Paris" in request
    # the judge's spend is in the prompt's usage, the run's statistics and the metered calls
    assert all(e["usage"]["cost_usd"] == pytest.approx(0.01) for e in entries)
    assert stats["usage"]["cost_usd"] == pytest.approx(0.02)
    tool_calls = [r for r in read_jsonl(run_dir / "usage.jsonl") if r["model"] == "tool" and r["event"] == "end"]
    assert len(tool_calls) == 2
    # resume: nothing runs and nothing is judged again
    before = len(server.requests)
    code, stats2 = run_inprocess(
        judge_cfg(make_cfg, ds, "+scorer@scorers.answer=match", "scorers.answer.primary=true"), run_dir
    )
    assert code == 0 and len(server.requests) == before and stats2["prompts"]["ok"] == 2


def test_judge_cost_stops_the_run_at_the_budget(make_cfg, tmp_path, run_dir, server):
    rows = [{"prompt": judged(f"a{i}", 1.0, cost=1.0)} for i in range(6)]
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    code, stats = run_inprocess(judge_cfg(make_cfg, ds, "limits.max_cost_usd=1.5", "num_workers=1"), run_dir)
    assert code == 3 and stats["stopped_by_budget"]  # only the judge costs anything here
    assert stats["prompts"]["ok"] < 6


def test_python_scorer_from_a_test_module_in_a_run(make_cfg, tmp_path, run_dir):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": answer("x")}])
    cfg = make_cfg("+scorer@scorers.mine=python", f"scorers.mine._target_={__name__}.dict_score", dataset=ds)
    assert run_inprocess(cfg, run_dir)[0] == 0
    (e,) = read_jsonl(run_dir / "trajectories.jsonl")
    assert e["reward"] == 0.25 and e["scores"][0]["explanation"] == "a quarter"


def test_a_judge_failure_is_a_record_and_the_trajectory_is_kept(make_cfg, tmp_path, run_dir):
    bad = {"content": "I refuse to grade."}
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": f"{answer('x')}\n#judge {json.dumps(bad)}"}])
    code, stats = run_inprocess(judge_cfg(make_cfg, ds), run_dir)
    assert code == 0 and stats["prompts"]["ok"] == 1
    (e,) = read_jsonl(run_dir / "trajectories.jsonl")
    assert e["reward"] == 0.0 and "no JSON object with a score" in e["scores"][0]["error"]


# -- rescoring a finished run -------------------------------------------------------------------------------


def test_rescoring_a_finished_run_calls_no_agent_model_and_is_resumable(make_cfg, tmp_path, run_dir, server):
    rows = [{"prompt": judged("Paris", 0.5), "target": "paris"}, {"prompt": judged("Rome", 0.0), "target": "paris"}]
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    assert run_inprocess(make_cfg(dataset=ds), run_dir)[0] == 0
    unscored = [e["scores"] for e in read_jsonl(run_dir / "trajectories.jsonl")]
    assert [[(s["name"], s["error"]) for s in scores] for scores in unscored] == [[("", "not scored")]] * 2
    agent_calls = len(server.requests)
    out = rescore.rescore(run_dir, ["+scorer@scorers.answer=match"])
    assert (out["scored"], out["skipped"], len(server.requests)) == (2, 0, agent_calls)
    entries = read_jsonl(run_dir / "trajectories.jsonl")
    assert [e["reward"] for e in entries] == [1.0, 0.0] and entries[0]["scores"][0]["name"] == "answer"
    assert len(read_jsonl(run_dir / "rescored.jsonl")) == 2
    # again: nothing to do; then a judge added, scored once, never again
    assert rescore.rescore(run_dir, ["+scorer@scorers.answer=match"])["skipped"] == 2
    overrides = ["+scorer@scorers.quality=judge", f"scorers.quality.judge.rubric='{JUDGE_RUBRIC}'"]
    assert rescore.rescore(run_dir, overrides)["scored"] == 2 and judge_calls(server) == 2
    assert rescore.rescore(run_dir, overrides)["skipped"] == 2 and judge_calls(server) == 2
    entries = read_jsonl(run_dir / "trajectories.jsonl")
    assert [[s["name"] for s in e["scores"]] for e in entries] == [["answer", "quality"]] * 2
    assert entries[0]["scores"][1]["value"] == 0.5 and entries[0]["reward"] == 1.0
    stats = json.loads((run_dir / "statistics.json").read_text())
    assert stats["usage"]["cost_usd"] == pytest.approx(0.02)  # the judge's spend of the rescoring
    # --force scores again; a resume of the run afterwards still runs nothing
    assert rescore.rescore(run_dir, ["+scorer@scorers.answer=match"], force=True)["scored"] == 2
    before = len(server.requests)
    assert run_inprocess(make_cfg(dataset=ds), run_dir)[0] == 0 and len(server.requests) == before
    assert [e["reward"] for e in read_jsonl(run_dir / "trajectories.jsonl")] == [1.0, 0.0]


def test_rescoring_refuses_verify_and_bad_overrides(make_cfg, tmp_path, run_dir):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": answer("x")}])
    assert run_inprocess(make_cfg(dataset=ds), run_dir)[0] == 0
    with pytest.raises(ConfigError, match="sandbox, which was removed"):
        rescore.rescore(run_dir, ["+scorer@scorers.v=verify"])
    with pytest.raises(ConfigError, match="bad scorer overrides"):
        rescore.rescore(run_dir, ["+scorer@scorers.v=nosuchkind"])
    assert rescore.main([str(run_dir), "+scorer@scorers.v=verify"]) == 2


# -- one schema on every row; export by reward ----------------------------------------------------------------


def test_hf_datasets_loads_scored_unscored_and_failed_score_batches_mixed(make_cfg, tmp_path, server):
    datasets = pytest.importorskip("datasets")
    scored_dir, plain_dir = tmp_path / "scored", tmp_path / "plain"
    rows = [
        {"prompt": answer("no target")},  # a failed score first: its record still has every key
        {"prompt": answer("The answer is 42."), "target": "42"},
        {"prompt": answer("nope"), "target": "42"},
    ]
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    assert run_inprocess(make_cfg("+scorer@scorers.answer=match", "batch_size=1", dataset=ds), scored_dir)[0] == 0
    assert run_inprocess(make_cfg("batch_size=1", "run_name=plain", dataset=ds), plain_dir)[0] == 0
    scored = sorted(str(p) for p in scored_dir.glob("batch_*.jsonl"))
    plain = sorted(str(p) for p in plain_dir.glob("batch_*.jsonl"))
    cache = str(tmp_path / "hf")
    feats = json.loads((scored_dir / "dataset_features.json").read_text())
    assert feats == json.loads((plain_dir / "dataset_features.json").read_text())
    # scored, unscored and failed-score rows in any mix and order, without the features file: the same types
    for files in (plain + scored, scored + plain, [scored[0], plain[1], scored[2]]):
        mixed = datasets.load_dataset("json", data_files=files, split="train", cache_dir=cache)
        assert mixed.features.to_dict() == feats
        names = sorted(s[0]["name"] for s in mixed["scores"])
        assert len(mixed) == len(files) and set(names) <= {"", "answer"}
    loaded = datasets.load_dataset("json", data_files=plain + scored, split="train", cache_dir=cache)
    assert sorted(loaded["reward"]) == [0.0] * 5 + [1.0]
    assert sorted(s[0]["error"] for s in loaded["scores"]) == [""] * 2 + ["not scored"] * 3 + [
        "the row has no `target`"
    ]


def test_export_by_min_reward_and_pass_fail_splits(make_cfg, tmp_path, run_dir):
    pytest.importorskip("datasets")
    rows = [{"prompt": answer(f"The answer is {n}."), "target": "42"} for n in (42, 41, 42, 7)]
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    assert run_inprocess(make_cfg("+scorer@scorers.answer=match", dataset=ds), run_dir)[0] == 0
    _, counts = export(run_dir, "parquet", tmp_path / "good", min_reward=1.0)
    assert counts == {"kept": 2}
    _, counts = export(run_dir, "splits", tmp_path / "split", pass_fail=True)
    assert counts == {"pass": 2, "fail": 2}
    from datasets import load_from_disk

    split = load_from_disk(str(tmp_path / "split"))
    assert split["pass"]["reward"] == [1.0, 1.0] and split["fail"][0]["scores"][0]["name"] == "answer"


def test_row_from_entry_gives_back_the_dataset_row():
    entry = entry_with("x")
    entry["metadata"] = {"row_fields": json.dumps({"target": "t", "n": 1}), "image": "img", "cwd": "/w"}
    assert row_from_entry(entry) == {"target": "t", "n": 1, "prompt": "q", "image": "img", "cwd": "/w"}


def test_open_scorers_builds_every_kind(make_cfg, tmp_path):
    cfg = make_cfg("+scorer@scorers.a=match", "+scorer@scorers.q=judge", "+scorer@scorers.v=verify")
    scorers = open_scorers(cfg)
    assert [s.kind for s in scorers.items] == [ScorerKind.match, ScorerKind.judge, ScorerKind.verify]
    assert scorers.primary == "a"
    asyncio.run(scorers.aclose())


def test_rescoring_killed_with_kill_9_goes_on_where_it_stopped(make_cfg, tmp_path, run_dir, server):
    import os
    import signal
    import subprocess
    import sys
    import time

    slow = {"content": json.dumps({"score": 1, "explanation": "ok"}), "sleep": 0.4}
    rows = [{"prompt": f"{answer(f'a{i}')}\n#judge {json.dumps(slow)}"} for i in range(6)]
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    assert run_inprocess(make_cfg(dataset=ds), run_dir)[0] == 0
    argv = [sys.executable, "-m", "hermes_runner.score", str(run_dir), "+scorer@scorers.q=judge"]
    argv += [f"scorers.q.judge.rubric='{JUDGE_RUBRIC}'", "--concurrency", "1"]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    rescored = run_dir / "rescored.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not rescored.exists() or len(rescored.read_bytes().splitlines()) < 2):
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    done_before = len(rescored.read_bytes().splitlines())
    assert 2 <= done_before < 6, "the kill must land mid-way"
    calls_before = judge_calls(server)
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert f"{6 - done_before} scored, {done_before} already scored" in out.stdout
    assert judge_calls(server) == calls_before + 6 - done_before  # the recorded ones were never judged again
    entries = read_jsonl(run_dir / "trajectories.jsonl")
    assert [e["scores"][0]["name"] for e in entries] == ["q"] * 6 and all(e["reward"] == 1.0 for e in entries)


def test_rescoring_stops_at_the_run_budget(make_cfg, tmp_path, run_dir, server):
    costly = {"content": json.dumps({"score": 1, "explanation": "ok"}), "cost": 1.0}
    rows = [{"prompt": f"{answer(f'b{i}')}\n#judge {json.dumps(costly)}"} for i in range(5)]
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    assert run_inprocess(make_cfg("limits.max_cost_usd=2.5", dataset=ds), run_dir)[0] == 0  # the agent costs 0
    overrides = ["+scorer@scorers.q=judge", f"scorers.q.judge.rubric='{JUDGE_RUBRIC}'"]
    out = rescore.rescore(run_dir, overrides, concurrency=1)
    assert out["stopped_by_budget"] and out["scored"] == 3 and judge_calls(server) == 3  # the third call spends it
    assert json.loads((run_dir / "statistics.json").read_text())["usage"]["cost_usd"] == pytest.approx(3.0)
