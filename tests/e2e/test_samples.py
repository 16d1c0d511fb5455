"""k samples per prompt (samples_per_prompt), in-run retries (retry.*) and the score statistics, end to end."""

from __future__ import annotations

import json
import random
from collections import Counter
from pathlib import Path

import pytest
from rich.console import Console

from hermes_runner.commands.job import print_results
from hermes_runner.dataset import read_prompts
from hermes_runner.report.page import build_report
from hermes_runner.rundir.merge import merge
from hermes_runner.rundir.reader import RunData
from hermes_runner.tools import distributions
from hermes_runner.trajectory.entry import features

from tests.helpers.crash import cli_args, kill_mid_run, terminal_records
from tests.helpers.run import read_jsonl, run_cli, run_inprocess, script, write_jsonl
from tests.helpers.wait import wait_for

ANSWER = {"content": "the answer", "reasoning": "thinking"}


def rows_of(n: int) -> list[dict]:
    return [{"prompt": f"row {i}"} for i in range(n)]


def test_each_row_runs_k_times_each_sample_with_its_own_identity(make_cfg, tmp_path, run_dir, server, capsys):
    ds = write_jsonl(tmp_path / "d.jsonl", rows_of(3))
    code, stats = run_inprocess(make_cfg("samples_per_prompt=3", dataset=ds), run_dir)
    assert code == 0 and stats["prompts"]["total"] == 9 and stats["prompts"]["ok"] == 9
    assert stats["samples_per_prompt"] == 3
    printed = " ".join(capsys.readouterr().out.split())
    assert "9 prompts in scope (3 rows x 3 samples), 0 already done, 9 to run" in printed
    entries = read_jsonl(run_dir / "trajectories.jsonl")
    # Dataset order, each row's samples in order.
    assert [(e["prompt_index"], e["metadata"]["sample_index"]) for e in entries] == [
        (i, s) for i in range(3) for s in range(3)
    ]
    row_keys = [p.key for p in read_prompts(ds)]
    assert [e["metadata"]["prompt_key"] for e in entries] == [
        key if s == 0 else f"{key}~s{s}" for key in row_keys for s in range(3)
    ]
    # One session per sample: every row was sent 3 times (2 model calls each).
    assert Counter(r.prompt for r in server.requests if r.turn == 0) == {f"row {i}": 3 for i in range(3)}
    ledger = read_jsonl(run_dir / "ledger.jsonl")
    assert len(ledger) == 9
    for rec in ledger:
        if "sample" in rec:
            assert rec["row"] in row_keys and rec["key"] == f"{rec['row']}~s{rec['sample']}"
        else:
            assert rec["key"] in row_keys
    # sample_index is typed in the features like every other field; the checkpoint lists each row's index k times.
    assert features([])["metadata"]["sample_index"] == {"dtype": "int64", "_type": "Value"}
    ckpt = json.loads((run_dir / "checkpoint.json").read_text())
    assert ckpt["completed_prompts"] == [i for i in range(3) for _ in range(3)]


def test_sample_zero_keeps_todays_identity_so_a_run_grows_to_k_samples(make_cfg, tmp_path, run_dir, server):
    ds = write_jsonl(tmp_path / "d.jsonl", rows_of(4))
    assert run_inprocess(make_cfg(dataset=ds), run_dir)[0] == 0
    first = read_jsonl(run_dir / "trajectories.jsonl")
    assert {e["metadata"]["sample_index"] for e in first} == {0}
    before = len(server.requests)
    code, stats = run_inprocess(make_cfg("samples_per_prompt=3", dataset=ds), run_dir)
    assert code == 0 and stats["prompts"]["ok"] == 12
    assert len(server.requests) - before == 8 * 2  # only samples 1 and 2 ran: sample 0 of each row was done
    entries = read_jsonl(run_dir / "trajectories.jsonl")
    assert [e for e in entries if e["metadata"]["sample_index"] == 0] == first
    # Back to one sample: the extra samples are out of scope, nothing runs.
    before = len(server.requests)
    code, stats = run_inprocess(make_cfg(dataset=ds), run_dir)
    assert code == 0 and len(server.requests) == before and stats["prompts"]["ok"] == 4
    assert stats["not_in_dataset"]["prompts"] == 8


