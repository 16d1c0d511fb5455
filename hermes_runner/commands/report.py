"""`hermes-report DIR` (also `python -m hermes_runner.report`): the report page of a run or sweep (report/page.py)."""

from __future__ import annotations

import argparse

from hermes_runner.commands import exits
from hermes_runner.report import page
from hermes_runner.report.viewer import MAX_CHARS, MAX_TRAJECTORIES
from hermes_runner.rundir.layout import REPORT


@exits()
def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m hermes_runner.report", description=page.__doc__.splitlines()[0])
    ap.add_argument("dir", help="a run directory (outputs/<run_name>) or a sweep directory holding job subdirectories")
    ap.add_argument("--out", help=f"where to write the page (default: <dir>/{REPORT})")
    ap.add_argument(
        "--max-trajectories",
        type=int,
        default=MAX_TRAJECTORIES,
        help=f"trajectories embedded in the viewer, sampled across statuses (default {MAX_TRAJECTORIES})",
    )
    ap.add_argument(
        "--max-chars",
        type=int,
        default=MAX_CHARS,
        help=f"characters shown per message before it is cut (default {MAX_CHARS})",
    )
    args = ap.parse_args(argv)
    if args.max_trajectories < 0 or args.max_chars < 100:
        ap.error("--max-trajectories must be >= 0 and --max-chars >= 100")
    print(page.build_report(args.dir, args.out, args.max_trajectories, args.max_chars))
    return 0
