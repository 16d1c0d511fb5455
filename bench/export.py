"""What provenance and the export manifest cost an export of a big run.

    python -m bench.export [--prompts 20000]

Builds a synthetic run directory of copies of a small real scripted run's entries (bench/report.py's
`blow_up`, with the run's invocations.jsonl so that every provenance field is read), then prints, each the best
of 3 in this process:
- reading the rows with their provenance against reading the same rows alone (the ideal: any export does that);
- `--to openai` and `--to parquet` with `--manifest` against without (the sha256 of every input and output).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.report import big_run  # noqa: E402
from hermes_runner.rundir.reader import RunData  # noqa: E402
from hermes_runner.trajectory.export import read_splits  # noqa: E402
from hermes_runner.trajectory.provenance import Provenance  # noqa: E402
from hermes_runner.trajectory.reproduce import export_one  # noqa: E402


def best(fn: Callable[[], object], n: int = 3) -> float:
    times = []
    for _ in range(n):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return min(times)


def rows_alone(run_dir: Path) -> None:
    run = RunData.load(run_dir)
    for _ in run.entries(k for k, r in run.final.items() if r["status"] in ("ok", "discarded")):
        pass


def rows_with_provenance(run_dir: Path) -> None:
    run = RunData.load(run_dir)
    read_splits(run, provenance=Provenance(run))


def main() -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--prompts", type=int, default=20000)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        sample, big = big_run(base, args.prompts)
        shutil.copy(sample / "invocations.jsonl", big / "invocations.jsonl")
        alone = best(lambda: rows_alone(big))
        with_prov = best(lambda: rows_with_provenance(big))
        print(f"prompts: {args.prompts:,}")
        print(f"rows + provenance: {with_prov:.2f}s  rows alone: {alone:.2f}s  ratio {with_prov / alone:.2f}x")
        for fmt in ("openai", "parquet"):
            plain = best(lambda f=fmt: export_one(big, f, base / f"{f}-plain", {}, manifest=False))
            manifest = best(lambda f=fmt: export_one(big, f, base / f"{f}-manifest", {}, manifest=True))
            print(f"--to {fmt}: with --manifest {manifest:.2f}s  without {plain:.2f}s  ratio {manifest / plain:.2f}x")


if __name__ == "__main__":
    main()