def test_each_sample_has_its_own_sandbox(make_cfg, tmp_path, run_dir, server):
    probe = {"tool_calls": [{"name": "terminal", "arguments": {"command": "ls -a; touch left-by-a-sample"}}]}
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": script(probe, ANSWER, text="probe")}])
    cfg = make_cfg("samples_per_prompt=4", "num_workers=1", "distribution=terminal_only", dataset=ds)
    code, stats = run_inprocess(cfg, run_dir)
    assert code == 0 and stats["prompts"]["ok"] == 4
    turns = [t for e in read_jsonl(run_dir / "trajectories.jsonl") for t in e["conversations"]]
    listings = [t["value"] for t in turns if t["from"] == "tool"]
    assert len(listings) == 4 and all('"exit_code": 0' in v for v in listings)
    assert not any("left-by-a-sample" in v for v in listings), "a sample saw the file another sample made"


def test_each_sample_draws_its_own_toolsets(make_cfg, tmp_path, run_dir, server):
    ds = write_jsonl(tmp_path / "d.jsonl", rows_of(2))
    overrides = ("distribution=terminal_only", "distribution.toolsets.terminal=50", "distribution.toolsets.file=50")
    cfg = make_cfg("samples_per_prompt=8", *overrides, dataset=ds)
    assert run_inprocess(cfg, run_dir)[0] == 0
    entries = read_jsonl(run_dir / "trajectories.jsonl")
    for e in entries:  # the draw of each sample is the one seeded by its own key
        expected = distributions.sample(cfg.distribution, cfg.seed, e["metadata"]["prompt_key"])
        assert e["toolsets_used"] == expected
    for i in range(2):
        draws = {tuple(e["toolsets_used"]) for e in entries if e["prompt_index"] == i}
        assert len(draws) > 1, f"the 8 samples of row {i} all drew {draws}"


def test_samples_per_prompt_below_1_is_a_config_error(make_cfg, tmp_path, run_dir):
    ds = write_jsonl(tmp_path / "d.jsonl", rows_of(1))
    code, _ = run_inprocess(make_cfg("samples_per_prompt=0", dataset=ds), run_dir)
    assert code == 2 and not (run_dir / "ledger.jsonl").exists()


# -- in-run retries ------------------------------------------------------------------


def flaky(n_failures: int, text: str = "flaky") -> str:
    return script({"fail": [{"status": 400}] * n_failures, **ANSWER}, text=text)


def test_a_provider_error_is_retried_in_the_run_and_each_attempt_recorded(make_cfg, tmp_path, run_dir, server):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": flaky(1)}, {"prompt": "fine"}])
    cfg = make_cfg("retry.max_attempts=3", "retry.initial_wait_s=0.05", dataset=ds)
    code, stats = run_inprocess(cfg, run_dir)
    assert code == 0 and stats["prompts"]["ok"] == 2 and stats["prompts"]["failed"] == 0
    assert len(server.calls_for("flaky")) == 1 + 1  # the failed first attempt, then the answer
    (attempt,) = read_jsonl(run_dir / "failures.jsonl")
    assert attempt["retried"] is True and attempt["attempt"] == 1 and attempt["error_type"] == "ModelCallError"
    assert "400" in attempt["error"] and attempt["traceback"]
    (rec,) = [r for r in read_jsonl(run_dir / "ledger.jsonl") if r["key"] == attempt["key"]]
    assert rec["status"] == "ok" and rec["attempts"] == 2  # one ledger record: the outcome


