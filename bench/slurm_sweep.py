"""A sweep through hydra/launcher=slurm (the single-node cluster of scripts/ci_slurm_setup.sh) against the same
sweep through the basic launcher (`-m`, jobs one after another in this process): what SLURM adds per job.

    python -m bench.slurm_sweep [--jobs 2] [--prompts 20] [--latency 0.1]

Each job is one model of a scripted server answering after `latency` seconds; each prompt makes two calls.
Printed: the wall time of each sweep, each job's time to its first model call (from the command's start), and
the overhead per job: (wall time - the jobs' own run time as their statistics say) / jobs for the basic launcher,
and for SLURM the wall time less the longest job's run time (its jobs run side by side).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hermes_runner.testing.scripted_server import ScriptedServer  # noqa: E402

from tests.helpers.run import write_jsonl  # noqa: E402
from tests.helpers.slurm import ensure_cluster, job_env, sweep_argv, sweep_conf  # noqa: E402


def sweep(server: ScriptedServer, argv: list[str], sweep_dir: Path) -> tuple[float, dict[str, float], list[float]]:
    """(wall time, model -> seconds to its first call, each job's run time from its statistics)."""
    server.reset()
    started = time.monotonic()
    res = subprocess.run(argv, capture_output=True, text=True, env=job_env(), timeout=1800)
    wall = time.monotonic() - started
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    first: dict[str, float] = {}
    for r in server.requests:
        first.setdefault(r.body["model"], r.at - started)
    runs = [json.loads(p.read_text())["duration_seconds"] for p in sweep_dir.glob("*/statistics.json")]
    return wall, first, runs


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--prompts", type=int, default=20)
    ap.add_argument("--latency", type=float, default=0.1)
    args = ap.parse_args()
    ensure_cluster()
    tmp = Path(tempfile.mkdtemp(prefix="bench-slurm-"))
    server = ScriptedServer(latency=args.latency).start()
    try:
        models = tuple(f"m{i}" for i in range(args.jobs))
        ds = write_jsonl(tmp / "d.jsonl", [{"prompt": f"task {i}"} for i in range(args.prompts)])
        conf = sweep_conf(tmp, server.url, ds, models)
        rows = []
        for name, launcher in (("basic (-m)", "hydra/launcher=basic"), ("slurm", "hydra/launcher=slurm")):
            sweep_dir = tmp / name.split()[0]
            argv = sweep_argv(conf, sweep_dir, f"model={','.join(models)}", name="hermes-bench")
            argv[argv.index("hydra/launcher=slurm")] = launcher
            if launcher.endswith("basic"):
                argv = [a for a in argv if not a.startswith("hydra.launcher.")]
            rows.append((name, *sweep(server, argv, sweep_dir)))
        print(f"\n{args.jobs} jobs x {args.prompts} prompts x 2 calls, {args.latency:g}s per call")
        for name, wall, first, runs in rows:
            over = (wall - sum(runs)) / len(runs) if name.startswith("basic") else wall - max(runs)
            firsts = ", ".join(f"{m} {s:.1f}s" for m, s in sorted(first.items()))
            print(f"{name:<11} wall {wall:6.1f}s  jobs' run time {sum(runs):6.1f}s  overhead per job {over:5.1f}s"
                  f"  first call: {firsts}")  # fmt: skip
    finally:
        server.stop()


if __name__ == "__main__":
    main()
