"""`hermes-export RUN --to FORMAT` (also `python -m hermes_runner.export`): a run as a dataset (trajectory/export.py)."""

from __future__ import annotations

import argparse
import logging

from hermes_runner.commands import exits
from hermes_runner.trajectory import export as exporting


@exits()
def main(argv: list[str] | None = None) -> int:
    doc = exporting.__doc__ or ""
    ap = argparse.ArgumentParser(
        prog="python -m hermes_runner.export",
        description=doc.splitlines()[0],
        epilog=doc.split("\n\n")[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("run_dir", help="a run directory, e.g. outputs/my_run")
    ap.add_argument("--to", required=True, choices=exporting.FORMATS, help="export format")
    ap.add_argument("--out", help="output directory (default: <run_dir>/export/<format>)")
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
        help="openai: also write each line's `id` and `metadata` (fields OpenAI's format does not have)",
    )
    ap.add_argument("--push-to-hub", metavar="REPO", help="also upload to this Hugging Face dataset repo")
    ap.add_argument("--private", action="store_true", help="create the Hub repo as private")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    path, counts = exporting.export(
        args.run_dir, args.to, args.out, args.reasoning, args.min_reward, args.best_of_k, args.pass_fail,
        args.only_completed, args.arguments, args.metadata,
    )  # fmt: skip
    print(f"{path}: " + ", ".join(f"{n} {split}" for split, n in counts.items()))
    if args.push_to_hub:
        print(exporting.push_to_hub(path, args.to, args.push_to_hub, args.private))
    return 0
