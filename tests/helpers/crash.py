"""The kill -9 loop of the crash tests: start the CLI in the background, kill it at random points, resume."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from tests.helpers.run import ROOT, base_overrides, read_jsonl


def start(args: list[str], log: Path) -> subprocess.Popen:
    """`python run.py ...` in the background, its output appended to `log`."""
    return subprocess.Popen(
        [sys.executable, str(ROOT / "run.py"), *args],
        cwd=ROOT,
        stdout=log.open("ab"),
        stderr=subprocess.STDOUT,
        env={**os.environ, "HYDRA_FULL_ERROR": "1"},
    )


def cli_args(server, tmp_path: Path, ds: Path, run_dir: Path, *extra: str) -> list[str]:
    return [
        *base_overrides(server, tmp_path),
        f"dataset_file={ds}",
        "run_name=crash",
        f"hydra.run.dir={run_dir}",
        *extra,
    ]


def kill_until_done(args: list[str], log: Path, rng: random.Random, max_kills: int) -> int:
    """Run the CLI, SIGKILL it 1-3 s in, up to `max_kills` times, then let it finish; return the kills that landed."""
    kills = 0
    for _ in range(30):
        proc = start(args, log)
        if kills < max_kills:
            time.sleep(rng.uniform(1.0, 3.0))
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait()
                kills += 1
                continue
        assert proc.wait(120) == 0, log.read_text()[-3000:]
        return kills
    raise AssertionError(f"the run did not finish after {kills} kills: {log.read_text()[-3000:]}")


def terminal_records(run_dir: Path) -> Counter:
    return Counter(r["key"] for r in read_jsonl(run_dir / "ledger.jsonl") if r["status"] in ("ok", "discarded"))
