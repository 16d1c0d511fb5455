"""Multirun sweeps: each job in a stable subdir named by its overrides, resumed on its own."""

from __future__ import annotations

import json
from collections import Counter

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
