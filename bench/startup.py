"""Start-up benchmark: a listing, the help page and a run's first model call, against the original runner.

    python -m bench.startup            # median of 3 of each
    python -m bench.startup --runs 5
    python -m bench.startup --repo ../other-checkout   # time another checkout's run.py (before/after)

Times, process start to exit (median of --runs, on this machine in this run):
  - `run.py list_distributions=true` (and the original's `batch_runner.py --list_distributions`, if
    hermes-agent is installed in .venv-consumers/hermes_agent, see tests/consumers/),
  - `run.py --help` and `run.py --cfg job`,
and, for a one-prompt run against the scripted server (hermes_runner/testing/scripted_server.py, no
latency), process start to the server's first request: the time to the first model call.
Target: every figure under 1 s (issue 23 point 5); the line says met or not met.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench.common import PY, ROOT, ScriptedServerProcess, write_dataset

TARGET_S = 1.0
ORIGINAL_PY = ROOT / ".venv-consumers" / "hermes_agent" / "bin" / "python"


def wall(argv: list[str], cwd: Path, env: dict | None = None) -> tuple[float, int]:
    """(seconds from start to exit, exit code) of one command, its output discarded."""
    start = time.monotonic()
    proc = subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    return time.monotonic() - start, proc.returncode


def median_wall(argv: list[str], runs: int, cwd: Path, env: dict | None = None) -> tuple[float, int]:
    times, codes = zip(*(wall(argv, cwd, env) for _ in range(runs)), strict=True)
    return statistics.median(times), max(codes)


def first_call(server: ScriptedServerProcess, work: Path, repo: Path, env: dict) -> float:
    """Seconds from process start to the first model call of a one-prompt run."""
    dataset = write_dataset(work / "one.jsonl", 1)
    run_dir = work / f"run-{time.monotonic_ns()}"
    server.stats(reset=True)
    start = time.monotonic()
    argv = [PY, str(repo / "run.py"), "model=local_server", f"model.base_url={server.url}", "model.name=scripted"]
    argv += [f"dataset_file={dataset}", "run_name=startup", f"hydra.run.dir={run_dir}"]
    argv += ["sandbox.local.isolation=none", f"sandbox.local.root={work / 'sandboxes'}", "cache=off"]  # each run calls
    subprocess.run(argv, cwd=work, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True, env=env)
    first = server.stats()["first_request"]
    if first is None:
        raise RuntimeError("the run made no model call")
    return first - start


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=3, help="runs of each command (the median is shown)")
    ap.add_argument("--repo", type=Path, default=ROOT, help="the checkout whose run.py is timed (default: this one)")
    args = ap.parse_args()
    repo = args.repo.resolve()
    env = {**os.environ, "PYTHONPATH": str(repo)}
    rows: list[tuple[str, float, str]] = []
    with tempfile.TemporaryDirectory(prefix="startup-") as tmp:
        work = Path(tmp)
        for label, extra in (
            ("run.py list_distributions=true", ["list_distributions=true"]),
            ("run.py --help", ["--help"]),
            ("run.py --cfg job", ["--cfg", "job"]),
        ):
            seconds, code = median_wall([PY, str(repo / "run.py"), *extra], args.runs, work, env)
            rows.append((label, seconds, "" if code == 0 else f"exit {code}"))
        with ScriptedServerProcess(0.0, work / "server.log") as server:
            seconds = statistics.median(first_call(server, work, repo, env) for _ in range(args.runs))
        rows.append(("run.py (1 prompt): start to first model call", seconds, ""))
        if ORIGINAL_PY.exists():
            batch_runner = ["-m", "batch_runner", "--list_distributions"]
            seconds, code = median_wall([str(ORIGINAL_PY), *batch_runner], args.runs, work)
            note = "(original, for the ratio)" + (f" exit {code}" if code else "")
            rows.append(("hermes-agent batch_runner --list_distributions", seconds, note))
    ours = [s for label, s, _ in rows if label.startswith("run.py")]
    for label, seconds, note in rows:
        print(f"startup: {label:<50} {seconds:6.2f} s  {note}")
    original = next((s for label, s, _ in rows if "batch_runner" in label), None)
    if original:
        print(f"startup: listing vs the original: {rows[0][1] / original:.2f}x its time")
    met = all(s < TARGET_S for s in ours)
    print(f"startup: target < {TARGET_S:.0f} s for listings and the first model call: {'met' if met else 'not met'}")


if __name__ == "__main__":
    main()
