"""Sweeps through `hydra/launcher=slurm` on a real single-node SLURM cluster (2 CPUs: two 1-CPU jobs at once)."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter

import pytest

from hermes_runner.rundir.sweep import read_jobs

from tests.helpers.run import LiveRunner, read_jsonl, write_jsonl
from tests.helpers.slurm import ensure_cluster, job_env, job_name, state, sweep_argv, sweep_conf

pytestmark = pytest.mark.slurm
PROMPTS = 6  # per job, 2 model calls each (a tool call, then the answer)


@pytest.fixture
def jobs_named(request):
    """The cluster up, and a SLURM job name for the test's jobs: they are cancelled after it, also a failed one's."""
    ensure_cluster()
    yield job_name(request.node.name)
    subprocess.run(["scancel", "-n", job_name(request.node.name)], check=False)


def test_cancelled_job_is_recorded_and_the_rerun_makes_only_the_missing_calls(server, tmp_path, jobs_named):
    """alpha and beta run, gamma pends (Resources: the node's 2 CPUs are taken) and is reported so; beta is
    cancelled while its calls are held: the sweep exits 130, jobs.jsonl says cancelled; the rerun runs beta's
    prompts only."""
    models = ("alpha", "beta", "gamma")
    conf = sweep_conf(
        tmp_path, server.url, write_jsonl(tmp_path / "d.jsonl", [{"prompt": f"t{i}"} for i in range(PROMPTS)]), models
    )
    sweep_dir = tmp_path / "multirun"
    argv = sweep_argv(conf, sweep_dir, "model=alpha,beta,gamma", name=jobs_named)
    server.hold()
    with LiveRunner(argv, env=job_env()) as run:
        run.wait_for(lambda: server.held == 4, 120, "alpha's and beta's first calls held", state=lambda: server.held)
        pending = re.compile(r"job (\d+)_2 \(\+experiment=sweep,model=gamma\) is pending: Resources")
        run.wait_for(lambda: pending.search(run.output), 60, "gamma reported pending with SLURM's reason")
        array = pending.search(run.output)[1]
        assert {r.body["model"] for r in server.requests} == {"alpha", "beta"}
        subprocess.run(["scancel", f"{array}_1"], check=True)
        run.wait_for(lambda: (s := state(f"{array}_1")) is None or s.state == "CANCELLED", 60, "beta cancelled")
        server.release()
        assert run.proc.wait(timeout=180) == 130, run.output[-3000:]
    assert "sacct" not in run.output
    jobs = {r["overrides"][-1]: (r["status"], r["exit_code"]) for r in read_jobs(sweep_dir).values()}
    assert jobs == {"model=alpha": ("done", 0), "model=beta": ("cancelled", 130), "model=gamma": ("done", 0)}
    beta = sweep_dir / "+experiment=sweep,model=beta"
    kept = len(read_jsonl(beta / "trajectories.jsonl")) if (beta / "trajectories.jsonl").exists() else 0
    assert kept == 0  # (its first calls were held when it was cancelled)

    first = len(server.requests)
    res = subprocess.run(argv, capture_output=True, text=True, env=job_env(), timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert Counter(r.body["model"] for r in server.requests[first:]) == {"beta": 2 * PROMPTS}
    # Every call beta's endpoint saw is in its usage.jsonl and statistics, the 2 cut off by the cancel too.
    sent = sum(r.body["model"] == "beta" for r in server.requests)
    assert json.loads((beta / "statistics.json").read_text())["model_calls"]["started"] == sent == 2 * PROMPTS + 2
    assert sum(json.loads(ln)["event"] == "start" for ln in (beta / "usage.jsonl").read_text().splitlines()) == sent
    assert {r["status"] for r in read_jobs(sweep_dir).values()} == {"done"}
    assert "sacct" not in res.stdout + res.stderr


def test_time_limit_requeues_the_job_max_num_timeout_times_then_it_ends_timed_out(server, tmp_path, jobs_named):
    """SLURM signals the job before its time limit (signal_delay_s); submitit requeues it once
    (max_num_timeout=1) and it starts again, resuming; the second time it ends: timed_out in jobs.jsonl."""
    conf = sweep_conf(tmp_path, server.url, write_jsonl(tmp_path / "d.jsonl", [{"prompt": "t0"}]), ("alpha",))
    sweep_dir = tmp_path / "multirun"
    limits = ("hydra.launcher.timeout_min=1", "hydra.launcher.max_num_timeout=1", "hydra.launcher.signal_delay_s=50")
    argv = sweep_argv(conf, sweep_dir, "model=alpha", *limits, name=jobs_named)
    server.hold()
    try:
        with LiveRunner(argv, env=job_env()) as run:
            run.wait_for(lambda: server.held == 1, 120, "the job's first call held")
            requeued = re.compile(r"job (\d+) \(\+experiment=sweep,model=alpha\) is pending: BeginTime")
            run.wait_for(lambda: requeued.search(run.output), 120, "the job requeued, reported pending")
            # (SLURM holds a requeued job back for a while; the test does not wait for that)
            subprocess.run(
                ["scontrol", "update", f"JobId={requeued.search(run.output)[1]}", "StartTime=now"], check=True
            )
            run.wait_for(lambda: server.held == 2, 180, "the requeued job's call held", state=lambda: server.held)
            assert run.proc.wait(timeout=180) == 130, run.output[-3000:]
    finally:
        server.release()
    ((status, code, error),) = [(r["status"], r["exit_code"], r["error"]) for r in read_jobs(sweep_dir).values()]
    assert (status, code) == ("timed_out", 130), error
    assert "sacct" not in run.output


def test_a_job_no_node_could_run_is_refused_before_submitting(server, tmp_path, jobs_named):
    """sbatch would accept `-c 64` on a 2-CPU node and leave it pending forever (PartitionConfig)."""
    conf = sweep_conf(tmp_path, server.url, write_jsonl(tmp_path / "d.jsonl", [{"prompt": "t0"}]), ("alpha",))
    argv = sweep_argv(conf, tmp_path / "multirun", "model=alpha", "hydra.launcher.cpus_per_task=64", name=jobs_named)
    res = subprocess.run(argv, capture_output=True, text=True, env=job_env(), timeout=120)
    assert res.returncode == 2, res.stdout[-2000:] + res.stderr[-2000:]
    assert "a job asks cpus_per_task=64, mem_gb=4 but the nodes of partition debug have at most" in res.stderr
    assert not (tmp_path / "multirun" / ".submitit").exists() and server.requests == []
    assert subprocess.run(["squeue", "-h", "-n", jobs_named], capture_output=True, text=True).stdout == ""


def test_shards_of_a_slurm_sweep_merge_then_report_and_export(server, tmp_path, jobs_named):
    """A sharded run as a SLURM sweep over shard.index (a job per shard, side by side), merged with
    hermes_runner.merge; the merged dir reports and exports like one run."""
    rows = [{"prompt": f"t{i}"} for i in range(5)]
    conf = sweep_conf(tmp_path, server.url, write_jsonl(tmp_path / "d.jsonl", rows), ("alpha",))
    sweep_dir = tmp_path / "multirun"
    argv = sweep_argv(conf, sweep_dir, "model=alpha", "shard.count=2", "shard.index=0,1", name=jobs_named)
    res = subprocess.run(argv, capture_output=True, text=True, env=job_env(), timeout=300)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    shards = sorted(sweep_dir / d for d in read_jobs(sweep_dir))
    assert len(shards) == 2 and all("shard.index=" in s.name for s in shards)
    merged, py = tmp_path / "merged", [sys.executable, "-m"]
    for cmd in (
        ["hermes_runner.merge", str(merged), *map(str, shards)],
        ["hermes_runner.report", str(merged)],
        ["hermes_runner.export", str(merged), "--to", "parquet", "--out", str(tmp_path / "pq")],
    ):
        out = subprocess.run(py + cmd, capture_output=True, text=True, env=job_env(), timeout=120)
        assert out.returncode == 0, out.stdout + out.stderr
    prompts = sorted(e["conversations"][1]["value"] for e in read_jsonl(merged / "trajectories.jsonl"))
    assert prompts == sorted(r["prompt"] for r in rows)  # every prompt once
    assert (merged / "report.html").read_text().count('"st":"completed"') == len(rows)
    assert len(server.requests) == 2 * len(rows)