def test_the_last_failure_stays_in_the_ledger_and_a_rerun_retries_it(make_cfg, tmp_path, run_dir, server):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": flaky(2)}])
    cfg = make_cfg("retry.max_attempts=2", "retry.initial_wait_s=0", dataset=ds)
    code, stats = run_inprocess(cfg, run_dir)
    assert code == 1 and stats["failed_by_error"] == {"ModelCallError": 1}
    failures = read_jsonl(run_dir / "failures.jsonl")
    assert [(f.get("retried", False), f.get("attempt")) for f in failures] == [(True, 1), (False, 2)]
    (rec,) = read_jsonl(run_dir / "ledger.jsonl")
    assert rec["status"] == "failed" and rec["attempt"] == 2 and rec["attempts"] == 2
    code, stats = run_inprocess(cfg, run_dir)  # the server's third answer is good
    assert code == 0 and stats["prompts"]["ok"] == 1 and len(server.calls_for("flaky")) == 3


def test_retry_on_names_the_failures_that_are_retried(make_cfg, tmp_path, run_dir, server):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": flaky(1)}])
    code, stats = run_inprocess(make_cfg("retry.max_attempts=3", "retry.on=[sandbox,timeout]", dataset=ds), run_dir)
    assert code == 1 and len(server.calls_for("flaky")) == 1  # a provider error: not in retry.on
    assert len(read_jsonl(run_dir / "failures.jsonl")) == 1


def test_a_timeout_is_retried(make_cfg, tmp_path, run_dir, server):
    # The first attempt hangs far past the limit; the second (one model call) has 3 s, a loaded machine's margin.
    slow_once = script({"fail": [{"status": 500, "hang": 60}], **ANSWER}, text="slow")
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": slow_once}])
    cfg = make_cfg("retry.max_attempts=2", "retry.initial_wait_s=0", "limits.timeout_s=3", dataset=ds)
    code, stats = run_inprocess(cfg, run_dir)
    assert code == 0 and stats["prompts"]["ok"] == 1
    (attempt,) = read_jsonl(run_dir / "failures.jsonl")
    assert attempt["error_type"] == "PromptTimeout" and attempt["retried"] is True
    wait_for(lambda: server.in_flight == 0, 10, "the hung reply to end with its client")


def test_a_sandbox_error_is_retried_and_every_attempt_kept(make_cfg, tmp_path, run_dir, server):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "no such cwd", "cwd": str(tmp_path / "missing")}])
    cfg = make_cfg("retry.max_attempts=3", "retry.initial_wait_s=0", dataset=ds)
    code, stats = run_inprocess(cfg, run_dir)
    assert code == 1 and stats["failed_by_error"] == {"SandboxError": 1}
    failures = read_jsonl(run_dir / "failures.jsonl")
    assert [(f["error_type"], f.get("retried", False), f["attempt"]) for f in failures] == [
        ("SandboxError", True, 1), ("SandboxError", True, 2), ("SandboxError", False, 3),
    ]  # fmt: skip
    assert [r["status"] for r in read_jsonl(run_dir / "ledger.jsonl")] == ["failed"]


def test_an_unknown_retry_class_is_a_config_error(make_cfg, tmp_path):
    with pytest.raises(Exception, match="retry.on|ErrorClass|provider"):
        make_cfg("retry.on=[network]", dataset=write_jsonl(tmp_path / "d.jsonl", rows_of(1)))


# -- scores: statistics, report, results table ---------------------------------------------

SCORERS = ("match", "judge")


def score_by_hand(run_dir: Path, passes: dict[tuple[int, int], bool]) -> None:
    """Write `scores` and `reward` into the ledger records (and entries) as a scorer does (the agreed schema)."""
    lines = []
    for rec in read_jsonl(run_dir / "ledger.jsonl"):
        if rec["status"] in ("ok", "discarded"):
            ok = passes[(rec["index"], rec.get("sample", 0))]
            rec["scores"] = [
                {"name": "match", "value": float(ok), "passed": ok, "explanation": "by hand"},
                {"name": "judge", "value": 0.75 if ok else 0.25, "passed": True, "explanation": "lenient"},
            ]
            rec["reward"] = float(ok)
        lines.append(json.dumps(rec) + "\n")
    (run_dir / "ledger.jsonl").write_text("".join(lines))


