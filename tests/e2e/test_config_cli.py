"""The Hydra app: composition, validation before any model call, experiments, CLI end to end."""

from __future__ import annotations

import json

import pytest
from hydra.errors import ConfigCompositionException
from omegaconf.errors import ValidationError

from hermes_runner.config import DistributionConfig, Effort, EndpointConfig, ModelConfig, ProviderSort

from tests.helpers.run import base_overrides, compose_cfg, read_jsonl, run_cli, run_inprocess, write_jsonl


def test_cli_end_to_end_writes_every_output(server, tmp_path):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": f"p{i}", "topic": "t"} for i in range(12)])
    run_dir = tmp_path / "outputs" / "my_run"
    res = run_cli(
        *base_overrides(server, tmp_path),
        f"dataset_file={ds}",
        "run_name=my_run",
        "num_workers=3",
        "batch_size=5",
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr[-3000:]
    assert "trajectories.jsonl" in res.stdout
    names = {p.name for p in run_dir.iterdir()}
    assert {"batch_0.jsonl", "batch_1.jsonl", "batch_2.jsonl", "trajectories.jsonl", "statistics.json",
            "checkpoint.json", "ledger.jsonl", ".hydra", "run.log"} <= names  # fmt: skip
    assert [e["prompt_index"] for e in read_jsonl(run_dir / "trajectories.jsonl")] == list(range(12))
    assert json.loads((run_dir / "statistics.json").read_text())["prompts"]["ok"] == 12


def test_typo_and_wrong_type_fail_before_any_model_call(server, tmp_path):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "p"}])
    common = [*base_overrides(server, tmp_path), f"dataset_file={ds}", f"hydra.run.dir={tmp_path / 'r'}"]
    res = run_cli(*common, "num_wrokers=3")
    assert res.returncode == 2 and "num_wrokers" in res.stderr
    res = run_cli(*common, "num_workers=many")
    assert res.returncode == 2 and "num_workers" in res.stderr
    res = run_cli(*common, "reasoning.effort=extreme")
    assert res.returncode == 2 and "effort" in res.stderr
    res = run_cli(*common, "model=no_such_model")
    assert res.returncode == 2 and "no_such_model" in res.stderr
    res = run_cli(*common, "+num_worker=8")  # `+` adds any key to the config: the schema must refuse it
    assert res.returncode == 2 and "num_worker (no such option at the top level; did you mean num_workers?)" in (
        res.stderr
    )
    res = run_cli(*common, "+sandbox.docker.pid_limit=3")
    assert res.returncode == 2 and "sandbox.docker.pid_limit" in res.stderr and "pids_limit" in res.stderr
    assert server.requests == []


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("fsync_interval_s=0", "fsync_interval_s must be > 0, not 0"),
        ("limits.timeout_s=-1", "limits.timeout_s must be > 0 (or null), not -1"),
        ("sandbox.command_timeout_s=-1", "sandbox.command_timeout_s must be > 0, not -1"),
        ("sandbox.max_output_chars=-5", "sandbox.max_output_chars must be >= 1, not -5"),
        ("sandbox.docker.pids_limit=0", "sandbox.docker.pids_limit must be >= 1, not 0"),
        ("sandbox.local.pids_limit=-1", "sandbox.local.pids_limit must be >= 0, not -1"),
        ("model.max_retries=-1", "model.max_retries must be >= 0, not -1"),
        ("shard.index=3", "shard.index must be in [0, shard.count)"),
        ("sandbox.local.disk_limit=lots", "sandbox.local.disk_limit: not a size: 'lots' (e.g. 512m, 1g)"),
        ("sandbox.docker.mem_limit=-1g", "sandbox.docker.mem_limit: a size must not be negative: '-1g'"),
        ("sandbox.backend=dokcer", "sandbox.backend must be local | docker | podman or a class of yours"),
        ("executor.backend=rya", "executor.backend must be local | ray or a class of yours"),
    ],
)
def test_bad_values_are_refused_before_any_side_effect(make_cfg, tmp_path, run_dir, server, caplog, override, message):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "p"}])
    code, _ = run_inprocess(make_cfg(override, dataset=ds), run_dir)
    assert code == 2 and message in caplog.text
    assert not run_dir.exists() and server.requests == []


