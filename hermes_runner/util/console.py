"""Console output: one stderr console shared by log lines and the progress bar."""

from __future__ import annotations

import logging
import sys

from rich.console import Console
from rich.logging import RichHandler

console = Console(stderr=True)


def console_handler() -> logging.Handler:
    """Rich log lines on a terminal; plain, unwrapped lines when stderr is a pipe or file."""
    if sys.stderr.isatty():
        return RichHandler(console=console, show_path=False, markup=False)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("[%(asctime)s][%(levelname)s] %(message)s", "%H:%M:%S"))
    return handler