# Row 0 passes 2 of 4 samples, row 1 all 4, row 2 none: the values of tests/test_metrics.py.
PASSES = {(i, s): [[True, False, True, False], [True] * 4, [False] * 4][i][s] for i in range(3) for s in range(4)}


def scored_run(make_cfg, tmp_path: Path, run_dir: Path, *extra: str) -> tuple[Path, list[str]]:
    ds = write_jsonl(tmp_path / "d.jsonl", rows_of(3))
    overrides = ["samples_per_prompt=4", "distribution=terminal_only", "model.name=scripted-a", *extra]
    assert run_inprocess(make_cfg(*overrides, dataset=ds), run_dir)[0] == 0
    score_by_hand(run_dir, PASSES)
    return ds, overrides


def test_statistics_give_mean_pass_at_1_and_pass_at_k_per_scorer(make_cfg, tmp_path, run_dir, server):
    ds, overrides = scored_run(make_cfg, tmp_path, run_dir)
    calls = len(server.requests)
    code, stats = run_inprocess(make_cfg(*overrides, dataset=ds), run_dir)  # rebuilt from the ledger
    assert code == 0 and len(server.requests) == calls
    scores = stats["scores"]
    assert scores["scorers"] == ["match", "judge"] and scores["k"] == 4 and scores["unscored"] == 0
    match = scores["overall"]["match"]
    assert (match["rows"], match["samples"], match["passed"]) == (3, 12, 6)
    assert match["pass_at_1"] == 0.5 and match["pass_at_1_se"] == pytest.approx(0.288675, abs=1e-6)
    assert match["pass_at_k"] == pytest.approx(2 / 3)  # 1, 1 and 0: row 0 has 2 passes among 4 = k samples
    judge = scores["overall"]["judge"]
    assert judge["pass_at_1"] == 1.0 and judge["mean"] == pytest.approx((0.5 + 0.75 + 0.25) / 3)
    assert set(scores["by_toolset"]) == {"terminal", "file"}
    assert scores["by_toolset"]["terminal"]["match"] == match  # every sample drew terminal
    assert scores["by_model"]["scripted-a"]["match"] == match
    (res_match, res_judge) = stats["results"]
    assert res_match["model"] == "scripted-a" and res_match["scorer"] == "match" and res_match["n"] == 12
    assert res_match["pass_at_1"] == 0.5 and res_match["k"] == 4
    assert res_match["tokens"] == stats["usage"]["total_tokens"] > 0
    assert res_judge["scorer"] == "judge"


def test_a_run_without_scores_has_no_score_sections(make_cfg, tmp_path, run_dir, server):
    ds = write_jsonl(tmp_path / "d.jsonl", rows_of(2))
    code, stats = run_inprocess(make_cfg("samples_per_prompt=2", dataset=ds), run_dir)
    assert code == 0 and "scores" not in stats and "results" not in stats
    html = build_report(run_dir).read_text()
    assert "Scores" not in html
    console = Console(record=True, width=120)
    print_results(console, stats)
    assert "no scores recorded" in console.export_text()


def test_the_report_shows_a_score_table(make_cfg, tmp_path, run_dir, server):
    ds, overrides = scored_run(make_cfg, tmp_path, run_dir)
    run_inprocess(make_cfg(*overrides, dataset=ds), run_dir)
    html = build_report(run_dir).read_text()
    assert "Scores" in html and "pass@4" in html and "0.500 ± 0.289" in html
    data = RunData.load(run_dir)
    assert data.stats.scores.scorers == ["match", "judge"]


def test_the_sweep_report_compares_models_by_score(make_cfg, tmp_path, server):
    sweep = tmp_path / "sweep"
    ds = write_jsonl(tmp_path / "d.jsonl", rows_of(2))
    for name, passes in (("model=a", True), ("model=b", False)):
        job = sweep / name
        cfg = make_cfg("samples_per_prompt=2", f"model.name=m-{name[-1]}", dataset=ds)
        assert run_inprocess(cfg, job)[0] == 0
        score_by_hand(job, {(i, s): passes for i in range(2) for s in range(2)})
        run_inprocess(cfg, job)
    html = build_report(sweep).read_text()
    assert "match pass@1" in html and "match pass@2" in html
    assert "1.000" in html and "0.000" in html


