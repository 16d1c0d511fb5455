"""Sweeps through `hydra/launcher=slurm` on a real single-node SLURM cluster (2 CPUs: two 1-CPU jobs at once)."""

from __future__ import annotations

import re
import subprocess
from collections import Counter

import pytest

from hermes_runner.rundir.sweep import read_jobs

from tests.helpers.run import LiveRunner, read_jsonl, write_jsonl
from tests.helpers.slurm import ensure_cluster, job_env, state, sweep_argv, sweep_conf

pytestmark = pytest.mark.slurm
PROMPTS = 6  # per job, 2 model calls each (a tool call, then the answer)


@pytest.fixture(autouse=True)
def cluster():
    ensure_cluster()


def test_cancelled_job_is_recorded_and_the_rerun_makes_only_the_missing_calls(server, tmp_path):
    """alpha and beta run, gamma pends (Resources: the node's 2 CPUs are taken) and is reported so; beta is
    cancelled while its calls are held: the sweep exits 130, jobs.jsonl says cancelled; the rerun runs beta's
    prompts only."""
    models = ("alpha", "beta", "gamma")
    conf = sweep_conf(
        tmp_path, server.url, write_jsonl(tmp_path / "d.jsonl", [{"prompt": f"t{i}"} for i in range(PROMPTS)]), models
    )
    sweep_dir = tmp_path / "multirun"
    argv = sweep_argv(conf, sweep_dir, "model=alpha,beta,gamma")
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
    assert {r["status"] for r in read_jobs(sweep_dir).values()} == {"done"}
    assert "sacct" not in res.stdout + res.stderr