def test_every_value_rule_names_an_existing_option():
    import dataclasses
    import enum

    from hermes_runner import config
    from hermes_runner.config.check import TESTS, check
    from hermes_runner.config.root import RunConfig

    cfg = RunConfig(model=ModelConfig(name="m", base_url="u"), distribution=DistributionConfig(name="d"))
    cfg.tools.moa.reference_models = [EndpointConfig(model="a")]
    sections = [c for c in vars(config).values() if dataclasses.is_dataclass(c)] + [RunConfig]
    for section in sections:
        for key, rule in getattr(section, "RULES", {}).items():  # no rule is silently skipped by a typo in its key
            assert key in {f.name for f in dataclasses.fields(section)}, (section, key)
            assert rule in TESTS or rule == "size" or issubclass(rule, enum.Enum), (section, key)
    assert sum(len(getattr(s, "RULES", {})) for s in sections) >= 80
    check(cfg)  # the defaults pass


def test_structured_configs_validate_types_at_compose_time():
    with pytest.raises(ConfigCompositionException) as err:
        compose_cfg(["max_turns=ten"])
    assert isinstance(err.value.__cause__, ValidationError)
    with pytest.raises(ConfigCompositionException):
        compose_cfg(["sandbox.no_such_option=1"])
    cfg = compose_cfg(["provider=cheapest", "reasoning=high", "provider.only=[a,b]"])
    assert cfg.provider.sort == ProviderSort.price and cfg.reasoning.effort == Effort.high
    assert cfg.provider.only == ["a", "b"]


def test_experiments_compose():
    train = compose_cfg(["+experiment=training_data"])
    assert (train.max_turns, train.num_workers, train.distribution.name) == (15, 8, "default")
    ev = compose_cfg(["+experiment=evaluation"])
    assert (ev.max_turns, ev.num_workers) == (10, 4)
    assert ev.filters.require_reasoning is False


def test_cfg_job_and_list_distributions(tmp_path):
    res = run_cli("--cfg", "job", cwd=tmp_path)
    assert res.returncode == 0 and "dataset_file:" in res.stdout and "distribution:" in res.stdout
    res = run_cli("list_distributions=true", f"hydra.run.dir={tmp_path / 'r'}")
    assert res.returncode == 0
    assert "terminal_only" in res.stdout and "% chance" in res.stdout


def test_unknown_toolset_in_distribution_is_a_clear_error(server, tmp_path):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "p"}])
    res = run_cli(
        *base_overrides(server, tmp_path),
        f"dataset_file={ds}",
        f"hydra.run.dir={tmp_path / 'r'}",
        "+distribution.toolsets.teleport=50",
    )
    assert res.returncode == 2 and "teleport" in res.stderr and "unknown toolset" in res.stderr
    assert server.requests == []


def test_missing_api_key_is_reported_before_any_call(server, tmp_path):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "p"}])
    res = run_cli(
        *base_overrides(server, tmp_path),
        f"dataset_file={ds}",
        f"hydra.run.dir={tmp_path / 'r'}",
        "model.api_key_env=HR_TEST_KEY_THAT_IS_NOT_SET",
    )
    assert res.returncode == 2 and "HR_TEST_KEY_THAT_IS_NOT_SET" in res.stderr
    assert server.requests == []


# -- issue 29: bad inputs get one line and exit 2, before anything is written ------------------------------


def one_error_line(res) -> str:
    """The one line a refused invocation prints (no traceback)."""
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert res.returncode == 2 and len(lines) == 1, res.stderr[-2000:]
    assert lines[0].startswith("error: ") or "[ERROR] " in lines[0], lines  # (before the job, or the job's log)
    return lines[0]