def test_evaluation_prints_the_results_table(make_cfg, tmp_path, run_dir, server):
    evaluation_filters = ("filters.require_reasoning=false", "filters.hallucinated_tools=keep")
    ds, overrides = scored_run(make_cfg, tmp_path, run_dir, *evaluation_filters)
    proc = run_cli(
        "model=local_server",
        f"model.base_url={server.url}",
        "progress=false",
        f"sandbox.local.root={tmp_path / 'sandboxes'}",
        "+experiment=evaluation",
        f"dataset_file={ds}",
        "run_name=t",
        f"hydra.run.dir={run_dir}",
        *overrides,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    out = proc.stdout
    assert "Results" in out and "pass@4" in out
    line = next(x for x in out.splitlines() if "match" in x and "scripted-a" in x)
    assert "12" in line and "0.500 ± 0.289" in line and "0.667 ± 0.333" in line
    stats = json.loads((run_dir / "statistics.json").read_text())
    assert [(r["model"], r["scorer"]) for r in stats["results"]] == [("scripted-a", "match"), ("scripted-a", "judge")]


def test_shards_of_k_samples_merge_in_order_with_the_scores_computed_again(make_cfg, tmp_path, server):
    ds = write_jsonl(tmp_path / "d.jsonl", rows_of(3))
    dirs = []
    for i in range(2):
        d = tmp_path / f"shard{i}"
        cfg = make_cfg(f"shard.index={i}", "shard.count=2", "samples_per_prompt=4", dataset=ds)
        assert run_inprocess(cfg, d)[0] == 0
        score_by_hand(d, PASSES)
        run_inprocess(cfg, d)
        dirs.append(d)
    stats = merge(tmp_path / "merged", dirs)
    entries = read_jsonl(tmp_path / "merged" / "trajectories.jsonl")
    assert [(e["prompt_index"], e["metadata"]["sample_index"]) for e in entries] == [
        (i, s) for i in range(3) for s in range(4)
    ]
    assert stats["samples_per_prompt"] == 4
    match = stats["scores"]["overall"]["match"]  # the same rows as one run: not the sum of the shards' figures
    assert (match["rows"], match["samples"], match["pass_at_1"]) == (3, 12, 0.5)
    assert match["pass_at_k"] == pytest.approx(2 / 3)
    assert [r["scorer"] for r in stats["results"]] == ["match", "judge"]


# -- k samples through kill -9 and resume ------------------------------------------------------


@pytest.mark.slow
def test_k_samples_through_kill_minus_9_and_resume_exactly_once(server, tmp_path):
    rng = random.Random(18)
    rows = [{"prompt": f"task {i % 9}"} for i in range(12)]  # duplicates too: row identity + sample index
    k = 3
    ds = write_jsonl(tmp_path / "d.jsonl", rows)
    run_dir = tmp_path / "run"
    server.latency = 0.03
    args = cli_args(server, tmp_path, ds, run_dir, "num_workers=4", "batch_size=5", f"samples_per_prompt={k}")
    # 72 model calls (2 a sample); each kill after 1-7 of them, at a held call (mid-run by construction).
    kills, _ = kill_mid_run(args, tmp_path / "cli.log", server, rng, kills=8, calls=(1, 7))
    assert kills == 8
    entries = read_jsonl(run_dir / "trajectories.jsonl")
    # Every (row, sample) exactly once, in order.
    assert [(e["prompt_index"], e["metadata"]["sample_index"]) for e in entries] == [
        (i, s) for i in range(len(rows)) for s in range(k)
    ]
    assert len({e["metadata"]["prompt_key"] for e in entries}) == len(rows) * k
    terms = terminal_records(run_dir)
    assert len(terms) == len(rows) * k and set(terms.values()) == {1}
    stats = json.loads((run_dir / "statistics.json").read_text())
    assert stats["prompts"]["ok"] == len(rows) * k and stats["prompts"]["pending"] == 0
