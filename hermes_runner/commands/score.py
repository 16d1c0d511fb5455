"""`hermes-score RUN +scorer@scorers.NAME=KIND ...`: score a finished run again (run/rescore.py)."""

from __future__ import annotations

import argparse
import logging

from hermes_runner.commands import exits
from hermes_runner.errors import ExitCode
from hermes_runner.report.page import write_report_quietly
from hermes_runner.run import rescore as rescoring


@exits()
def main(argv: list[str] | None = None) -> int:
    doc = rescoring.__doc__ or ""
    ap = argparse.ArgumentParser(
        prog="hermes-score",
        description=doc.splitlines()[0],
        epilog=doc.split("\n\n", 1)[1],
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    ap.add_argument("run_dir", help="a finished run directory, e.g. outputs/my_run")
    ap.add_argument("overrides", nargs="+", help="Hydra overrides that add scorers: +scorer@scorers.NAME=KIND ...")
    ap.add_argument("--force", action="store_true", help="score again prompts the given scorers scored already")
    ap.add_argument("--concurrency", type=int, default=8, help="prompts scored at once (judge calls in flight)")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(message)s")
    out = rescoring.rescore(args.run_dir, args.overrides, args.force, max(1, args.concurrency))
    print(f"{args.run_dir}: {out['scored']} scored, {out['skipped']} already scored, {out['errors']} scorer errors")
    if (report := write_report_quietly(args.run_dir)) is not None:  # the page shows the new scores too
        print(f"Report: {report}")
    if out["stopped_by_budget"]:
        print(f"stopped by the budget: {out['stopped_by_budget']}")
        return int(ExitCode.BUDGET)
    return 0
