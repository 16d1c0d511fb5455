"""A sweep's index: each job's status from its exit code, the sweep's code the worst of its jobs'."""

from __future__ import annotations

from hermes_runner.errors import ExitCode
from hermes_runner.rundir.sweep import read_jobs, record_job, status_of, worst


def test_status_and_worst_code():
    assert [status_of(c) for c in (0, 1, 4, 130, 77)] == ["done", "failed", "endpoint_down", "interrupted", "77"]
    assert worst([]) == ExitCode.DONE
    assert worst([0, 4, 1]) == ExitCode.ENDPOINT_DOWN
    assert worst([0, ExitCode.INTERRUPTED, 4]) == ExitCode.INTERRUPTED


def test_a_job_line_is_replaced_not_repeated(tmp_path):
    record_job(tmp_path, "model=a", ["model=a"], "cancelled", 130, "SLURM job 7_0: CANCELLED")
    record_job(tmp_path, "model=b", ["model=b"], "done", 0)
    record_job(tmp_path, "model=a", ["model=a"], "done", 0)  # the rerun
    rows = read_jobs(tmp_path)
    assert {d: (r["status"], r["exit_code"], r["error"]) for d, r in rows.items()} == {
        "model=a": ("done", 0, None),
        "model=b": ("done", 0, None),
    }
