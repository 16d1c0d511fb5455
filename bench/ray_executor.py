"""executor=ray against executor=local on this machine: startup cost and throughput against the ideal.

    python -m bench.ray_executor [--prompts 300] [--latency 0.25] [--workers 16]

A scripted OpenAI-compatible server answers every call after `latency` seconds; each prompt makes
two calls (one terminal command, then the answer). The ideal wall time is
prompts x 2 x latency / workers: the model calls alone, perfectly overlapped. Each run's wall time
includes everything a user waits for (for Ray: starting the local cluster and the actors).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from hermes_runner.commands.job import run_and_print  # noqa: E402
from hermes_runner.testing.scripted_server import ScriptedServer  # noqa: E402

from tests.helpers.run import base_overrides, compose_cfg, write_jsonl  # noqa: E402


def timed_run(overrides: list[str], run_dir: Path) -> tuple[float, dict]:
    cfg = compose_cfg(overrides)
    started = time.perf_counter()
    code, stats = run_and_print(cfg, run_dir)
    wall = time.perf_counter() - started
    assert code == 0 and stats["prompts"]["ok"] == stats["prompts"]["total"], (code, stats and stats["prompts"])
    return wall, stats


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--prompts", type=int, default=300)
    ap.add_argument("--latency", type=float, default=0.25)
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--cpus", type=int, default=2, help="CPUs of the local Ray cluster")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-ray-"))
    server = ScriptedServer(latency=args.latency, record=False).start()
    try:
        ds = write_jsonl(tmp / "d.jsonl", [{"prompt": f"task {i}"} for i in range(args.prompts)])
        common = [
            *base_overrides(server, tmp), f"dataset_file={ds}", "run_name=bench", f"num_workers={args.workers}",
            "sandbox.local.isolation=none",
        ]  # fmt: skip
        ideal = args.prompts * 2 * args.latency / args.workers
        actors = 2
        per_actor = -(-args.workers // actors)
        rows = [("local", *timed_run([*common], tmp / "local"))]
        ray_opts = ["executor=ray", f"executor.num_cpus={args.cpus}", f"executor.sessions_per_worker={per_actor}"]
        rows.append((f"ray ({actors} actors x {per_actor})", *timed_run([*common, *ray_opts], tmp / "ray")))
        print(f"\n{args.prompts} prompts x 2 calls, {args.latency:g}s per call, {args.workers} in flight")
        print(f"ideal (model calls only, fully overlapped): {ideal:.1f}s")
        print(f"{'executor':<24}{'wall s':>9}{'prompts/s':>11}{'ideal/wall':>12}")
        for name, wall, _ in rows:
            print(f"{name:<24}{wall:>9.1f}{args.prompts / wall:>11.1f}{ideal / wall:>12.2f}")
        local, ray_ = rows[0][1], rows[1][1]
        print(f"ray overhead vs local: {ray_ - local:+.1f}s (cluster start, actor start, shutdown)")
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
