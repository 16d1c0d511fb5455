"""The real consumers of our files, each in its own venv made by scripts/consumer_venvs.sh.

`run_consumer(name, code, *args)` runs `code` (a Python script) with that venv's interpreter and
returns the completed process; a missing venv fails the test with the command that makes it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
VENVS = ROOT / ".venv-consumers"


def consumer_python(name: str) -> Path:
    py = VENVS / name / "bin" / "python"
    if not py.exists():
        pytest.fail(f"consumer venv {name!r} is missing: run `scripts/consumer_venvs.sh` (make test does it)")
    return py


def run_consumer(name: str, code: str, *args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run `code` in the consumer venv `name`; fails the test (with stderr) on a non-zero exit."""
    proc = subprocess.run(
        [str(consumer_python(name)), "-c", code, *args], capture_output=True, text=True, timeout=timeout
    )
    if proc.returncode != 0:
        pytest.fail(f"{name} failed (exit {proc.returncode}):\n{proc.stdout[-4000:]}\n{proc.stderr[-6000:]}")
    return proc
