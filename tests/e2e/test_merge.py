"""Sharded runs: deterministic slices, and `python -m hermes_runner.merge` combining them."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from hermes_runner.commands.merge import main
from hermes_runner.errors import ConfigError
from hermes_runner.rundir.merge import merge

from tests.helpers.run import ROOT, read_jsonl, run_inprocess, script, write_jsonl

N = 11


@pytest.fixture
def dataset(tmp_path):
    rows = []
    for i in range(N):
        if i % 4 == 3:  # some prompts are discarded (no reasoning), the rest kept with a tool call
            rows.append({"prompt": script({"content": f"plain answer {i}"}, text=f"t{i}")})
        else:
            rows.append({"prompt": f"task {i}"})
    return write_jsonl(tmp_path / "d.jsonl", rows)


def run_shards(make_cfg, dataset, tmp_path, count: int, *extra: str) -> list:
    dirs = []
    for i in range(count):
        d = tmp_path / f"shard{i}"
        cfg = make_cfg(f"shard.index={i}", f"shard.count={count}", *extra, dataset=dataset)
        code, _ = run_inprocess(cfg, d)
        assert code == 0
        dirs.append(d)
    return dirs


def test_shards_split_the_dataset_and_merge_like_one_run(make_cfg, dataset, tmp_path, server):
    whole = tmp_path / "whole"
    assert run_inprocess(make_cfg(dataset=dataset), whole)[0] == 0
    dirs = run_shards(make_cfg, dataset, tmp_path, 3)
    slices = [[r["prompt_index"] for r in read_jsonl(d / "trajectories.jsonl")] for d in dirs]
    assert slices[1] and all(i % 3 == 1 for i in slices[1])  # a deterministic slice per shard
    out = tmp_path / "merged"
    # As a user runs it (dirs given out of order).
    cli = subprocess.run(
        [sys.executable, "-m", "hermes_runner.merge", str(out), *map(str, reversed(dirs))],
        cwd=ROOT, capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert cli.returncode == 0, cli.stderr
    assert "merged 3 shards" in cli.stdout
    merged, reference = read_jsonl(out / "trajectories.jsonl"), read_jsonl(whole / "trajectories.jsonl")
    order = [r["prompt_index"] for r in merged]
    assert order == [r["prompt_index"] for r in reference] == sorted(i for s in slices for i in s)

    def turns(rows):  # (the scripted server numbers tool-call ids by request)
        return [[(m["from"], re.sub(r"call_\d+", "", m["value"])) for m in r["conversations"]] for r in rows]

    assert turns(merged) == turns(reference)
    got, want = (json.loads((d / "statistics.json").read_text()) for d in (out, whole))
    for key in ("prompts", "discarded_by_reason", "tool_statistics", "reasoning_statistics",
                "reasoning_statistics_kept", "toolsets_sampled", "api_calls", "total_prompts"):  # fmt: skip
        assert got[key] == want[key], key
    parts = [json.loads((d / "statistics.json").read_text())["usage"] for d in dirs]
    assert got["usage"] == {k: sum(p[k] for p in parts) for k in got["usage"]}  # (token counts vary with call ids)
    assert got["prompts"]["discarded"] == 2 and got["tool_statistics"]["terminal"]["count"] == 9
    assert [s["index"] for s in got["shards"]] == [0, 1, 2]
    assert json.loads((out / "merged.json").read_text())["data_config"]["shard.count"] == 3


def test_merge_refuses_mismatched_overlapping_or_missing_shards(make_cfg, dataset, tmp_path, server):
    dirs = run_shards(make_cfg, dataset, tmp_path, 2)
    other = tmp_path / "other"
    assert run_inprocess(make_cfg("shard.index=1", "shard.count=2", "seed=7", dataset=dataset), other)[0] == 0
    out = tmp_path / "out"
    with pytest.raises(ConfigError, match=r"another config(.|\n)*seed: 0 -> 7"):
        merge(out, [dirs[0], other])
    again = tmp_path / "again"
    assert run_inprocess(make_cfg("shard.index=1", "shard.count=2", dataset=dataset), again)[0] == 0
    with pytest.raises(ConfigError, match="both shard 1: they overlap"):
        merge(out, [*dirs, again])
    with pytest.raises(ConfigError, match=r"shards \[1\] of 2 are missing"):
        merge(out, [dirs[0]])
    with pytest.raises(ConfigError, match="holds a run"):
        merge(dirs[1], [dirs[0]], partial=True)
    (dirs[1] / "statistics.json").unlink()
    with pytest.raises(ConfigError, match="no statistics.json"):
        merge(out, dirs)
    assert not out.exists()  # nothing written by a refused merge
    stats = merge(out, [dirs[0]], partial=True)
    assert stats["trajectories"] == len(read_jsonl(dirs[0] / "trajectories.jsonl"))


def test_merge_refuses_a_shard_whose_outputs_are_stale(make_cfg, dataset, tmp_path, server):
    dirs = run_shards(make_cfg, dataset, tmp_path, 2)
    lines = (dirs[0] / "trajectories.jsonl").read_text().splitlines(keepends=True)
    (dirs[0] / "trajectories.jsonl").write_text("".join(lines[:-1]))
    out = tmp_path / "out"
    with pytest.raises(ConfigError, match="out of date"):
        merge(out, dirs)
    assert not (out / "trajectories.jsonl").exists()


def test_a_run_dir_keeps_its_shard(make_cfg, dataset, tmp_path, server):
    d = tmp_path / "s"
    assert run_inprocess(make_cfg("shard.index=0", "shard.count=2", dataset=dataset), d)[0] == 0
    code, _ = run_inprocess(make_cfg("shard.index=1", "shard.count=2", dataset=dataset), d)
    assert code == 2  # refused: the data-defining config changed


def test_cli_reports_refusals(tmp_path, capsys):
    assert main([str(tmp_path / "o"), str(tmp_path / "nope")]) == 2
    assert "merge refused:" in capsys.readouterr().err and not (tmp_path / "o").exists()


def test_shards_of_an_edited_dataset_still_merge(make_cfg, dataset, tmp_path, server):
    dirs = run_shards(make_cfg, dataset, tmp_path, 2)
    rows = read_jsonl(dataset)
    rows[2] = {"prompt": "task 2 edited"}
    del rows[5]  # every later row moves to the other shard's slice
    write_jsonl(dataset, rows)
    for i, d in enumerate(dirs):
        assert run_inprocess(make_cfg(f"shard.index={i}", "shard.count=2", dataset=dataset), d)[0] == 0
    stats = merge(tmp_path / "out", dirs)
    merged = read_jsonl(tmp_path / "out" / "trajectories.jsonl")
    kept = [i for i, r in enumerate(rows) if "#script" not in r["prompt"]]
    assert [e["prompt_index"] for e in merged] == kept  # one entry per current row, no index twice
    assert [e["conversations"][1]["value"] for e in merged] == [rows[i]["prompt"] for i in kept]
    assert stats["trajectories"] == stats["prompts"]["ok"] == len(kept)
    assert stats["prompts"]["total"] == len(rows)


def test_a_merged_dir_exports_and_reports(make_cfg, dataset, tmp_path, server):
    import pyarrow.parquet as pq
    from datasets import load_from_disk

    from hermes_runner.commands.export import main as export_main
    from hermes_runner.commands.report import main as report_main
    from hermes_runner.report.page import build_report
    from hermes_runner.rundir.reader import RunData
    from hermes_runner.trajectory.export import export

    dirs = run_shards(make_cfg, dataset, tmp_path / "shards", 2)
    out = tmp_path / "merged"
    merge(out, dirs)
    stats = json.loads((out / "statistics.json").read_text())
    kept, discarded = stats["prompts"]["ok"], stats["prompts"]["discarded"]
    assert discarded == 2
    # With its shards in place: every outcome, read from the shards.
    run = RunData.load(out)
    assert run.merged_from == dirs and run.stats.ok == kept and sum(run.stats.discarded.values()) == discarded
    path, counts = export(out, "splits", tmp_path / "splits")
    assert counts == {"kept": kept, "discarded": discarded}
    assert load_from_disk(str(path))["discarded"].num_rows == discarded
    assert export_main([str(out), "--to", "parquet", "--out", str(tmp_path / "pq"), "--manifest"]) == 0
    rows = pq.read_table(tmp_path / "pq" / "trajectories.parquet").to_pylist()
    assert rows and all(r["provenance"]["runner_version"] and r["provenance"]["sampling"] for r in rows)  # shards'
    inputs = json.loads((tmp_path / "pq" / "export_manifest.json").read_text())["run"]["inputs"]
    assert {f"../shards/{d.name}/ledger.jsonl" for d in dirs} <= set(inputs)  # the shards' files too
    assert export_main(["--reproduce", str(tmp_path / "pq" / "export_manifest.json")]) == 0
    assert report_main([str(out)]) == 0
    html = (out / "report.html").read_text()
    assert html.count('"st":"discarded"') == discarded and html.count('"st":"completed"') == kept
    # Moved away from its shards: the merged trajectories alone (kept prompts), counts from its statistics.
    alone = tmp_path / "elsewhere" / "merged"
    alone.parent.mkdir()
    out.rename(alone)
    for d in dirs:
        d.rename(d.with_name(d.name + "-gone"))
    run = RunData.load(alone)
    assert not run.merged_from and len(run.final) == kept and sum(run.stats.discarded.values()) == discarded
    path, counts = export(alone, "hf", tmp_path / "hf")
    assert counts == {"kept": kept} and load_from_disk(str(path)).num_rows == kept
    assert export(alone, "splits", tmp_path / "sp2")[1] == {"kept": kept, "discarded": 0}
    page = build_report(alone)
    assert page.read_text().count('"st":"completed"') == kept
