"""Console output: one stderr console shared by log lines and the progress display."""

from __future__ import annotations

import logging
import sys

from rich.console import Console
from rich.logging import RichHandler

console = Console(stderr=True)
FILE_ONLY = "file_only"  # `extra={FILE_ONLY: True}`: a log record for the log files, not the console


def _not_file_only(record: logging.LogRecord) -> bool:
    return not getattr(record, FILE_ONLY, False)


def console_handler() -> logging.Handler:
    """Rich log lines on a terminal; plain, unwrapped lines when stderr is a pipe or file."""
    if sys.stderr.isatty():
        handler: logging.Handler = RichHandler(console=console, show_path=False, markup=False)
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("[%(asctime)s][%(levelname)s] %(message)s", "%H:%M:%S"))
    handler.addFilter(_not_file_only)  # (lines the live display already shows, e.g. the plain progress line)
    return handler
