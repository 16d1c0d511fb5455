"""Multirun sweeps through hydra-submitit-launcher: each job its own process and subdir, resumable."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from hydra.utils import get_class

from hermes_runner.rundir.sweep import read_jobs

from tests.helpers.run import CONF, compose_cfg, read_jsonl, run_cli, script, write_jsonl
from tests.helpers.slurm import sweep_conf

pytest.importorskip("hydra_plugins.hydra_submitit_launcher")


def test_model_sweep_through_submitit_local_resumes_per_job(server, tmp_path):
    flaky = {"content": "done", "reasoning": "r", "fail": [{"status": 400}, {"status": 400}]}  # each model's 1st try
    rows = [{"prompt": f"task {i}"} for i in range(3)] + [{"prompt": script(flaky, text="flaky task")}]
    conf = sweep_conf(tmp_path, server.url, write_jsonl(tmp_path / "d.jsonl", rows))
    sweep_dir = tmp_path / "multirun"

    def sweep(models: str, code: int):
        res = run_cli(
            "-m", "hydra/launcher=local", f"hydra.searchpath=[file://{conf}]", f"hydra.sweep.dir={sweep_dir}",
            "+experiment=sweep", f"model={models}", timeout=300,
        )  # fmt: skip
        assert res.returncode == code, res.stdout[-3000:] + res.stderr[-3000:]
        return res

    sweep("alpha,beta", 1)  # a prompt of each job failed: each job exits 1, and so does the sweep
    jobs = {name: sweep_dir / f"+experiment=sweep,model={name}" for name in ("alpha", "beta")}
    subdirs = sorted(p.name for p in sweep_dir.iterdir() if p.is_dir() and not p.name.startswith("."))
    assert subdirs == sorted(p.name for p in jobs.values())
    assert list((sweep_dir / ".submitit").iterdir()), "the jobs did not go through submitit"
    for name, job in jobs.items():
        stats = json.loads((job / "statistics.json").read_text())
        assert stats["model"] == name and stats["prompts"]["ok"] == 3 and stats["prompts"]["failed"] == 1
    first = len(server.requests)
    assert Counter(r.body["model"] for r in server.requests) == {"alpha": 7, "beta": 7}  # 3 x 2 turns + 1 failed

    assert {r["status"] for r in read_jobs(sweep_dir).values()} == {"failed"}
    sweep("beta,alpha", 0)  # a rerun, in another order: each job finds its own subdir and runs only what is missing
    again = server.requests[first:]
    assert sorted((r.body["model"], r.prompt.split("\n")[0]) for r in again) == [
        ("alpha", "flaky task"), ("beta", "flaky task"),
    ]  # fmt: skip
    for name, job in jobs.items():
        rows = read_jsonl(job / "trajectories.jsonl")
        assert len(rows) == 4 and {r["metadata"]["model"] for r in rows} == {name}
        assert len(read_jsonl(job / "invocations.jsonl")) == 2
        assert json.loads((job / "statistics.json").read_text())["prompts"]["failed"] == 0


def test_slurm_launcher_config_composes(server, tmp_path):
    """The SLURM launcher options are real keys of the submitit plugin's schema (SLURM itself is not here)."""
    GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(CONF), version_base="1.3"):
        cfg = compose(
            config_name="config",
            overrides=["hydra/launcher=slurm", "hydra.launcher.partition=cpu", "hydra.launcher.mem_gb=16"],
            return_hydra_config=True,
        )
    launcher = cfg.hydra.launcher
    assert get_class(launcher._target_).__name__ == "SlurmLauncher"
    assert (launcher.partition, launcher.timeout_min, launcher.cpus_per_task, launcher.mem_gb) == ("cpu", 240, 1, 16)
    with pytest.raises(Exception, match="time_limit"):
        compose_cfg(["hydra/launcher=slurm", "hydra.launcher.time_limit=5"])
