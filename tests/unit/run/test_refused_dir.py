"""A run refused for its directory (issue 29) leaves that directory as it was: no .lock, no temp file
removed, nothing appended (the CLI's .hydra/ and run.log: tests/e2e/test_config_cli.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hermes_runner.errors import ExitCode
from hermes_runner.run.invocation import execute_run
from hermes_runner.rundir.store import prelock

from tests.helpers.inprocess import run_cfg
from tests.helpers.run import write_jsonl


def snapshot(root: Path) -> dict[str, bytes | None]:
    """Every path under `root` with its bytes (None: a directory)."""
    return {str(p.relative_to(root)): None if p.is_dir() else p.read_bytes() for p in sorted(root.rglob("*"))}


def cfg_for(tmp_path: Path, **values):
    cfg = run_cfg(tmp_path / "sandboxes", **values)
    cfg.dataset_file = str(write_jsonl(tmp_path / "d.jsonl", [{"prompt": "p"}]))
    return cfg


@pytest.mark.parametrize("prelocked", [False, True], ids=["in-process", "prelocked-by-the-cli"])
@pytest.mark.parametrize(
    ("files", "values", "message"),
    [
        ({"batch_0.jsonl": b"not json\n", "run.log": b"old\n", ".x.tmp": b"t"}, {}, "is not JSON"),
        ({"run.json": json.dumps({"data_config": {}}).encode(), ".y.tmp": b"t"}, {"resume": False}, "resume=false"),
    ],
    ids=["foreign-dir", "resume-false"],
)
def test_a_refused_directory_is_byte_identical(tmp_path, caplog, prelocked, files, values, message):
    run_dir = tmp_path / "outputs" / "r"
    run_dir.mkdir(parents=True)
    for name, data in files.items():
        (run_dir / name).write_bytes(data)
    before = snapshot(run_dir)
    if prelocked:
        prelock(run_dir)  # (RunDirGuard, before Hydra's job)
    result = execute_run(cfg_for(tmp_path, **values), run_dir)
    assert result.code == ExitCode.CONFIG and message in caplog.text
    assert snapshot(run_dir) == before


@pytest.mark.parametrize("prelocked", [False, True], ids=["in-process", "prelocked-by-the-cli"])
def test_a_refused_new_run_leaves_no_directory(tmp_path, prelocked):
    run_dir = tmp_path / "outputs" / "new"
    if prelocked:
        prelock(run_dir)
    cfg = cfg_for(tmp_path)
    cfg.dataset_file = str(tmp_path / "missing.jsonl")
    assert execute_run(cfg, run_dir).code == ExitCode.CONFIG
    assert not (tmp_path / "outputs").exists()
