"""Sweep job dirs named by the overrides that define the data, readable; `jobs.jsonl`; launcher job errors."""

from __future__ import annotations

import pytest

from hermes_runner.config import DATA_KEYS
from hermes_runner.rundir.sweep import VALUE_MAX, defines_data, job_dirname, read_jobs

from tests.helpers.run import base_overrides, read_jsonl, run_cli, write_jsonl

LONG_A = "nousresearch/hermes-4-405b-fp8-experimental-preview-2026-11-alpha-instruct"
LONG_B = "nousresearch/hermes-4-405b-fp8-experimental-preview-2026-11-gamma-instruct"


def test_dirname_keeps_data_overrides_readable():
    name = job_dirname([f"model.name={LONG_A}", "num_workers=8", "max_samples=20", "model=openrouter",
                        "limits.max_cost_usd=5", "executor=ray", "hydra.launcher.timeout_min=9", "+experiment=x"])  # fmt: skip
    assert name.startswith("+experiment=x,model.name=nousresearch...") and name.endswith(",model=openrouter")
    value = name.split("model.name=")[1].split(",")[0]
    assert len(value) == VALUE_MAX and "-alpha-instruct-" in value  # the tail that tells models apart
    other = job_dirname([f"model.name={LONG_B}", "model=openrouter", "+experiment=x"])
    assert other != name and "-gamma-instruct-" in other
    assert job_dirname(["model.name=gpt-4o", "num_workers=3"]) == "model.name=gpt-4o"
    assert job_dirname(["num_workers=3"]) == "default"
    assert job_dirname(["dataset_file=data/a.jsonl"]) == "dataset_file=data_a.jsonl"  # no path separators


def test_the_one_list_decides():
    for key in DATA_KEYS:
        assert defines_data(key)
    assert defines_data("model") and defines_data("filters.require_reasoning") and defines_data("output")
    for key in ("max_samples", "num_workers", "resume", "executor", "limits.max_cost_usd", "hydra.launcher"):
        assert not defines_data(key), key


def test_sweep_dirs_survive_non_data_changes_and_are_indexed(server, tmp_path):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": f"p{i}"} for i in range(3)])
    sweep_dir = tmp_path / "sweep"
    common = [*base_overrides(server, tmp_path), f"dataset_file={ds}", f"hydra.sweep.dir={sweep_dir}"]
    res = run_cli("-m", f"model.name={LONG_A},{LONG_B}", "max_samples=2", *common)
    assert res.returncode == 0, res.stderr[-3000:]
    jobs = sorted(p.name for p in sweep_dir.iterdir() if p.is_dir() and not p.name.startswith("."))
    assert len(jobs) == 2 and all(len(j) < 200 for j in jobs)
    assert any("-alpha-instruct-" in j for j in jobs) and any("-gamma-instruct-" in j for j in jobs)

    server.reset()  # more samples, other workers: the same jobs go on, each from where it was
    res = run_cli("-m", f"model.name={LONG_B},{LONG_A}", "max_samples=3", "num_workers=1", *common)
    assert res.returncode == 0, res.stderr[-3000:]
    assert sorted(p.name for p in sweep_dir.iterdir() if p.is_dir() and not p.name.startswith(".")) == jobs
    assert res.stdout.count("2 already done, 1 to run") == 2, res.stdout
    assert len(server.requests) == 2 * 2  # one new prompt per job, two turns each
    for job in jobs:
        assert len(read_jsonl(sweep_dir / job / "trajectories.jsonl")) == 3

    index = read_jobs(sweep_dir)
    assert sorted(index) == jobs and len(read_jsonl(sweep_dir / "jobs.jsonl")) == 2  # one line per job
    for job, row in index.items():
        assert row["status"] == "done" and row["exit_code"] == 0 and "max_samples=3" in row["overrides"]
        assert row["label"] == job
    page = (sweep_dir / "report.html").read_text()
    assert all(job.split("model.name=")[1].split(",")[0] in page for job in jobs)  # legends: the readable names


def test_sweep_over_an_option_that_defines_no_data_is_refused(server, tmp_path):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "p"}])
    sweep_dir = tmp_path / "sweep"
    res = run_cli("-m", "num_workers=1,2", *base_overrides(server, tmp_path), f"dataset_file={ds}",
                  f"hydra.sweep.dir={sweep_dir}")  # fmt: skip
    assert res.returncode == 2 and "the sweep varies num_workers" in res.stderr, res.stderr[-2000:]
    assert not server.requests and not (sweep_dir / "jobs.jsonl").exists()


@pytest.mark.timeout(300)
def test_submitit_job_error_names_its_log_and_shows_its_tail(server, tmp_path):
    pytest.importorskip("hydra_plugins.hydra_submitit_launcher")
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "p"}])
    sweep_dir = tmp_path / "sweep"
    res = run_cli("-m", "hydra/launcher=local", "max_turns=0,1", "dry_run=true", *base_overrides(server, tmp_path),
                  f"dataset_file={ds}", f"hydra.sweep.dir={sweep_dir}", timeout=240)  # fmt: skip
    assert res.returncode == 2, res.stderr[-3000:]
    err = res.stderr
    assert "the job did not start; see the error above" not in err
    line = next(ln for ln in err.splitlines() if ln.startswith("error: sweep job "))
    assert "max_turns=0" in line and "did not start" in line and "/.submitit/" in line and "_log.err" in line
    assert "max_turns must be >= 1, not 0" in err.split("last lines of", 1)[1]  # the log's tail, shown
    (row,) = (r for d, r in read_jobs(sweep_dir).items() if "max_turns=0" in d.split(","))
    assert row["status"] == "config" and row["exit_code"] == 2 and "_log.err" in row["error"]


def test_basic_launcher_job_error_exits_2_after_the_others_ran(server, tmp_path):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "p"}])
    sweep_dir = tmp_path / "sweep"
    res = run_cli("-m", "max_turns=1,0", *base_overrides(server, tmp_path), f"dataset_file={ds}",
                  f"hydra.sweep.dir={sweep_dir}")  # fmt: skip
    assert res.returncode == 2 and "Traceback" not in res.stderr, res.stderr[-3000:]
    line = res.stderr.strip().splitlines()[-1]
    assert line.startswith("error: sweep job ") and "max_turns=0" in line and line.endswith("run.log")
    assert sorted(r["status"] for r in read_jobs(sweep_dir).values()) == ["config", "done"]
