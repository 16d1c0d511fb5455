"""`hermes-export RUN --to FORMAT` (also `python -m hermes_runner.export`): a run as a dataset (trajectory/export.py)."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from hermes_runner.commands import exits
from hermes_runner.rundir.reader import find_runs
from hermes_runner.trajectory import export as exporting
from hermes_runner.trajectory import reproduce as reproducing


def parser() -> argparse.ArgumentParser:
    doc = exporting.__doc__ or ""
    ap = argparse.ArgumentParser(
        prog="python -m hermes_runner.export",
        description=doc.splitlines()[0],
        epilog=doc.split("\n\n")[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("run_dir", nargs="?", help="a run directory, e.g. outputs/my_run, or a sweep of them")
    ap.add_argument(
        "--to",
        choices=(*exporting.FORMATS, reproducing.ALL),
        help="export format; `all`: every format, each into <run_dir>/export/<format> (a sweep: every job's)",
    )
    ap.add_argument(
        "--out", help="output directory (default: <run_dir>/export/<format>; with `all` or a sweep: their parent)"
    )
    ap.add_argument(
        "--manifest",
        action="store_true",
        help=f"also write {reproducing.MANIFEST_FILE} beside the files: run dir identity, options, provenance "
        "hashes and their texts, versions, the sha256 of every file (with --to all: always)",
    )
    ap.add_argument(
        "--reproduce",
        metavar="MANIFEST",
        help="rebuild the export a manifest describes, byte for byte, from its run dir (or RUN_DIR), into its "
        "directory (or --out); fails naming the file when the run dir or a rebuilt file differs",
    )
    ap.add_argument(
        "--reasoning",
        choices=exporting.REASONING,
        help="chat/openai: reasoning as `reasoning_content` (chat's default), as a <think> block in the content, "
        "or dropped (openai's default: OpenAI's format has no reasoning field)",
    )
    ap.add_argument("--min-reward", type=float, help="keep only kept rows whose reward is at least this")
    ap.add_argument("--best-of-k", action="store_true", help="keep only the best sample of each row (highest reward)")
    ap.add_argument(
        "--pass-fail",
        action="store_true",
        help="splits: kept rows as `pass` / `fail` (by --min-reward, else the primary scorer's `passed`)",
    )
    ap.add_argument(
        "--only-completed",
        action="store_true",
        help="only trajectories that ended with a final answer (not partial, not stopped at max_turns)",
    )
    ap.add_argument(
        "--arguments",
        choices=exporting.ARGUMENTS,
        help="chat: tool-call arguments as JSON objects, as chat templates take them (default), or as JSON text "
        "(openai: always JSON text, as OpenAI's format has them)",
    )
    ap.add_argument(
        "--metadata",
        action="store_true",
        help="openai: also write each line's `id`, `metadata` and `provenance` (fields OpenAI's format does not have)",
    )
    ap.add_argument("--discarded", action="store_true", help="atif format: the discarded trajectories too")
    ap.add_argument(
        "--drift",
        choices=("mask", "drop"),
        default="mask",
        help="tokens format: a row whose turns drift keeps its tokens with the drifting turns masked (default), "
        "or is left out",
    )
    ap.add_argument("--push-to-hub", metavar="REPO", help="also upload to this Hugging Face dataset repo")
    ap.add_argument("--private", action="store_true", help="create the Hub repo as private")
    return ap


@exits()
def main(argv: list[str] | None = None) -> int:
    ap = parser()
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    if args.reproduce:
        done = reproducing.reproduce(args.reproduce, args.run_dir, args.out)
        print(f"{done.path}: reproduced byte for byte ({_counts(done.counts)})")
        return 0
    if not args.run_dir or not args.to:
        ap.error("RUN_DIR and --to FORMAT are required (or --reproduce MANIFEST)")
    options = {
        "reasoning": args.reasoning, "min_reward": args.min_reward, "best": args.best_of_k,
        "pass_fail": args.pass_fail, "only_completed": args.only_completed, "arguments": args.arguments,
        "metadata": args.metadata, "discarded": args.discarded, "drift": args.drift,
    }  # fmt: skip
    if args.pass_fail and args.to not in ("splits", reproducing.ALL):
        ap.error("--pass-fail makes splits: use it with --to splits (or all)")
    if args.push_to_hub and (args.to == reproducing.ALL or len(find_runs(args.run_dir)) > 1):
        ap.error("--push-to-hub uploads one export: give one run dir and one format")
    manifest = args.manifest or args.to == reproducing.ALL
    done = reproducing.export_many(args.run_dir, args.to, args.out, options, manifest)
    for d in done:  # one line per export: a sweep's name each job (by its dir under the sweep)
        job = f"{d.run_dir.relative_to(args.run_dir)} " if d.run_dir != Path(args.run_dir) else ""
        where = f"{job}{d.fmt}: " if len(done) > 1 else ""
        print(f"{where}{d.path}: {_counts(d.counts)}")
    if args.push_to_hub:
        print(exporting.push_to_hub(done[0].path, args.to, args.push_to_hub, args.private))
    return 0


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{n} {split}" for split, n in counts.items())