def test_a_run_name_outside_the_output_root_is_refused_before_anything_is_written(server, tmp_path):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "p"}])
    cwd = tmp_path / "a" / "b"
    cwd.mkdir(parents=True)
    common = [*base_overrides(server, tmp_path), f"dataset_file={ds}"]
    for name in ("../../X", "/tmp/X", "..", ""):
        line = one_error_line(run_cli(*common, f"run_name={name}", cwd=cwd))
        assert "run_name" in line and ("not a plain directory name" in line or "empty" in line), line
    line = one_error_line(run_cli("-m", *common, "run_name=ok,../../X", cwd=cwd))  # a sweep's jobs, the same
    assert "'../../X' is not a plain directory name" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a", "d.jsonl"] and list(cwd.iterdir()) == []
    assert server.requests == []


def test_a_unicode_run_name_runs_as_typed(server, tmp_path):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "p"}])
    res = run_cli(*base_overrides(server, tmp_path), f"dataset_file={ds}", "run_name=ünï 日本", cwd=tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
    assert (tmp_path / "outputs" / "ünï 日本" / "trajectories.jsonl").is_file()
    line = one_error_line(run_cli(*base_overrides(server, tmp_path), f"dataset_file={ds}", "+ü=1", cwd=tmp_path))
    assert "characters outside ASCII only in quoted values: key='välue'" in line


def snapshot(root) -> dict:
    """Every path under `root` with its bytes (None: a directory)."""
    return {str(p.relative_to(root)): None if p.is_dir() else p.read_bytes() for p in sorted(root.rglob("*"))}


def test_a_refused_run_dir_is_left_byte_identical(server, tmp_path):
    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "p"}])
    common = [*base_overrides(server, tmp_path), f"dataset_file={ds}"]
    foreign = tmp_path / "outputs" / "foreign"  # not a run of ours: the original runner's files, unreadable
    foreign.mkdir(parents=True)
    (foreign / "batch_0.jsonl").write_text("not json\n")
    (foreign / "run.log").write_text("someone else's log\n")
    before = snapshot(foreign)
    res = run_cli(*common, "run_name=foreign", cwd=tmp_path)
    assert res.returncode == 2 and "is not JSON" in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert snapshot(foreign) == before  # no .hydra/, no .lock, nothing appended to its run.log

    assert run_cli(*common, "run_name=mine", cwd=tmp_path).returncode == 0
    mine = tmp_path / "outputs" / "mine"
    assert {".hydra", "run.log", ".lock"} <= {p.name for p in mine.iterdir()}
    before = snapshot(mine)
    res = run_cli(*common, "run_name=mine", "resume=false", "seed=3", cwd=tmp_path)
    assert res.returncode == 2 and "resume=false" in res.stderr and "Traceback" not in res.stderr, res.stderr
    assert snapshot(mine) == before  # its .hydra/ still the config it ran with
    line = one_error_line(run_cli(*common, "run_name=new", "fsync_interval_s=0", cwd=tmp_path))
    assert "fsync_interval_s must be > 0" in line
    assert sorted(p.name for p in (tmp_path / "outputs").iterdir()) == ["foreign", "mine"]


@pytest.mark.timeout(120)  # (a FIFO opened for reading blocked the run for good)
def test_a_fifo_or_a_device_as_input_is_one_line_and_leaves_no_run_dir(server, tmp_path):
    import os

    ds = write_jsonl(tmp_path / "d.jsonl", [{"prompt": "p"}])
    os.mkfifo(tmp_path / "pipe")
    common = [*base_overrides(server, tmp_path), "run_name=r"]
    line = one_error_line(run_cli(*common, f"dataset_file={tmp_path / 'pipe'}", cwd=tmp_path))
    assert "is a FIFO: a dataset is a regular file or a save_to_disk directory" in line
    res = run_cli(*common, f"dataset_file={ds}", "prefill_messages_file=/dev/zero", cwd=tmp_path)
    assert "/dev/zero is not a regular file (a character device)" in one_error_line(res)
    assert not (tmp_path / "outputs").exists() and server.requests == []
