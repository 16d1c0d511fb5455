"""Scorers in real runs (issue 18): verify in the prompt's own sandbox (local and Docker), match, a judge on the
scripted server, python checks; reward and scores with one schema; resume and rescoring never score twice;
min_reward, export by reward."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from hermes_runner.commands.score import main as score_main
from hermes_runner.errors import ConfigError
from hermes_runner.run import rescore
from hermes_runner.trajectory.export import export

from tests.helpers.run import ROOT, command, read_jsonl, run_inprocess, script, write_jsonl
from tests.helpers.wait import exited, wait_for

JUDGE_RUBRIC = "#judging\n{{ prompt }}\nAnswer: {{ answer }}\nTarget: {{ target }}"


def answer(text: str) -> str:
    """A prompt whose agent answers `text` at once (with reasoning, so the default filters keep it)."""
    return script({"content": text, "reasoning": "I know this."}, text=f"say {text}")


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


def test_scorer_equals_match_scores_a_run_and_resumes_as_the_named_form(make_cfg, tmp_path, run_dir):
    """`scorer=match` (a group option, as Hydra users pick one) scores under the name `match`; the run's data
    config is the one `+scorer@scorers.match=match` makes, so either spelling resumes it."""
    rows = [{"prompt": answer("The answer is 42."), "target": "42"}, {"prompt": answer("No idea."), "target": "42"}]
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    code, stats = run_inprocess(make_cfg("scorer=match", "scorer.match.mode=exact", dataset=ds), run_dir)
    assert code == 0 and stats["prompts"]["ok"] == 2
    kept = read_jsonl(run_dir / "trajectories.jsonl")
    assert [e["reward"] for e in kept] == [0.0, 0.0]  # exact: the whole answer is not "42"
    assert [e["scores"][0]["name"] for e in kept] == ["match", "match"]
    named = make_cfg("+scorer@scorers.match=match", "scorers.match.match.mode=exact", dataset=ds)
    assert run_inprocess(named, run_dir)[0] == 0  # the same run: nothing to redo, no force_resume needed


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


def run_verify(make_cfg, tmp_path, run_dir, *sandbox: str) -> None:
    """The agent writes other.txt; a verify scorer greps it in the prompt's own sandbox; check both verdicts."""
    ds = write_jsonl(tmp_path / "d.jsonl", verify_rows())
    cfg = make_cfg(
        *sandbox,
        "distribution=terminal_only",
        "+scorer@scorers.tests=verify",
        "scorers.tests.verify.command='grep -qx {{ row.expect | quote }} other.txt'",
        dataset=ds,
    )
    code, _ = run_inprocess(cfg, run_dir)
    assert code == 0
    check_verified(run_dir)


def test_verify_checks_the_file_the_agent_wrote_in_the_local_sandbox(make_cfg, tmp_path, run_dir):
    run_verify(make_cfg, tmp_path, run_dir)


@pytest.mark.docker
def test_verify_checks_the_file_the_agent_wrote_in_a_docker_sandbox(make_cfg, tmp_path, run_dir):
    run_verify(
        make_cfg, tmp_path, run_dir, "sandbox=docker", "sandbox.image=local/busybox:ci", "sandbox.docker.pool_size=0"
    )


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
    cfg = make_cfg(
        "+scorer@scorers.mine=python", "scorers.mine._target_=tests.unit.scorers.test_scorers.dict_score", dataset=ds
    )
    assert run_inprocess(cfg, run_dir)[0] == 0
    (e,) = read_jsonl(run_dir / "trajectories.jsonl")
    assert e["reward"] == 0.25 and e["scores"][0]["explanation"] == "a quarter"
    # The version of its code, for the rows' provenance: the sha256 of the file that defines it.
    (inv,) = read_jsonl(run_dir / "invocations.jsonl")
    source = Path(__file__).parents[1] / "unit" / "scorers" / "test_scorers.py"
    assert inv["scorer_code"] == {"mine": hashlib.sha256(source.read_bytes()).hexdigest()}


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


def test_rescoring_reads_the_target_from_the_column_the_run_mapped(make_cfg, tmp_path, run_dir):
    rows = [{"prompt": answer("The answer is 42."), "expected": 42}, {"prompt": answer("No idea."), "expected": 42}]
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    assert run_inprocess(make_cfg("dataset.fields.target=expected", dataset=ds), run_dir)[0] == 0
    assert rescore.rescore(run_dir, ["+scorer@scorers.answer=match"])["errors"] == 0
    entries = read_jsonl(run_dir / "trajectories.jsonl")
    assert [e["reward"] for e in entries] == [1.0, 0.0]  # the number 42 read as the text "42", as in a run


def test_rescoring_refuses_verify_and_bad_overrides(make_cfg, tmp_path, run_dir):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": answer("x")}])
    assert run_inprocess(make_cfg(dataset=ds), run_dir)[0] == 0
    with pytest.raises(ConfigError, match="sandbox, which was removed"):
        rescore.rescore(run_dir, ["+scorer@scorers.v=verify"])
    with pytest.raises(ConfigError, match="bad scorer overrides"):
        rescore.rescore(run_dir, ["+scorer@scorers.v=nosuchkind"])
    assert score_main([str(run_dir), "+scorer@scorers.v=verify"]) == 2


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


def test_rescoring_killed_with_kill_9_goes_on_where_it_stopped(make_cfg, tmp_path, run_dir, server):
    import os
    import signal
    import subprocess

    verdict = {"content": json.dumps({"score": 1, "explanation": "ok"})}
    rows = [{"prompt": f"{answer(f'a{i}')}\n#judge {json.dumps(verdict)}"} for i in range(6)]
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    assert run_inprocess(make_cfg(dataset=ds), run_dir)[0] == 0
    argv = [*command("score"), str(run_dir), "+scorer@scorers.q=judge"]
    argv += [f"scorers.q.judge.rubric='{JUDGE_RUBRIC}'", "--concurrency", "1"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    server.hold(after=2)  # two judge calls answered, the third waits: the kill lands mid-way by construction
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    rescored = run_dir / "rescored.jsonl"

    def two_scored_one_held() -> bool:
        return rescored.exists() and len(rescored.read_bytes().splitlines()) >= 2 and server.held > 0

    try:
        wait_for(two_scored_one_held, 60, "2 rows rescored and the third judge call waiting", gone=exited(proc))
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        server.release()
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


def test_match_and_verify_read_mapped_columns_of_a_csv_dataset(make_cfg, tmp_path, run_dir):
    import csv

    path = tmp_path / "d.csv"
    with path.open("w", newline="") as fp:
        w = csv.writer(fp)
        w.writerow(["question", "answer", "check"])
        w.writerow([answer("It is 7."), "7", "true"])
        w.writerow([answer("It is 8."), "7", "false"])
    cfg = make_cfg(
        f"dataset_file={path}",
        "dataset.fields.prompt=question",
        "dataset.fields.target=answer",
        "dataset.fields.verify=check",
        "+scorer@scorers.answer=match",
        "+scorer@scorers.check=verify",
    )
    assert run_inprocess(cfg, run_dir)[0] == 0
    entries = read_jsonl(run_dir / "trajectories.jsonl")
    assert [[(s["name"], s["passed"]) for s in e["scores"]] for e in entries] == [
        [("answer", True), ("check", True)],
        [("answer", False), ("check", False)],
    ]
