"""`hermes-merge OUT SHARD...` (also `python -m hermes_runner.merge`): one run of a sharded run's dirs (rundir/merge.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from hermes_runner.commands import exits
from hermes_runner.rundir.layout import TRAJECTORIES
from hermes_runner.rundir.merge import merge


@exits("merge refused")
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m hermes_runner.merge",
        description="Combine the run dirs of a sharded run into one trajectories.jsonl and statistics.json.",
    )
    parser.add_argument("out_dir", type=Path, help="directory for the merged outputs")
    parser.add_argument("shard_dirs", type=Path, nargs="+", help="run directories of the shards")
    parser.add_argument("--partial", action="store_true", help="merge even if some shards are missing")
    args = parser.parse_args(argv)
    stats = merge(args.out_dir, args.shard_dirs, args.partial)
    p = stats["prompts"]
    print(
        f"merged {len(args.shard_dirs)} shards: {stats['trajectories']} trajectories, {p['discarded']} discarded, "
        f"{p['failed']} failed, {p['pending']} pending of {p['total']} -> {args.out_dir / TRAJECTORIES}"
    )
    return 0
