"""Multirun sweeps: each job in a stable subdir named by its overrides, resumed on its own."""

from __future__ import annotations

import json
from collections import Counter

from hermes_runner.rundir.sweep import read_jobs

from tests.helpers.run import base_overrides, read_jsonl, run_cli, write_jsonl


def test_sweep_reruns_finish_only_what_is_missing(server, tmp_path):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": f"p{i}"} for i in range(3)])
    sweep_dir = tmp_path / "sweep"
    common = [*base_overrides(server, tmp_path), f"dataset_file={ds}", f"hydra.sweep.dir={sweep_dir}"]

    res = run_cli("-m", "model.name=alpha,beta", *common)
    assert res.returncode == 0, res.stderr[-2000:]
    assert Counter(r.body["model"] for r in server.requests) == {"alpha": 6, "beta": 6}
    jobs = {p.name: p for p in sweep_dir.iterdir() if p.is_dir()}
    assert len(jobs) == 2 and all("model.name=" in name for name in jobs)

    # Reordered, with a job added: only the new job calls the model; no job touches another's dir.
    server.reset()
    res = run_cli("-m", "model.name=gamma,beta,alpha", *common)
    assert res.returncode == 0, res.stderr[-2000:]
    assert Counter(r.body["model"] for r in server.requests) == {"gamma": 6}
    jobs = {p.name: p for p in sweep_dir.iterdir() if p.is_dir()}
    assert len(jobs) == 3
    for path in jobs.values():
        model = json.loads((path / "run.json").read_text())["data_config"]["model.name"]
        entries = read_jsonl(path / "trajectories.jsonl")
        assert len(entries) == 3 and {e["metadata"]["model"] for e in entries} == {model}


def test_sweep_exits_with_its_worst_job_and_indexes_each_code(server, tmp_path):
    """A job stopped by a down endpoint (a closed port) makes the sweep exit 4, as a single run does; jobs.jsonl
    has each job's own code."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}/v1"  # (nothing listens once it is closed)
    conf = tmp_path / "conf"
    (conf / "model").mkdir(parents=True)
    for name, url in (("up", server.url), ("down", closed)):
        (conf / "model" / f"{name}.yaml").write_text(
            f"defaults:\n  - local_server\n  - _self_\nname: {name}\nbase_url: {url}\n"
        )
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "p0"}])
    sweep_dir = tmp_path / "sweep"
    common = [*base_overrides(server, tmp_path)[2:], f"dataset_file={ds}", f"hydra.sweep.dir={sweep_dir}"]
    res = run_cli("-m", f"hydra.searchpath=[file://{conf}]", "model=up,down", *common)
    assert res.returncode == 4, res.stdout[-2000:] + res.stderr[-2000:]
    codes = sorted((r["status"], r["exit_code"]) for r in read_jobs(sweep_dir).values())
    assert codes == [("done", 0), ("endpoint_down", 4)]
