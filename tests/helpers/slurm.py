"""The single-node SLURM cluster of the tests (scripts/ci_slurm_setup.sh) and sweeps sent to it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from hermes_runner.commands.launcher import SlurmState, slurm_states

from tests.helpers.run import ROOT

SETUP = ROOT / "scripts" / "ci_slurm_setup.sh"


def ensure_cluster() -> None:
    """(Re)start whichever of munged, slurmctld and slurmd is not running and wait for the node (idempotent)."""
    res = subprocess.run(["bash", str(SETUP)], capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, f"{SETUP} failed:\n{res.stdout}{res.stderr}"


def state(job_id: str) -> SlurmState | None:
    """A job's (or array task's, `123_1`) state as squeue says it; None once SLURM has forgotten it."""
    return (slurm_states([job_id]) or {}).get(job_id)


def sweep_conf(tmp_path: Path, server_url: str, dataset: Path, models: tuple[str, ...] = ("alpha", "beta")) -> Path:
    """One scripted-server model config per name and the run's settings (+experiment=sweep), in a config dir
    for hydra.searchpath."""
    conf = tmp_path / "conf"
    (conf / "model").mkdir(parents=True)
    (conf / "experiment").mkdir()
    for name in models:
        (conf / "model" / f"{name}.yaml").write_text(
            f"defaults:\n  - model_schema\n  - _self_\nname: {name}\nbase_url: {server_url}\n"
            "reasoning_api: none\nmax_retries: 0\n"
        )
    (conf / "experiment" / "sweep.yaml").write_text(
        "# @package _global_\n"
        f"dataset_file: {dataset}\nrun_name: sweep\nprogress: false\nnum_workers: 2\n"
        f"sandbox:\n  local:\n    root: {tmp_path / 'sandboxes'}\n"
    )
    return conf


def job_name(test: str) -> str:
    """The SLURM job name of a test's sweep (`scancel -n` cancels what a failed test left)."""
    return "hermes-test-" + test.split("[")[0].removeprefix("test_")[:40]


def sweep_argv(conf: Path, sweep_dir: Path, *overrides: str, name: str) -> list[str]:
    """`python run.py -m hydra/launcher=slurm ...` for a sweep of `conf`'s experiment, the response cache off,
    its SLURM jobs named `name`."""
    return [
        sys.executable, str(ROOT / "run.py"), "-m", "hydra/launcher=slurm", f"hydra.searchpath=[file://{conf}]",
        f"hydra.sweep.dir={sweep_dir}", "+experiment=sweep", "cache=off", f"hydra.launcher.name={name}",
        *overrides,
    ]  # fmt: skip


def job_env() -> dict[str, str]:
    """The environment the sweep passes on to its SLURM jobs (sbatch exports it): this checkout first."""
    return {**os.environ, "PYTHONPATH": str(ROOT)}
