"""The console commands: argv in; what the console shows and the exit code out (the top of the house).

runner (`hermes-runner`, `python run.py`: the Hydra app) and job (the Hydra job it runs), score (`hermes-score`),
cache (`hermes-cache`), export (`hermes-export`), merge (`hermes-merge`), report (`hermes-report`): a command's
arguments, its printing and its exit code; its logic lives in its room. Only this package prints (but the
progress bar, run/progress, and the log handlers, util/console). It may import every room but testing/.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable

from hermes_runner.errors import ConfigError, ExitCode, ExportError, NotARunDir, RunDirBusy, RunnerError

BAD_INPUT = (ConfigError, RunDirBusy, NotARunDir, ExportError)  # what the user gave is refused: nothing was done
Main = Callable[[list[str] | None], int]


def refusal(why: BaseException | str, code: int | None = None, prefix: str = "error") -> int:
    """Say on stderr, in one line, why a command stops; return its exit code: `code`, else 2 (ExitCode.CONFIG)
    for bad input (a message, or one of BAD_INPUT), 1 for another runner error."""
    print(f"{prefix}: {why}", file=sys.stderr)
    if code is None:
        code = ExitCode.FAILED if isinstance(why, RunnerError) and not isinstance(why, BAD_INPUT) else ExitCode.CONFIG
    return int(code)


def exits(prefix: str = "error") -> Callable[[Main], Main]:
    """A command's `main(argv) -> exit code`, ended by `refusal` when it raises a runner error."""

    def wrap(main: Main) -> Main:
        @functools.wraps(main)
        def run(argv: list[str] | None = None) -> int:
            try:
                return main(argv)
            except RunnerError as exc:
                return refusal(exc, prefix=prefix)

        return run

    return wrap
